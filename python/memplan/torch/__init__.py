"""memplan.torch: a PyTorch model's training step exported, its memory
estimated and planned, plans applied back, predictions checked against real
eager training steps.

In a training script::

    est = memplan.torch.estimate(model, (x,), optimizer=torch.optim.AdamW)
    print(est.peak_bytes, est.fits("24GiB"), est.alive_at_peak(5))
    plan = memplan.torch.plan(model, (x,), budget="20GiB")
    plan.apply(model)       # torch.utils.checkpoint around the plan's modules

Under torch.compile (docs/compile.md)::

    est = memplan.torch.estimate(model, (x,), compile="aot_eager")
    opts = memplan.torch.compile_options(model, (x,), "20GiB", backend="aot_eager")
    opts.apply()            # before the compiled step first runs
    step = torch.compile(model, backend="aot_eager")

From the shell (the `memplan` command)::

    memplan export  MODEL --batch N [--input-shape 3,64,64] -o OUT.graph.json
                    [--style joint|forward]
    memplan measure MODEL --batch N [--input-shape ...] [--plan PLAN.json] --json OUT.json

MODEL is `torchvision:NAME` (e.g. torchvision:resnet18) or `package.module:factory`
(a callable returning an nn.Module; `models:gpt_small` names the models of
memplan/torch/models.py). The training step is always the same: forward,
cross-entropy against a random target shaped like the output without its last
dimension, backward, every parameter's .grad None beforehand, no optimizer.
The input is `model.example_input(batch)` when the model has that method, else
a float tensor of shape (batch, *--input-shape) (default 3,224,224). The seed is
fixed, so an export and a measurement describe the same step.

Lower-level API (mirrors the CLI):
    graph = export(model, example_inputs, target=None, style="joint")  # memplan.graph/1 dict
    apply_plan(model, plan)   # wraps the plan's "modules" in torch.utils.checkpoint
    report = measure(model, example_inputs, target=None, plan=None)

How export works (torch 2.x: torch._functorch's AOTAutograd; tested on 2.14.1
and 2.15.0; torch 1.13's functorch.compile.aot_module still exports with
hold_outputs=False):
  1. aot_module traces a *copy* of model + loss into a joint graph (ATen ops,
     functionalized); the partitioner (default: save what the backward reads)
     splits it into a forward and a backward fx graph, which we record.
  2. Both graphs are re-run on real tensors (fx.Interpreter) for the shape,
     dtype and storage of every value, tuple elements included.
  3. fx nodes become memplan tensors/ops. Outputs that the op's schema says
     alias an input (views, detach) become `alias_of` views, confirmed by
     storage; the forward's saved outputs and the backward's placeholders map
     to the same ids; backward outputs become `<param>.grad` with `grad_of`.
  4. Module scopes are recorded while tracing (module hooks for the forward,
     autograd-node hooks for the backward), see ScopeRecorder.
  5. Eager fidelity: functionalization turns eager's in-place ops (ReLU(inplace),
     ReLU6/Hardswish/SiLU(inplace), `x += y`, dropout's bernoulli_/div_) into
     ops that allocate. aot 1.13 traces twice (plain, then functionalized by
     re-running the plain graph); while a plain in-place node is re-run, the
     functional node it becomes is tagged, and its output is written as a view
     (`alias_of`) of the tensor it overwrote: no new buffer, and the old one
     stays alive as long as the new value is, which is what eager does.
     Batch-norm running statistics are updated in place by the kernel in
     eager and are not outputs of aot 1.13's graph, so nothing is allocated for
     them on either side.
"""
try:
    import torch  # noqa: F401
except ImportError as e:  # the package without its torch extra
    raise ImportError("memplan.torch needs PyTorch: pip install 'memplan[torch]'") from e

from .._binary import MemplanError
from ._api import Estimate, Plan, estimate, optimizer_name, plan
from ._apply import PlanError, apply_plan
from ._common import (
    DTYPE_SIZE,
    RESIDENT,
    SEED,
    TORCH2,
    ExportError,
    default_partition,
    min_cut_rematerialization_partition,
)
from ._compile_plan import CompileOptions, CompilePlanner, compile_options
from ._export import export, export_symbolic
from ._graph import dumps, nbytes, validate
from ._measure import measure, step_seconds
from ._prepare import cast_inputs, prepare_model
from ._spec import example_inputs, load_model, loss_fn, make_target, step_loss

__all__ = [
    "DTYPE_SIZE", "RESIDENT", "SEED", "TORCH2", "CompileOptions", "CompilePlanner", "Estimate",
    "ExportError",
    "MemplanError", "Plan",
    "PlanError", "apply_plan", "cast_inputs", "compile_options", "default_partition", "dumps",
    "estimate",
    "example_inputs",
    "export", "export_symbolic", "load_model", "loss_fn", "make_target", "measure",
    "min_cut_rematerialization_partition", "nbytes", "optimizer_name", "plan", "prepare_model",
    "step_loss",
    "step_seconds", "validate",
]
