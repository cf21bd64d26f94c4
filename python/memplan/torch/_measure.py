"""Measurement of one eager CPU step (torch.profiler memory events)."""
import gc
import statistics
import time
from typing import Any, Callable, Dict, Optional, Sequence, Union

import torch
import torch.nn as nn

from ._apply import apply_plan
from ._common import SEED, plain_tensor_attributes
from ._spec import forward_and_loss, make_target, step_loss


def _tensor_bytes(ts):
    seen, n = set(), 0
    for t in ts:
        if id(t) not in seen:
            seen.add(id(t))
            n += t.numel() * t.element_size()
    return n


def _peak_from_kineto(prof):
    """(peak above start, end above start, number of events) from the profiler's
    [memory] events: event.nbytes() is +size on alloc, -size on free, for c10
    CPU allocations made while profiling. (Debian's build has no kineto trace
    export, so the events are read from prof.profiler.kineto_results.)"""
    evs = [e for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    start = (lambda e: e.start_ns()) if evs and hasattr(evs[0], "start_ns") else \
        (lambda e: e.start_us())
    evs.sort(key=start)  # stable: keeps record order on ties
    cur = peak = 0
    for e in evs:
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak, cur, len(evs)


def _peak_stack(prof):
    """Cross-check from the event tree (allocator running total) and the op
    stack around the peak allocation."""
    allocs = []

    def walk(node, stack):
        ef = node.extra_fields
        if hasattr(ef, "total_allocated") and ef.device.type == "cpu":
            allocs.append((node.start_time_ns, ef.total_allocated, ef.alloc_size, stack))
        for c in node.children:
            walk(c, stack + [node.name] if node.name != "[memory]" else stack)

    try:
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except AttributeError:
        return None, None
    for r in roots:
        walk(r, [])
    if not allocs:
        return None, None
    allocs.sort(key=lambda a: a[0])
    start = allocs[0][1] - allocs[0][2]
    top = max(allocs, key=lambda a: a[1])
    return top[1] - start, " > ".join(top[3]) or None


def step_seconds(model: nn.Module, inputs: Sequence[torch.Tensor], target: Optional[torch.Tensor],
                 repeats: int = 3, loss_fn: Optional[Callable[..., torch.Tensor]] = None,
                 autocast: Optional[str] = None) -> float:
    """Median wall time of `repeats` eager training steps (grads None,
    forward, loss, backward) after one warm-up step, one intra-op thread."""
    torch.set_num_threads(1)
    times = []
    for _ in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        step_loss(model, inputs, target, loss_fn, autocast).backward()
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def measure(model: nn.Module, example_inputs: Any, target: Optional[torch.Tensor] = None,
            plan: Union[None, str, Dict[str, Any]] = None, threads: int = 1,
            loss_fn: Optional[Callable[..., torch.Tensor]] = None,
            autocast: Optional[str] = None, hold_outputs: bool = True,
            compile: Optional[str] = None) -> Dict[str, Any]:
    """Peak memory of one eager CPU training step (forward, loss, backward,
    .grad None before), after one unmeasured warm-up step. With `plan`, the
    plan's modules are checkpointed first (on the model itself). loss_fn,
    autocast and hold_outputs as in export(): with hold_outputs the step
    keeps the model's output until its backward has run. compile: the
    step runs torch.compile(model, backend=compile) (the warm-up step
    compiles; the plan, if any, is applied first). Returns a
    dict: peak_bytes = resident_bytes (parameters, buffers, plain tensor
    attributes, inputs) + peak
    above the start of the step."""
    from torch.profiler import ProfilerActivity, profile
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    if target is None and loss_fn is None:
        target = make_target(model, inputs)
    wrapped = apply_plan(model, plan) if plan is not None else []
    run = model if compile is None else torch.compile(model, backend=compile)
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(threads)  # fewer per-thread scratch buffers, stabler numbers
    try:
        def step():
            model.zero_grad(set_to_none=True)
            out, loss = forward_and_loss(run, inputs, target, loss_fn, autocast)
            if not hold_outputs:
                del out
                out = None
            loss.backward()
            return loss, out

        torch.manual_seed(SEED + 3)
        step()  # warm-up: lazy initialisation, caches
        model.zero_grad(set_to_none=True)
        gc.collect()
        resident = _tensor_bytes(list(model.parameters()) + list(model.buffers())
                                 + [t for _, t in plain_tensor_attributes(model)]
                                 + list(inputs) + ([] if target is None else [target]))
        torch.manual_seed(SEED + 3)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            held = step()  # (loss, output)
            del held
    finally:
        torch.set_num_threads(prev_threads)
    peak, end, n_events = _peak_from_kineto(prof)
    tree_peak, stack = _peak_stack(prof)
    grads = _tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
    return {
        "torch": torch.__version__,
        "peak_bytes": resident + peak,
        "resident_bytes": resident,
        "peak_above_start": peak,
        "end_above_start": end,
        "param_grad_bytes": grads,
        "checkpointed_modules": wrapped,
        "outputs_held": hold_outputs,
        "autocast": autocast,
        "compile": compile,
        "peak_op_stack": stack,
        "memory_events": n_events,
        "event_tree_peak_above_start": tree_peak,
        "method": "torch.profiler(profile_memory=True): running sum of CPU [memory] "
                  f"event sizes, {threads} intra-op thread(s), after 1 warm-up step",
    }
