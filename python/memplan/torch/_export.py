"""export() and export_symbolic(): a model's training step as a memplan.graph/1 dict."""
import concurrent.futures
import contextlib
import copy
import multiprocessing
import os
import sys
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from .. import symbolic
from . import _compile as compiled_step
from . import _fold as fold
from . import _workspace as workspace_rules
from ._capture import capture
from ._common import (
    PROGRESS,
    TESTED_TORCH,
    TESTED_TRANSFORMERS,
    default_partition,
    warn_untested,
)
from ._convert import convert
from ._graph import validate
from ._prepare import cast_inputs
from ._recompute import drop_gradients, inline_recompute
from ._spec import WithLoss, example_inputs, has_seq, make_target


def export(model: nn.Module, example_inputs: Any, target: Optional[torch.Tensor] = None,
           style: str = "joint", name: str = "model", partition_fn: Callable = default_partition,
           with_stats: bool = False, record_inplace: bool = True, target_device: str = "cpu",
           workspace: str = "rules", times: bool = False,
           loss_fn: Optional[Callable[..., torch.Tensor]] = None,
           autocast: Optional[str] = None, hold_outputs: bool = True,
           workspace_overrides: Optional[Dict[str, int]] = None,
           compile: Optional[str] = None,
           compile_config: Optional[Dict[str, Any]] = None,
           check_graph_breaks: bool = True, cpu_isa: Optional[str] = None) -> Any:
    """memplan.graph/1 (a dict) of one training step of `model` on
    `example_inputs` (a tuple) with the cross-entropy loss against `target`
    (random, shaped from the output, when None). The model is not modified.
    record_inplace=False writes the functionalized graph as traced (eager's
    in-place ops then allocate, as in a compiled step). workspace: per-op
    scratch from "rules" (_workspace.py: shapes and device), "measure"d by
    replaying the step on this CPU (torch.profiler; the tests' oracle), or
    "none". times=True: each op's time_us measured by replaying the traced
    graphs on this CPU (one thread, the least of 3 runs after a warm-up; the
    planner's costs then, instead of its roofline). target_device: where
    the eager step will run ("cpu" or "cuda"; the graph is traced on this
    CPU either way): eager kernels that differ (dropout) follow it.
    loss_fn: the step's loss instead of cross-entropy, called as
    loss_fn(output, target), or loss_fn(output) when target is None.
    autocast: "bfloat16" or "float16": the step (forward and loss) under
    torch.autocast with that dtype (the CPU's autocast policy; a GPU target
    casts other ops, so target_device "cuda" refuses it). hold_outputs: the
    training loop keeps the model's output alive through the backward (`out
    = model(x); loss = loss_fn(out, y); loss.backward()`, the default: it
    never under-predicts such a loop); False: it drops the output once the
    loss is computed (HF Trainer, Lightning). The graph says which
    (source.outputs_held). workspace_overrides: {op id: bytes} replacing
    those ops' scratch (workspace_source "override"; _workspace.py). Each op's
    workspace_source and the graph's source.workspace say where its scratch
    came from. cpu_isa: the CPU kernels the scratch rules model for a CPU
    step ("avx512" or "avx2"; default: this machine's, which a measurement
    always uses). compile: "aot_eager" or "inductor": the step as
    torch.compile with that backend runs it, forward and loss as one graph
    (_compile.py; partition_fn and record_inplace are then the backend's;
    source.compile names it). compile_config: torch._functorch.config values
    in force while the step is partitioned, as torch.compile would see them
    (activation_memory_budget, activation_memory_budget_solver, ...).
    check_graph_breaks=False skips dynamo's graph-break check of a compiled
    step (a caller that made it already for this model and inputs:
    CompilePlanner's later points)."""
    warn_untested("torch", torch.__version__, TESTED_TORCH)
    if "transformers" in sys.modules:
        warn_untested("transformers", sys.modules["transformers"].__version__,
                      TESTED_TRANSFORMERS)
    if target_device not in ("cpu", "cuda"):
        raise ValueError(f"target_device {target_device!r}: cpu or cuda")
    if workspace not in ("rules", "measure", "none"):
        raise ValueError(f"workspace {workspace!r}: rules, measure or none")
    if style not in ("joint", "forward"):
        raise ValueError(f"style {style!r}: joint or forward")
    workspace_rules.check_isa(cpu_isa)
    if cpu_isa is not None and workspace != "rules":
        raise ValueError(f"cpu_isa={cpu_isa!r} chooses the scratch rules' kernels: it needs "
                         f"workspace='rules', not {workspace!r}")
    if autocast is not None:
        from ._prepare import dtype_of
        dtype_of(autocast, "autocast")
        if target_device != "cpu":
            raise ValueError(f"autocast {autocast!r} with target_device {target_device!r}: the "
                             "step is traced with the CPU's autocast policy, which casts other "
                             "ops than CUDA's; export autocast steps for the CPU")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    if target is None and loss_fn is None:
        target = make_target(model, inputs)
    decompositions = None
    if compile is not None:
        partition_fn, decompositions = compiled_step.partition_for(compile)
        record_inplace = False
        if check_graph_breaks:
            PROGRESS("checking that torch.compile traces one graph")
            step = WithLoss(copy.deepcopy(model), loss_fn, has_target=target is not None,
                            autocast=autocast)
            compiled_step.check_one_graph(step,
                                          list(inputs) + ([] if target is None else [target]))
    # A model and inputs on the meta device are traced without data (nothing
    # allocated, no kernel run). Tensors the model creates must follow its
    # inputs' device (torch.arange(n, device=x.device)): a device context
    # around AOT's trace loses the backward.
    PROGRESS("tracing (AOTAutograd)")
    if compile_config and compile is None:
        raise ValueError("compile_config needs compile= (aot_eager or inductor)")
    compiling = compiled_step.compiling() if compile else contextlib.nullcontext()
    with compiled_step.functorch_config(compile_config), compiling:
        graphs, primals = capture(model, inputs, target, partition_fn, record_inplace,
                                  user_loss=loss_fn, autocast=autocast,
                                  hold_outputs=hold_outputs, decompositions=decompositions,
                                  compiled=compile is not None)
    PROGRESS("converting")
    graph, stats = convert(graphs, primals, name, style, target_device,
                           measure_workspace=workspace == "measure", measure_times=times,
                           outputs_held=hold_outputs, compiled=compile)
    stats["input_grads_dropped_ops"] = drop_gradients(graph, graphs.get("unfrozen", []))
    regions = stats.pop("checkpoint_regions")
    stats["checkpoint_regions"] = len(set(regions.values()))
    stats["recomputed_ops"] = inline_recompute(graph, regions)
    if workspace == "rules":
        stats["workspace_ops"] = workspace_rules.apply_rules(graph, target_device,
                                                             workspace_overrides, cpu_isa)
    elif workspace_overrides:
        workspace_rules.apply_overrides(graph, workspace_overrides)
    stats["workspace"] = workspace
    workspace_rules.record_sources(graph, workspace, target_device, cpu_isa)
    errs = validate(graph)
    if errs:
        raise RuntimeError("exported graph fails its self-check:\n  " + "\n  ".join(errs[:20]))
    return (graph, stats) if with_stats else graph


def parallel_jobs(model: nn.Module, export_kw: Dict[str, Any]) -> int:
    """The processes the CLI traces export_symbolic's sizes in: one per CPU
    (MEMPLAN_EXPORT_JOBS overrides) for a model on the meta device, where a
    trace runs no kernels; 1 otherwise, so measured op times and scratch
    are not disturbed and no kernel library runs after a fork."""
    env = os.environ.get("MEMPLAN_EXPORT_JOBS")
    if env is not None:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"MEMPLAN_EXPORT_JOBS={env!r}: expected a whole number") from None
    on_meta = any(t.device.type == "meta" for t in model.parameters())
    if not on_meta or export_kw.get("times") or export_kw.get("workspace") == "measure":
        return 1
    return os.cpu_count() or 1


_FORKED: Optional[Callable[[int], Any]] = None  # what a forked worker runs


def _run_forked(k: int) -> Any:
    torch.set_num_threads(1)
    return _FORKED(k)


def _each_point(fn: Callable[[int], Any], count: int, jobs: int) -> List[Any]:
    """[fn(0), ..., fn(count - 1)], in up to `jobs` forked processes (each
    trace is independent of the others; fork shares the model without
    copying it). In this process when jobs is 1, fork is unavailable, or
    autograd refuses to run after a fork (this process ran a backward
    before: its threads do not survive one); then with a warning."""
    global _FORKED
    jobs = min(jobs, count)
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(k) for k in range(count)]
    _FORKED = fn
    try:
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_run_forked, range(count)))
    except RuntimeError as e:
        if "fork" not in str(e):
            raise
        warnings.warn(f"memplan export: tracing the {count} sizes one after another: {e}",
                      stacklevel=3)
        return [fn(k) for k in range(count)]
    finally:
        _FORKED = None


FOLD_MODES = ("auto", "always", "never")


def export_symbolic(model: nn.Module, batch: int, input_shape: Optional[Sequence[int]] = None,
                    seq: Optional[int] = None, name: str = "model",
                    input_dtype: Optional[str] = None, jobs: int = 1,
                    fold_layers: str = "auto", **kw: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """export() with the sizes as symbols: `batch` always, `seq` when the
    model's example_input takes one (default: the model's own length). The
    step is exported at 2^N + 1 sizes around (batch, seq) and every number
    that changes is solved as a multilinear expression (memplan.symbolic), so
    `memplan analyze --set batch=64` resizes the graph without tracing again.
    input_dtype: float inputs cast to it (a bfloat16 model's inputs).
    jobs: processes the sizes are traced in (forked; parallel_jobs is the
    CLI's choice); the graph is the same for any number.
    fold_layers: "auto" (a transformers model's stack of alike layers, its
    decoder layers, is traced at 3, 4 and 5 layers at the base sizes and 4
    at the others, and the rest extrapolated: memplan.torch._fold, checked,
    the same graph as tracing them all, or they all are), "always" (any
    model's stack: see _fold for what the check cannot see) or "never"; not
    with measured times or scratch.
    Returns (graph, stats); raises symbolic.SymbolicError when some size
    cannot be expressed. A workspace or flop count that cannot be is frozen
    or dropped and named in source.warnings (memplan.symbolic), which memplan
    prints when --set moves the sizes away from the exported ones."""
    # Batch 1 takes other code paths in some models (transformers' position
    # ids: a slice instead of an expand, both views): solved from batches 2..4
    # and then set to 1.
    names, base, step = ["batch"], [max(batch, 2)], [1]
    if input_shape is None and has_seq(model):
        if seq is None:
            seq = example_inputs(model, 1)[0].shape[1]
        names.append("seq")
        base.append(seq)
        step.append(-1)  # a model may have a maximum length (position embeddings)
        if seq < 3:
            raise ValueError(f"{name}: seq {seq}: symbolic export needs seq >= 3")
    points = symbolic.export_points(tuple(base), tuple(step))
    if fold_layers not in FOLD_MODES:
        raise ValueError(f"fold_layers={fold_layers!r}: expected one of {', '.join(FOLD_MODES)}")
    folding = (fold_layers != "never" and not kw.get("times")
               and kw.get("workspace") != "measure")

    def export_point(k):
        sizes = dict(zip(names, points[k]))
        PROGRESS.prefix = (f"export {k + 1}/{len(points)} ("
                           + ", ".join(f"{n}={v}" for n, v in sizes.items()) + "): ")
        inputs = cast_inputs(example_inputs(model, sizes["batch"], input_shape,
                                            seq=sizes.get("seq")), input_dtype)
        target = make_target(model, inputs)
        return list(export(model, inputs, target, name=name, with_stats=True, **kw))

    def run(fn, count):
        return _each_point(fn, count, jobs)

    try:
        if folding:
            results, how = fold.fold_points(model, export_point, len(points),
                                            points.index(tuple(base)), run,
                                            any_model=fold_layers == "always")
        else:
            results = run(export_point, len(points))
            how = {"folded": False, "why": f"fold_layers={fold_layers}" if fold_layers == "never"
                   else "measured times or scratch"}
        exported = dict(zip(points, results))
        graph, sym_stats = symbolic.make_symbolic(lambda point: exported[point][0], names,
                                                  tuple(base), tuple(step))
    finally:
        PROGRESS.prefix = ""
    stats_at_base = {**exported[tuple(base)][1], "fold_layers": how}
    graph["symbols"]["batch"] = batch
    for w in graph.get("source", {}).get("warnings", []):
        w["exported_at"]["batch"] = batch  # the sizes the graph states
    return graph, {**stats_at_base, **sym_stats, "symbols": graph["symbols"]}
