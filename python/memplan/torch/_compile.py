"""torch.compile steps: how export(compile=...) traces what the compiled step runs.

A step under `torch.compile(model, backend=B)` (or a compiled function of
forward and loss) runs AOTAutograd's partitioned forward and backward graphs
instead of eager's kernels and autograd nodes. export(compile=B) traces the
same graphs with the same partitioner and decompositions as B, and writes
them as they run (each value freed after its last reader, which is what the
fx code of a boxed graph does), without the passes that model eager:

* "aot_eager": torch's min-cut rematerializing partitioner, no
  decompositions (torch/_dynamo/backends/debugging.py: aot_eager). The
  exported graph is the step the backend runs, op for op.
* "inductor": inductor's partition function (its joint-graph passes, then
  the min-cut partitioner with compiler="inductor") over inductor's
  decompositions. Inductor then fuses the graphs into kernels, reuses
  buffers and may change layouts, which the export does not see: the
  forward-to-backward saved set is inductor's, the temporaries inside each
  graph are the unfused ones, so the prediction is an estimate, over or
  under the measured peak (docs/compile.md states how far).

Both read torch._functorch.config at trace time, as torch.compile does
(activation_memory_budget and its solver included).
"""
import contextlib
from typing import Any, Callable, Optional, Sequence, Tuple

import torch

from ._common import TORCH2, ExportError

BACKENDS = ("aot_eager", "inductor")


def check_backend(backend: str) -> None:
    """Raises ValueError for a backend memplan does not export, or a torch
    without AOTAutograd's torch.compile path (torch 1.x)."""
    if backend not in BACKENDS:
        raise ValueError(f"compile {backend!r}: expected one of {', '.join(BACKENDS)}")
    if not TORCH2:
        raise ValueError(f"compile {backend!r}: torch.compile needs torch 2.0 or newer "
                         f"(this is torch {torch.__version__})")


def partition_for(backend: str) -> Tuple[Callable[..., Any], Optional[dict]]:
    """(partition function, decomposition table) that `backend` hands AOTAutograd."""
    check_backend(backend)
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    if backend == "aot_eager":
        return min_cut_rematerialization_partition, None
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.virtualized import V

    def inductor_partition(gm, joint_inputs, **kwargs):
        # compile_fx sets the fake mode its joint-graph passes read.
        with V.set_fake_mode(detect_fake_mode(joint_inputs)):
            return partition_fn(gm, joint_inputs, **kwargs)

    return inductor_partition, select_decomp_table()


def functorch_config(values: Optional[dict]):
    """torch._functorch.config patched with `values` (a no-op for None)."""
    if not values:
        return contextlib.nullcontext()
    import torch._functorch.config as functorch
    unknown = sorted(k for k in values if not hasattr(functorch, k))
    if unknown:
        raise ValueError(f"compile_config: torch {torch.__version__} has no "
                         f"torch._functorch.config.{unknown[0]}")
    return functorch.patch(**values)


@contextlib.contextmanager
def compiling():
    """torch.compiler.is_compiling() True while the step is traced: code that
    takes another path under torch.compile (transformers' masks and KV
    layout, behind is_torchdynamo_compiling) takes the compiled one, as
    dynamo's trace of the step does."""
    saved = torch.compiler.is_compiling
    torch.compiler.is_compiling = lambda: True
    try:
        yield
    finally:
        torch.compiler.is_compiling = saved


def check_one_graph(step: Callable[..., Any], args: Sequence[Any]) -> None:
    """Raises ExportError when dynamo breaks `step(*args)` into more than one
    graph: memplan predicts a step that torch.compile runs as one forward
    and one backward graph. A step dynamo cannot trace at all raises torch's
    own error."""
    import torch._dynamo
    explained = torch._dynamo.explain(step)(*args)
    breaks = explained.graph_break_count
    if breaks:
        reasons = "; ".join(sorted({_where(r) for r in explained.break_reasons}))[:600]
        raise ExportError(f"torch.compile breaks this step into {explained.graph_count} graphs "
                          f"({breaks} graph break(s): {reasons}); memplan predicts a step "
                          "compiled as one graph: remove the breaks (torch.compile(..., "
                          "fullgraph=True) names each) or export the eager step")


def _where(reason: Any) -> str:
    """'<reason> at file:line in function' of one dynamo graph break."""
    text = str(getattr(reason, "reason", reason)).splitlines()[0]
    stack = getattr(reason, "user_stack", None) or []
    if not stack:
        return text
    frame = stack[-1]
    return f"{text} at {frame.filename}:{frame.lineno} in {frame.name}"
