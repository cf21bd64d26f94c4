#!/usr/bin/python3
"""Measure the real peak memory of one eager PyTorch training step (CPU).

    /usr/bin/python3 exporters/pytorch/measure_eager.py --model cnn_small --batch 8 --json OUT.json

The step is forward + cross-entropy + backward (no optimizer), with every
parameter .grad set to None first, so the gradients are allocated inside the
measured step. One unmeasured warm-up step runs first.

Method (torch 1.13): torch.profiler with profile_memory=True records one
"[memory]" event per c10 CPU allocation/free made while profiling
(prof.profiler.kineto_results.events(); event.nbytes() is +size on alloc,
-size on free, and only allocations made during profiling are ever counted
as freed). The running sum of nbytes in time order is the net memory allocated
since the step started; its maximum is peak_above_start. The allocation
nodes of prof.profiler.kineto_results.experimental_event_tree() carry the
allocator's running total_allocated and the enclosing ops: used as a
cross-check and to name the op at the peak. (This Debian build has no kineto:
export_chrome_trace() writes no [memory] events, so "Total Allocated" from the
chrome trace is not usable here.) Memory that does not go through the c10 allocator (e.g.
oneDNN's internal scratchpads) is invisible to this method.
"""
import argparse
import gc
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def step(model, x, target):
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    return loss


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def peak_from_kineto(prof):
    """(peak_above_start, end_above_start, number of events) from [memory] events."""
    evs = [e for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    evs.sort(key=lambda e: e.start_us())  # stable: keeps record order on ties
    cur = peak = 0
    for e in evs:
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak, cur, len(evs)


def peak_from_event_tree(prof):
    """Cross-check from the profiler's event tree: allocation nodes carry the
    allocator's running 'total_allocated'. Returns (peak above the value before
    the first event, the op stack around the peak allocation)."""
    allocs = []

    def walk(node, stack):
        ef = node.extra_fields
        if hasattr(ef, "total_allocated") and ef.device.type == "cpu":
            allocs.append((node.start_time_ns, ef.total_allocated, ef.alloc_size, stack))
        for c in node.children:
            walk(c, stack + [node.name] if node.name != "[memory]" else stack)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, [])
    if not allocs:
        return None, None
    allocs.sort(key=lambda a: a[0])
    start = allocs[0][1] - allocs[0][2]
    top = max(allocs, key=lambda a: a[1])
    return top[1] - start, " > ".join(top[3]) or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(models.MODELS), default="cnn_small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--json", help="write the report here (default: stdout only)")
    args = ap.parse_args()

    torch.set_num_threads(1)  # fewer per-thread scratch buffers, stabler numbers
    model, x, target = models.build(args.model, args.batch)

    # Warm-up (lazy initialisation, kernel caches), then back to a clean state.
    model.zero_grad(set_to_none=True)
    step(model, x, target)
    model.zero_grad(set_to_none=True)
    gc.collect()
    assert all(p.grad is None for p in model.parameters())

    resident = tensor_bytes(list(model.parameters()) + list(model.buffers()) + [x, target])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 record_shapes=True) as prof:
        loss = step(model, x, target)

    peak, end, n_events = peak_from_kineto(prof)
    tree_peak, peak_stack = peak_from_event_tree(prof)
    grads = tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
    report = {
        "model": args.model,
        "batch": args.batch,
        "torch": torch.__version__,
        "peak_bytes": resident + peak,
        "resident_bytes": resident,
        "peak_above_start": peak,
        "end_above_start": end,           # what survives the step: grads + loss
        "param_grad_bytes": grads,
        "peak_op_stack": peak_stack,    # profiled ops enclosing the peak allocation
        "memory_events": n_events,
        "event_tree_peak_above_start": tree_peak,
        "loss": float(loss),
        "method": "torch.profiler(profile_memory=True): running sum of [memory] "
                  "event nbytes from prof.profiler.kineto_results.events(), CPU "
                  "c10 allocator, 1 intra-op thread, after 1 warm-up step; "
                  "cross-checked with the event tree's total_allocated",
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
