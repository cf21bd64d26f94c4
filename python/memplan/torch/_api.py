"""estimate() and plan(): memplan's answer for a model in the user's own script.

Both export the training step once (memplan.torch.export: AOTAutograd's
forward and backward graphs of the model, its loss and its inputs, traced
on a copy of the model on the model's own device; a model on `meta` is
traced without data) and run the memplan binary shipped with the package
on that graph: `memplan analyze` for estimate(), `memplan plan` for plan().
The results are plain objects over the binary's JSON report (`.report`).

What the budget bounds (as `memplan plan --budget-of`): on device "cpu" the
allocation-level peak (the CPU has no caching allocator); on "cuda" what
PyTorch's CUDA caching allocator reserves; on "h100", "h200" or "a100" the
whole device (reserved plus the CUDA context).
"""
import json
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

from .. import _binary
from ..units import Size, format_size, parse_size
from ._apply import apply_plan
from ._export import export
from ._graph import dumps

DEVICES = ("cpu", "cuda", "h100", "h200", "a100")
GPU_PRESETS = ("h100", "h200", "a100")
PARALLEL = ("none", "ddp", "zero1", "fsdp")
GRANULARITIES = ("module", "sac", "op")
# torch.optim classes memplan models, by the state they keep per parameter.
OPTIMIZERS = "torch.optim.SGD (with or without momentum), Adam, AdamW"

Inputs = Union[torch.Tensor, Sequence[torch.Tensor]]
LossFn = Callable[..., torch.Tensor]


def optimizer_name(optimizer: Any) -> str:
    """memplan's --optimizer for a torch.optim.Optimizer instance or class:
    "sgd", "momentum", "adam" or "adamw"; None gives "none". Anything else
    raises ValueError naming what is supported."""
    if optimizer is None:
        return "none"
    cls = optimizer if isinstance(optimizer, type) else type(optimizer)
    groups = [] if isinstance(optimizer, type) else getattr(optimizer, "param_groups", [])
    if issubclass(cls, torch.optim.AdamW):
        name = "adamw"
    elif issubclass(cls, torch.optim.Adam):
        name = "adam"
    elif issubclass(cls, torch.optim.SGD):
        name = "momentum" if any(g.get("momentum", 0) for g in groups) else "sgd"
    else:
        raise ValueError(f"optimizer {cls.__module__}.{cls.__qualname__}: memplan models "
                         f"{OPTIMIZERS}")
    if name.startswith("adam") and any(g.get("amsgrad") for g in groups):
        raise ValueError(f"optimizer {cls.__qualname__}(amsgrad=True): memplan models "
                         f"{OPTIMIZERS} without amsgrad")
    return name


def _default_budget_of(device: str) -> str:
    if device in GPU_PRESETS:
        return "device"
    return "reserved" if device == "cuda" else "allocated"


class _Step:
    """One exported step and the memplan flags that describe how it runs."""

    def __init__(self, graph: Dict[str, Any], device: str, step_args: List[str]):
        self.graph = graph
        self.device = device
        self.step_args = step_args  # --optimizer, --parallel, --alloc-conf, ...
        self.text = dumps(graph)

    def run(self, command: str, args: Sequence[str], check_codes: Sequence[int] = (0,),
            report: bool = True) -> Tuple[Optional[Dict[str, Any]], str, int]:
        """`memplan COMMAND graph ARGS` on this step; (JSON report, stdout, exit code)."""
        with tempfile.TemporaryDirectory(prefix="memplan-") as tmp:
            path = os.path.join(tmp, "step.graph.json")
            with open(path, "w") as f:
                f.write(self.text)
            out = os.path.join(tmp, "report.json")
            extra = ["--json", out] if report else []
            p = _binary.run([command, path, *args, *extra], check_codes=check_codes)
            doc = None
            if report:
                with open(out) as f:
                    doc = json.load(f)
            return doc, p.stdout, p.returncode


def _export_step(model: nn.Module, example_inputs: Inputs, loss_fn: Optional[LossFn],
                 target: Optional[torch.Tensor], optimizer: Any, device: str,
                 alloc_conf: Optional[str], parallel: Optional[str], world_size: int,
                 extra_args: Sequence[str], autocast: Optional[str] = None,
                 hold_outputs: bool = True, compile: Optional[str] = None,
                 compile_config: Optional[Dict[str, Any]] = None,
                 check_graph_breaks: bool = True) -> _Step:
    if device not in DEVICES:
        raise ValueError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
    parallel = parallel or "none"
    if parallel not in PARALLEL:
        raise ValueError(f"parallel {parallel!r}: expected one of {', '.join(PARALLEL)} "
                         "(pipeline: pass memplan's --pp-* flags in extra_args)")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size {world_size!r}: expected an int >= 1")
    if world_size > 1 and parallel == "none":
        raise ValueError(f"world_size {world_size}: needs parallel= (one of "
                         f"{', '.join(PARALLEL[1:])})")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    first = next(model.parameters(), None)
    if first is not None and first.is_meta:  # traced without data
        inputs = tuple(x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs)
        target = target.to("meta") if isinstance(target, torch.Tensor) else target
    graph = export(model, inputs, target, name=type(model).__name__,
                   target_device="cpu" if device == "cpu" else "cuda", loss_fn=loss_fn,
                   autocast=autocast, hold_outputs=hold_outputs, compile=compile,
                   compile_config=compile_config, check_graph_breaks=check_graph_breaks)
    args = ["--optimizer", optimizer_name(optimizer)]
    if parallel != "none":
        args += ["--parallel", parallel, "--world-size", str(world_size)]
    if alloc_conf:
        args += ["--alloc-conf", alloc_conf]
    return _Step(graph, device, args + list(extra_args))


class Estimate:
    """What one training step of the model needs, predicted before it runs.

    Invariants: peak_bytes <= reserved_bytes when the report has a reserved
    prediction; device_total_bytes is None unless a GPU preset was named.
    """

    def __init__(self, step: _Step, report: Dict[str, Any], summary: str):
        self._step = step
        self.report: Dict[str, Any] = report  # the memplan.report/1 of `memplan analyze`
        self.summary: str = summary  # the text `memplan analyze` prints
        self.device: str = step.device
        self.peak_bytes: int = report["peak_bytes"]  # allocation-level peak
        self.lower_bound_bytes: int = report["lower_bound_bytes"]  # no schedule goes lower
        reserved = report.get("reserved") or {}
        self.reserved_bytes: Optional[int] = reserved.get("peak_bytes")
        device = report.get("device_memory") or {}
        self.device_total_bytes: Optional[int] = device.get("total_peak_bytes")
        self.budget_of: str = _default_budget_of(step.device)

    @property
    def graph(self) -> Dict[str, Any]:
        """The exported memplan.graph/1 document."""
        return self._step.graph

    def bounded_bytes(self, of: Optional[str] = None) -> int:
        """The bytes a budget bounds: `of` "allocated", "reserved" or
        "device" (default: the device's, see the module docstring)."""
        of = of or self.budget_of
        value = {"allocated": self.peak_bytes, "reserved": self.reserved_bytes,
                 "device": self.device_total_bytes}.get(of, -1)
        if value == -1:
            raise ValueError(f"of={of!r}: expected allocated, reserved or device")
        if value is None:
            raise ValueError(f"of={of!r}: this estimate has no {of} prediction (device="
                             f"{self.device!r}; name a GPU preset for device)")
        return value

    def fits(self, budget: Size, of: Optional[str] = None) -> bool:
        """True when bounded_bytes(of) <= budget (bytes or a text like "24GiB")."""
        return self.bounded_bytes(of) <= parse_size(budget)

    def alive_at_peak(self, top: int = 10) -> List[Dict[str, Any]]:
        """The `top` largest tensors alive at the peak, largest first: dicts
        with tensor, bytes, kind, producer (the op) and scope (the module)."""
        live = self.report["live_at_peak"]
        if top > len(live) and self.report["live_at_peak_count"] > len(live):
            doc, _, _ = self._step.run("analyze", [*self._step.step_args, *self._device_args(),
                                                   "--top", str(top), "-q"])
            live = doc["live_at_peak"]
        return [dict(t) for t in live[:top]]

    def _device_args(self) -> List[str]:
        return ["--device", self.device] if self.device in GPU_PRESETS else []

    def save_graph(self, path: str) -> None:
        """Writes the exported graph (memplan.graph/1) to `path`."""
        with open(path, "w") as f:
            f.write(self._step.text)

    def save_trace(self, path: str) -> None:
        """Writes a Chrome trace of the step (Perfetto, chrome://tracing)."""
        self._step.run("analyze", [*self._step.step_args, *self._device_args(), "--trace",
                                   os.path.abspath(path), "-q"], report=False)

    def save_html(self, path: str) -> None:
        """Writes memplan's HTML page of memory over the step."""
        self._step.run("report", [*self._step.step_args, *self._device_args(), "--html",
                                  os.path.abspath(path), "-q"], report=False)

    def save_snapshot(self, path: str) -> None:
        """Writes the predicted step as a torch.cuda.memory._snapshot() pickle
        (open it in pytorch.org/memory_viz)."""
        self._step.run("snapshot", [*self._step.step_args, "-o", os.path.abspath(path), "-q"],
                       report=False)

    def __repr__(self) -> str:
        parts = [f"peak {format_size(self.peak_bytes)}"]
        if self.reserved_bytes is not None:
            parts.append(f"reserved {format_size(self.reserved_bytes)}")
        if self.device_total_bytes is not None:
            parts.append(f"device {format_size(self.device_total_bytes)}")
        return f"Estimate({', '.join(parts)})"


def estimate(model: nn.Module, example_inputs: Inputs, *, loss_fn: Optional[LossFn] = None,
             target: Optional[torch.Tensor] = None, optimizer: Any = None, device: str = "cpu",
             alloc_conf: Optional[str] = None, parallel: Optional[str] = None,
             world_size: int = 1, extra_args: Sequence[str] = (),
             autocast: Optional[str] = None, hold_outputs: bool = True,
             compile: Optional[str] = None,
             compile_config: Optional[Dict[str, Any]] = None,
             check_graph_breaks: bool = True) -> Estimate:
    """Predicts the memory of one training step of `model` on `example_inputs`.

    The step: grads None, forward, loss, backward, then the optimizer step
    when `optimizer` is given (a torch.optim.Optimizer instance or class:
    SGD, Adam, AdamW). The loss: loss_fn(output, target), loss_fn(output)
    when target is None, or, without loss_fn, cross-entropy against `target`
    (random class ids shaped like the output when None). device: "cpu",
    "cuda" or a GPU preset ("h100", "h200", "a100": device_total_bytes and
    the CUDA context too). alloc_conf: PYTORCH_CUDA_ALLOC_CONF text.
    parallel: "ddp", "zero1" or "fsdp" across `world_size` ranks (one rank's
    step). extra_args: more `memplan analyze` flags. autocast: "bfloat16" or
    "float16": the forward and loss run under torch.autocast (device "cpu"
    only). hold_outputs: the loop keeps the model's output alive through the
    backward (`out = model(x); loss_fn(out, y).backward()`, the default);
    False: it drops it once the loss is computed (HF Trainer, Lightning).
    Precision, frozen weights, LoRA and gradient checkpointing are the
    model's own: set them on the model (or with prepare_model) first. The
    model is not changed and not moved; a model on the meta device is traced
    without data. compile: "aot_eager" or "inductor": the step as
    torch.compile(model, backend=compile) runs it (docs/compile.md: exact
    for aot_eager; for inductor an estimate, over or under, since its fusion
    and layout changes are not modelled); the model must compile to one
    graph (check_graph_breaks=False skips that check, made already).
    compile_config: torch._functorch.config values the compiled step is
    partitioned under (activation_memory_budget, its solver, ...).
    """
    step = _export_step(model, example_inputs, loss_fn, target, optimizer, device, alloc_conf,
                        parallel, world_size, extra_args, autocast, hold_outputs, compile,
                        compile_config, check_graph_breaks)
    device_args = ["--device", device] if device in GPU_PRESETS else []
    report, summary, _ = step.run("analyze", [*step.step_args, *device_args, "--top", "100"])
    return Estimate(step, report, summary)


class Plan:
    """A plan that fits the training step into a budget: what to recompute.

    Invariants: fits is True only when the predicted bytes that budget_of
    names are <= budget_bytes; modules lists what apply() wraps in
    torch.utils.checkpoint (empty for granularity "op", which apply refuses).
    """

    def __init__(self, step: _Step, document: Dict[str, Any], report: Dict[str, Any],
                 summary: str, granularity: str):
        self._step = step
        self.document: Dict[str, Any] = document  # memplan.plan/1
        self.report: Dict[str, Any] = report  # memplan.report/1 of `memplan plan`
        self.summary: str = summary
        self.granularity = granularity
        self.budget_bytes: int = report["budget_bytes"]
        self.budget_of: str = report.get("budget_of", "allocated")
        self.fits: bool = bool(report["feasible"])
        predicted = report["predicted"]
        self.peak_bytes: int = predicted["peak_bytes"]
        self.baseline_peak_bytes: int = predicted["baseline_peak_bytes"]
        self.reserved_bytes: Optional[int] = (report.get("reserved") or {}).get("peak_bytes")
        self.overhead: float = report["recompute_overhead"]  # recompute cost / one step's cost
        self.modules: List[str] = list(document.get("modules", []))

    def apply(self, model: nn.Module) -> List[str]:
        """Wraps the plan's modules of `model` in torch.utils.checkpoint (with
        a selective checkpointing policy for granularity "sac"); returns the
        wrapped module paths. Raises PlanError when the plan does not match."""
        target = "cpu" if self._step.device == "cpu" else "cuda"
        return apply_plan(model, self.document, target_device=target)

    def save(self, path: str) -> None:
        """Writes the plan (memplan.plan/1) to `path`."""
        with open(path, "w") as f:
            json.dump(self.document, f, indent=1)
            f.write("\n")

    def __repr__(self) -> str:
        return (f"Plan({'fits' if self.fits else 'does not fit'} "
                f"{format_size(self.budget_bytes)} of {self.budget_of} bytes: peak "
                f"{format_size(self.baseline_peak_bytes)} -> {format_size(self.peak_bytes)}, "
                f"+{100 * self.overhead:.1f}% recompute, {len(self.modules)} modules)")


def plan(model: nn.Module, example_inputs: Inputs, budget: Size, *,
         granularity: str = "module", loss_fn: Optional[LossFn] = None,
         target: Optional[torch.Tensor] = None, optimizer: Any = None, device: str = "cpu",
         budget_of: Optional[str] = None, alloc_conf: Optional[str] = None,
         parallel: Optional[str] = None, world_size: int = 1,
         extra_args: Sequence[str] = (), autocast: Optional[str] = None,
         hold_outputs: bool = True) -> Plan:
    """Plans what to recompute so one training step fits `budget` (bytes or
    a text like "20GiB"). granularity: "module" (whole modules wrapped in
    torch.utils.checkpoint), "sac" (a selective checkpointing policy per
    module) or "op" (per tensor: not appliable to eager PyTorch). budget_of:
    "allocated", "reserved" or "device" (default: the device's, see the
    module docstring). The other arguments are estimate()'s. When no plan
    fits, the returned plan has fits False and the lowest peak found.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity {granularity!r}: expected one of "
                         f"{', '.join(GRANULARITIES)}")
    budget_bytes = parse_size(budget)
    step = _export_step(model, example_inputs, loss_fn, target, optimizer, device, alloc_conf,
                        parallel, world_size, extra_args, autocast, hold_outputs)
    budget_of = budget_of or _default_budget_of(device)
    device_args = ["--device", device] if device in GPU_PRESETS else []
    with tempfile.TemporaryDirectory(prefix="memplan-") as tmp:
        out = os.path.join(tmp, "plan.json")
        report, summary, _ = step.run(
            "plan", [*step.step_args, *device_args, "--budget", str(budget_bytes),
                     "--budget-of", budget_of, "--granularity", granularity, "-o", out],
            check_codes=(0, 3))
        with open(out) as f:
            document = json.load(f)
    return Plan(step, document, report, summary, granularity)
