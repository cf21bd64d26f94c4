"""compile_options(): what a torch.compile step should recompute so that its
peak fits a budget in bytes, answered with memplan's model of the step.

Recipe. torch's min-cut partitioner (torch/_functorch/partitioners.py,
choose_saved_values_set) decides what the backward recomputes; under
activation_memory_budget < 1 it lists the "recomputable banned nodes" (what
the default cut saves and could recompute) and asks a knapsack solver which
of them to allow recomputing, then re-solves the min cut. memplan replaces
that solver (torch._functorch.config.activation_memory_budget_solver, a
CustomKnapsackSolver) by one that allows a fixed set of nodes, found ahead:
  1. export the compiled step (export(compile=...)) at torch's defaults; its
     predicted peak fits: no options (torch's own partition).
  2. probe: export once with a solver that allows nothing and records the
     candidates; drop the random ones (dropout: a recompute would draw new
     numbers); order the rest by recompute cost per byte (recompute_cost, a
     roofline proxy), cheapest first.
  3. the path: the cut with nothing allowed, then prefixes of that order at
     up to MAX_POINTS quantiles of the candidates' bytes. Each point is
     exported with its solver and memplan predicts its peak (the bytes the
     budget bounds: allocated, reserved or device, as `plan --budget-of`).
     The answer is the first point on the path that fits.
The answer for a budget B is min{point: peak(point) <= B} on one path that
does not depend on B, so a lower budget never gets a higher predicted peak
(monotone), and every answer's peak is the exported step's, not an estimate
of saved bytes.

Complexity: 2 + (points walked) exports of the step, at most MAX_POINTS + 2;
dynamo's graph-break check runs for the first only.

Where it falls short: only torch's candidate cuts are considered (the min
cut re-solved with some nodes allowed), not every recompute set memplan's
own planner could choose; the path is one order, so a cheaper point off the
path is missed; the names of the planned nodes must match the graph
torch.compile traces (the loss's nodes are absent when only the model is
compiled, and are skipped); inductor's fusion and layout changes are not
modelled, so its predicted peaks are estimates, over or under the measured
ones (docs/compile.md), and so are its plans' fits.
"""
import hashlib
import json
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..units import Size, format_size, parse_size

# Ahead of torch's own ratio checks, so that the partitioner reaches the solver:
# any budget > 0 below the more aggressive cuts' ratio (0 itself saves only inputs).
SOLVER_BUDGET = 1e-9
MAX_POINTS = 12


def _solver_base():
    try:
        from torch._inductor.custom_graph_pass import CustomKnapsackSolver
    except ImportError:
        raise RuntimeError(f"compile_options needs torch 2.14 or newer "
                           f"(torch._inductor.custom_graph_pass.CustomKnapsackSolver); this is "
                           f"torch {torch.__version__}") from None
    return CustomKnapsackSolver


def _is_random(node) -> bool:
    tags = getattr(getattr(node, "target", None), "tags", ())
    return torch.Tag.nondeterministic_seeded in tags


def recompute_cost(node) -> float:
    """A roofline proxy of one node's recompute time, in FLOP: its matmul or
    convolution FLOPs (_convert._flops), or 10 per byte it writes (a
    memory-bound op), whichever is larger. Only the path's order uses it.
    (The solver runs under no_dispatch, where torch's estimate_runtime cannot
    run ops on the fake tensors.)"""
    from ._convert import _flops

    def val(a):
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

    out = node.meta.get("val")
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    written = sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))
    flops = _flops(node, [val(a) for a in node.args], outs) or 0
    return float(max(flops, 10 * written))


def make_solver(allow: Sequence[str] = (), probe: bool = False):
    """A CustomKnapsackSolver that allows recomputing the candidates named in
    `allow` and keeps the rest. probe=True: records every call's candidates
    (.candidates: [(name, bytes, runtime, random?)]). .matched: the names of
    `allow` found at the last call."""
    from torch._functorch.partitioners import _size_of
    base = _solver_base()

    class MemplanKnapsackSolver(base):
        def __init__(self):
            self.allow = tuple(allow)
            self.candidates: List[Tuple[str, int, float, bool]] = []
            self.matched: List[str] = []

        def __call__(self, memory, joint_graph, max_memory, node_info, nodes):
            wanted = set(self.allow)
            try:
                if probe:
                    self.candidates = [(n.name, int(_size_of(n)), recompute_cost(n),
                                        _is_random(n)) for n in nodes]
                recompute = [i for i, n in enumerate(nodes)
                             if n.name in wanted and not _is_random(n)]
            except Exception as e:  # noqa: BLE001 - never make torch.compile fail
                warnings.warn(f"memplan's knapsack solver failed ({type(e).__name__}: {e}); "
                              "this graph keeps what torch's own cut saves", stacklevel=2)
                recompute = []
            self.matched = [nodes[i].name for i in recompute]
            missing = len(wanted) - len(self.matched) if not probe else 0
            if missing:
                warnings.warn(f"memplan's plan names {len(wanted)} nodes to recompute; "
                              f"{missing} are not candidates in the graph torch.compile "
                              "traced (its loss compiled apart from the model?): the "
                              "peak may differ from the plan's", stacklevel=2)
            chosen = set(recompute)
            return [i for i in range(len(nodes)) if i not in chosen], recompute

        def uuid(self):
            return hashlib.sha256(json.dumps(sorted(self.allow)).encode()).hexdigest()

    return MemplanKnapsackSolver()


def path_points(candidates: Sequence[Tuple[str, int, float, bool]],
                max_points: int = MAX_POINTS) -> List[List[str]]:
    """The path's allowed sets, each a prefix of the next: [] first, then
    prefixes of the non-random candidates ordered by runtime per byte
    (cheapest first; ties in the partitioner's order), cut where the prefix's
    bytes pass each of max_points quantiles of their total."""
    usable = [(i, c) for i, c in enumerate(candidates) if not c[3] and c[1] > 0]
    usable.sort(key=lambda ic: (ic[1][2] / ic[1][1], ic[0]))
    names = [c[0] for _, c in usable]
    total = sum(c[1] for _, c in usable)
    points, running, q = [[]], 0, 1
    for k, (_, c) in enumerate(usable, start=1):
        running += c[1]
        if running * max_points >= q * total or k == len(usable):
            points.append(names[:k])
            while q * total <= running * max_points and q <= max_points:
                q += 1
    return points


class CompileOptions:
    """memplan's answer for one compiled step and budget.

    functorch_config: the torch._functorch.config values to set before the
    step first runs under torch.compile ({} when torch's default partition
    fits). fits: the predicted peak of the step with them is within the
    budget; when nothing on the path fits, fits is False and the options are
    those of the lowest predicted peak. Invariant: peak_bytes is the
    predicted bounded peak of the step with functorch_config, and fits ==
    (peak_bytes <= budget_bytes).
    """

    def __init__(self, backend: str, budget_bytes: int, budget_of: str,
                 functorch_config: Dict[str, Any], peak_bytes: int, default_peak_bytes: int,
                 recompute: List[str], points: List[Dict[str, Any]]):
        self.backend = backend
        self.budget_bytes = budget_bytes
        self.budget_of = budget_of
        self.functorch_config = functorch_config
        self.peak_bytes = peak_bytes
        self.default_peak_bytes = default_peak_bytes  # torch's own partition
        self.recompute = recompute  # joint-graph nodes the backward may recompute
        self.points = points  # [{"allowed": n, "peak_bytes": b}] in path order, as walked
        self.fits = peak_bytes <= budget_bytes

    def apply(self) -> None:
        """Sets functorch_config on torch._functorch.config (the partitioner
        reads it when a compiled step first runs)."""
        import torch._functorch.config as functorch
        for k, v in self.functorch_config.items():
            setattr(functorch, k, v)

    def patch(self):
        """torch._functorch.config.patch(**functorch_config): a context
        manager; the compiled step's first call must run inside it."""
        import torch._functorch.config as functorch
        return functorch.patch(**self.functorch_config)

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        return (f"CompileOptions({self.backend}: {verdict} {format_size(self.budget_bytes)} of "
                f"{self.budget_of} bytes: peak {format_size(self.default_peak_bytes)} -> "
                f"{format_size(self.peak_bytes)}, {len(self.recompute)} nodes allowed to "
                "recompute)")


class CompilePlanner:
    """compile_options() for many budgets of one step: the path (docstring of
    this module) is walked once, as far as the lowest budget asked needs, and
    every point's predicted peak is kept. Arguments as compile_options()."""

    def __init__(self, model: torch.nn.Module, example_inputs: Any, *,
                 backend: str = "inductor", budget_of: Optional[str] = None,
                 max_points: int = MAX_POINTS, **estimate_kw: Any):
        from ._api import _default_budget_of
        _solver_base()
        self.model, self.inputs, self.backend = model, example_inputs, backend
        self.estimate_kw, self.max_points = estimate_kw, max_points
        self.budget_of = budget_of or _default_budget_of(estimate_kw.get("device", "cpu"))
        self.default_peak = self._predict(None, check_graph_breaks=True)
        self.path: Optional[List[List[str]]] = None  # allowed sets, in path order
        self.peaks: List[int] = []  # predicted peak of each point walked

    def _predict(self, config: Optional[Dict[str, Any]], check_graph_breaks: bool = False) -> int:
        """The predicted bounded peak of the step under `config`. Dynamo's
        graph-break check runs once, for torch's defaults (the first call)."""
        from ._api import estimate
        est = estimate(self.model, self.inputs, compile=self.backend, compile_config=config,
                       check_graph_breaks=check_graph_breaks, **self.estimate_kw)
        return est.bounded_bytes(self.budget_of)

    def _point(self, k: int) -> int:
        """The predicted peak of path point k, walking the path up to it."""
        if self.path is None:
            probe = make_solver(probe=True)
            self.peaks = [self._predict(_config(probe))]
            self.path = path_points(probe.candidates, self.max_points)
        while len(self.peaks) <= k:
            allowed = self.path[len(self.peaks)]
            self.peaks.append(self._predict(_config(make_solver(allowed))))
        return self.peaks[k]

    def walked(self) -> List[Dict[str, Any]]:
        """[{"allowed": n, "peak_bytes": b}] of the points walked so far."""
        return [{"allowed": len(self.path[k]), "peak_bytes": p}
                for k, p in enumerate(self.peaks)]

    def options(self, budget: Size) -> CompileOptions:
        """The first point that fits `budget` (torch's own partition first);
        when none does, the lowest predicted peak found, fits False."""
        budget_bytes = parse_size(budget)
        of, default = self.budget_of, self.default_peak
        if default <= budget_bytes:
            return CompileOptions(self.backend, budget_bytes, of, {}, default, default, [],
                                  [{"allowed": None, "peak_bytes": default}])
        k, best = 0, None
        while True:
            peak = self._point(k)
            if best is None or peak < best[0]:
                best = (peak, k)
            if peak <= budget_bytes:
                best = (peak, k)
                break
            if k + 1 >= len(self.path):
                break
            k += 1
        walked = self.walked()[:k + 1]
        if best[0] > budget_bytes:
            warnings.warn(f"compile_options: no partition on memplan's path fits "
                          f"{format_size(budget_bytes)} of {of} bytes; the lowest predicted "
                          f"peak is {format_size(min(best[0], default))} (the options give it)",
                          stacklevel=3)
        if best[0] >= default:  # nothing on the path beats torch's own partition
            return CompileOptions(self.backend, budget_bytes, of, {}, default, default, [],
                                  walked)
        allowed = self.path[best[1]]
        return CompileOptions(self.backend, budget_bytes, of, _config(make_solver(allowed)),
                              best[0], default, list(allowed), walked)


def compile_options(model: torch.nn.Module, example_inputs: Any, budget: Size, *,
                    backend: str = "inductor", budget_of: Optional[str] = None,
                    max_points: int = MAX_POINTS, **estimate_kw: Any) -> CompileOptions:
    """What torch.compile(model, backend=backend) should recompute so that one
    training step's peak fits `budget` (bytes or a text like "20GiB").

    budget_of: "allocated", "reserved" or "device" (default: the device's,
    as plan()). estimate_kw: estimate()'s step arguments (loss_fn, target,
    optimizer, device, autocast, hold_outputs, ...). Returns CompileOptions:
    call .apply() (or run the first compiled step inside .patch()) before
    the compiled step first runs. When no point fits, .fits is False and the
    options give the lowest predicted peak found (never an error); a step
    torch.compile cannot trace raises torch's error. Many budgets of one
    step: CompilePlanner(...).options(budget) walks the path once.

        opts = memplan.torch.compile_options(model, (x,), "20GiB", backend="inductor")
        opts.apply()
        step = torch.compile(model, backend="inductor")
    """
    return CompilePlanner(model, example_inputs, backend=backend, budget_of=budget_of,
                          max_points=max_points, **estimate_kw).options(budget)


def _config(solver) -> Dict[str, Any]:
    return {"activation_memory_budget": SOLVER_BUDGET,
            "activation_memory_budget_solver": solver}
