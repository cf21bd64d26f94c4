#!/usr/bin/env python3
"""A Checkmate-style MILP (Jain et al., MLSys 2020) over memplan's own graphs and memory
semantics, solved with HiGHS, to measure how far `memplan plan` is from optimal.

    checkmate_milp.py GRAPH [--budget-pct 90,70,50,tight | --budget BYTES,...]
                      [--time-limit 60] [--substages auto|N] [--memplan PATH] [--export-tool PATH]
                      [--objective time|flops] [--set k=v]... [--json OUT] [--workdir DIR]

A benchmark, not part of memplan; it needs highspy (pip install highspy). For each budget
(a percentage of the baseline peak, or `tight`: the least peak `memplan plan` reaches when
asked for the floor, PeakLowerBound) it
  1. exports the joint graph as `memplan plan` loads it (bench/milp_export.cc: ops, tensors,
     the schedule, the checkpoint candidates, op costs under memplan's CostModel, objective
     time on an h100 unless --objective flops, and the bytes no recomputation changes);
  2. runs `memplan plan GRAPH --budget B --json` and builds and solves the MILP below with
     HiGHS twice, each under the time limit on one thread: warm (fixed seed, gap 1e-6,
     memplan's own program offered as a first incumbent when the MILP can express it;
     --no-warm-start: don't) and cold (no start, HiGHS's default options; --no-cold: skip);
  3. turns the MILP's solution into a run sequence, lets memplan's BuildProgram place the
     frees and in-place accumulations (milp_export --runs: each instance freed right after
     its last use), writes a memplan.plan/1 and replays it with
     `memplan verify GRAPH PLAN --json`, the authoritative simulator;
and reports, per solve, the MILP objective, HiGHS's dual bound, whether optimality was
proven, the verified peak and cost of the MILP's program; memplan's cost and plan time; how
much the warm solve improved on its start; and the independent reference (a proven optimum,
else the larger dual bound: a time-limited incumbent never counts) with memplan's cost over
it. With `tight` it also minimises the peak over the MILP's program space (cold, and
warm-started from memplan's least-peak program).

The program space (memplan's execution model, SPEC section 2):
  * the forward ops run once, in schedule order; a forward buffer lives from its producer
    to its last forward use, or on into the backward when kept (A[0,v] = 1);
  * the backward and optimizer ops run once each, in schedule order; before backward op
    b_i come S phases (i,s) of reruns R[(i,s),k] (binary) of forward ops (--substages;
    auto: per budget, the fewest phases that express memplan's own program there),
    each phase in forward order, each op at most once per phase: an op may thus be rerun in
    many stages, and up to S times within one (a tensor held between uses or freed after
    each use and recomputed);
  * a value v (a checkpoint candidate: a forward buffer with every view of it, forward- or
    backward-made) is available to a reader in a phase when carried into it (A[ph,v]) or
    when its producer ran earlier in the phase; A[ph+1,v] <= A[ph,v] + R[ph,p(v)];
  * memory while a rerun k runs = the bytes no decision changes (resident, kept to the end,
    every backward-made buffer with in-place accumulation as memplan places it: from the
    simulator's replay of the baseline) + the values carried in + those made earlier in the
    phase - those freed after their last reader in the phase (FREE[ph,v,k], Checkmate's
    free variables) + k's new outputs and workspace; while b_i runs, the values still alive
    plus b_i's own outputs and workspace;
  * views own no bytes: a forward view op (view-only, cost 0 under memplan's cost model) is
    rerun for free, just before its reader, when its base was remade since it was made; a
    backward-made view of a forward buffer holds it from the view's production to its last
    use (A forced to 1 there), as the simulator's reference counts do.
R and A are integer, FREE is continuous: given R and A, the largest FREE the constraints
allow is integral and is exactly the accounting above. The model's peak of the save-all
program and of memplan's own programs (where expressible) is checked against the simulator.
Where it departs from the simulator (also in the report's header):
  * inside a phase reruns are in forward order, each op once; memplan's builder recomputes
    an op's dead inputs depth-first in input order and may rerun an op again after freeing
    it in the same stage: such a program is expressible only when its reruns split into S
    forward-ordered runs (auto picks that S, up to --max-substages); otherwise memplan's
    program lies outside the MILP's space, and the dual bound is no bound on it (the report
    says when). Programs that need more phases than memplan's are outside it too;
  * conservative (counts more than the simulator, never less): a value carried into a phase
    whose producer also reruns there (only needed when a backward-made view forces the carry)
    is counted twice until the phase ends;
  * the cost of rerun view ops is left out of the objective (0 under memplan's cost model
    for view-only ops without a measured time_us); the verified cost includes it.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def die(msg):
    print("checkmate_milp: " + msg, file=sys.stderr)
    sys.exit(2)


def run(cmd, ok=(0,)):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t0
    if p.returncode not in ok:
        die("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-2000:]))
    return p, dt


# --------------------------------------------------------------------------- the model


class Problem:
    """The joint graph in the terms of the MILP (see the module docstring)."""

    def __init__(self, ex, substages=1):
        self.ex = ex
        T, O = ex["tensors"], ex["ops"]
        self.T, self.O = T, O
        order = ex["order"]
        self.fwd = [o for o in order if O[o]["phase"] == "forward"]
        self.stages = [o for o in order if O[o]["phase"] != "forward"]
        self.pos = {o: q for q, o in enumerate(self.fwd)}
        self.stage_of = {o: i for i, o in enumerate(self.stages)}
        cand = set(ex["candidates"])
        self.cand = cand
        self.steps = {s["op"]: s for s in ex["baseline_steps"]}
        nS = len(self.stages)
        self.nS = nS
        S = self.S = max(1, int(substages))
        self.nP = nS * S  # phases: (stage i, sub s) -> i * S + s; b_i runs after phase i*S+S-1
        self.stage_ph = [ph // S for ph in range(self.nP)]
        self.last_ph = [ph % S == S - 1 for ph in range(self.nP)]

        def grp(t):
            b = T[t]["base"]
            return b if b in cand else None

        self.grp = grp
        self.unsupported = []
        # Forward ops: reruns (R) are ops that make a candidate; view-only ops that make
        # views of a candidate are rerun for free by the program builder (runs_of).
        self.rops = []
        self.reads = {}  # op -> sorted values it reads (inputs, parents of views it makes)
        self.makes = {}  # op -> candidate values it makes
        self.new_bytes = {}  # op -> bytes its run allocates (all non-view outputs) + workspace
        self.view_cost = 0.0
        for o in self.fwd:
            op = O[o]
            outs = op["outputs"]
            views = [t for t in outs if T[t]["alias_of"] >= 0]
            rd = {grp(t) for t in op["inputs"]}
            rd |= {grp(T[t]["alias_of"]) for t in views}
            rd.discard(None)
            if views and len(views) < len(outs) and any(grp(t) is not None for t in views):
                self.unsupported.append("forward op %s makes views and buffers" % op["id"])
            if op["view_only"]:
                vg = {grp(t) for t in views}
                if any(grp(t) is not None for t in views) and (rd - vg):
                    self.unsupported.append("view op %s reads another buffer" % op["id"])
                if any(grp(t) is not None for t in views) and op["cost"] > 0:
                    self.view_cost += op["cost"]
                continue
            mk = [t for t in outs if t in cand]
            if not mk:
                continue
            self.rops.append(o)
            self.reads[o] = sorted(rd)
            self.makes[o] = mk
            self.new_bytes[o] = sum(T[t]["bytes"] for t in outs if T[t]["alias_of"] < 0) + \
                op["workspace_bytes"]
        self.prod = {}
        for o in self.rops:
            for v in self.makes[o]:
                self.prod[v] = o
        for v in sorted(cand):
            if v not in self.prod:
                self.unsupported.append("candidate %s has no rerunnable producer" % T[v]["id"])
        self.M = {v: T[v]["bytes"] for v in cand}

        # What each backward op reads (inputs, parents of the views it makes), by value.
        self.readsB = []
        for o in self.stages:
            op = O[o]
            rd = {grp(t) for t in op["inputs"]}
            rd |= {grp(T[t]["alias_of"]) for t in op["outputs"] if T[t]["alias_of"] >= 0}
            rd.discard(None)
            self.readsB.append(rd)
        # Holds: stages into which a value must be carried (a backward-made view holds it).
        hold_stages = {v: set() for v in cand}
        last_use = {}
        for o in self.stages:
            for t in O[o]["inputs"]:
                last_use[t] = self.stage_of[o]
            for t in O[o]["outputs"]:
                a = T[t]["alias_of"]
                if a >= 0:
                    last_use[a] = max(last_use.get(a, -1), self.stage_of[o])
        for t, x in enumerate(T):
            v = grp(t)
            if v is None or t == v or x["producer"] < 0:
                continue
            p = x["producer"]
            if O[p]["phase"] == "forward":
                if x["kept_to_end"]:  # a forward view kept to the end holds its base
                    hold_stages[v] |= set(range(nS))
                continue
            i1 = self.stage_of[p]
            i2 = nS - 1 if x["kept_to_end"] else max(i1, last_use.get(t, i1))
            hold_stages[v] |= set(range(i1 + 1, i2 + 1))
        self.hold = {v: {ph for ph in range(self.nP) if self.stage_ph[ph] in hs}
                     for v, hs in hold_stages.items()}

        # Forward: the last forward use of each value (its producer when none).
        self.lastfwd = {v: self.pos.get(self.prod.get(v, -1), 0) for v in cand}
        for o in self.fwd:
            op = O[o]
            rd = {grp(t) for t in op["inputs"]}
            rd |= {grp(T[t]["alias_of"]) for t in op["outputs"] if T[t]["alias_of"] >= 0}
            for v in rd:
                if v is not None:
                    self.lastfwd[v] = max(self.lastfwd[v], self.pos[o])

        # maxneed[v]: the last phase that may need v (read, held, or through reruns).
        maxneed = {v: -1 for v in cand}
        for i, rd in enumerate(self.readsB):
            for v in rd:
                maxneed[v] = max(maxneed[v], i * S + S - 1)
        for v in cand:
            if self.hold[v]:
                maxneed[v] = max(maxneed[v], max(self.hold[v]))
        self.need_k = {}
        for o in reversed(self.rops):
            nk = max(maxneed[v] for v in self.makes[o])
            self.need_k[o] = nk
            for v in self.reads[o]:
                maxneed[v] = max(maxneed[v], nk)
        self.maxneed = maxneed

    def reads_ph(self, ph):
        """The values backward op b_i reads at the end of phase ph (none before its last)."""
        return self.readsB[self.stage_ph[ph]] if self.last_ph[ph] else ()

    # ---- the integral accounting the MILP encodes, for fixed reruns ----
    def required_A(self, R):
        """The least carries that reruns R (a set of ops per phase) need: A[ph] per phase."""
        A = [set() for _ in range(self.nP + 1)]
        for ph in range(self.nP - 1, -1, -1):
            rd = self.reads_ph(ph)
            for v in self.cand:
                need = ph in self.hold[v]
                if not need and self.prod[v] not in R[ph]:
                    need = v in rd or v in A[ph + 1] or any(v in self.reads[k] for k in R[ph])
                if need:
                    A[ph].add(v)
        return A

    def evaluate(self, R):
        """The model's peak and cost of reruns R (a set of ops per phase)."""
        cand = self.cand
        A = self.required_A(R)
        peak = 0
        for q, o in enumerate(self.fwd):
            m = self.steps[o]["other_during"]
            for v in cand:
                if self.pos[self.prod[v]] <= q <= self.lastfwd[v] or \
                        (self.lastfwd[v] < q and v in A[0]):
                    m += self.M[v]
            peak = max(peak, m)
        cost = 0.0
        for ph in range(self.nP):
            b = self.stages[self.stage_ph[ph]]
            rd = self.reads_ph(ph)
            ks = sorted(R[ph], key=lambda k: self.pos[k])
            cur = sum(self.M[v] for v in A[ph])
            ob = self.steps[b]["other_before"]
            for n, k in enumerate(ks):
                cost += self.O[k]["cost"]
                peak = max(peak, ob + cur + self.new_bytes[k])
                later = ks[n + 1:]
                cur += sum(self.M[v] for v in self.makes[k])
                for v in set(self.reads[k]) | set(self.makes[k]):
                    if v in rd or v in A[ph + 1] or any(v in self.reads[j] for j in later):
                        continue
                    cur -= self.M[v]
            if self.last_ph[ph]:
                peak = max(peak, self.steps[b]["other_during"] + cur)
        return peak, cost

    def no_reruns(self):
        return [set() for _ in range(self.nP)]


# --------------------------------------------------------------------------- the MILP


def quiet_highs():
    """highspy.Highs() prints a banner on stdout when made: keep it out of the output."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    return h


def build_milp(P, budget, least_peak=False, free_integer=False):
    """Returns (highspy.Highs, R columns {(ph, k): col}, A columns {(ph, v): col}, size).
    least_peak: minimise the peak (a column Z) instead of the recompute cost.
    free_integer: FREE binary too (the same optimum; HiGHS sometimes proves it faster)."""
    import highspy
    import numpy as np

    cols_lo, cols_hi, cols_cost, cols_int = [], [], [], []

    def var(lo, hi, cost=0.0, integer=False):
        cols_lo.append(lo)
        cols_hi.append(hi)
        cols_cost.append(cost)
        cols_int.append(integer)
        return len(cols_lo) - 1

    rows_lo, rows_hi, starts, idx, val = [], [], [], [], []

    def row(terms, lo, hi):
        starts.append(len(idx))
        merged = {}
        for c, a in terms:
            merged[c] = merged.get(c, 0.0) + a
        for c in sorted(merged):
            if merged[c] != 0.0:
                idx.append(c)
                val.append(merged[c])
        rows_lo.append(lo)
        rows_hi.append(hi)

    INF = highspy.kHighsInf
    scale = float(max(1, max(P.M.values(), default=1)))  # bytes in units of the largest value
    Z = var(0, INF, 1.0) if least_peak else None

    def mem_row(terms, const):
        """sum(terms) * scale + const <= the budget (or <= Z * scale)."""
        if Z is None:
            row(terms, -INF, (budget - const) / scale)
        else:
            row(terms + [(Z, -1.0)], -INF, -const / scale)

    R, A = {}, {}
    for k in P.rops:
        for ph in range(P.need_k[k] + 1):
            R[ph, k] = var(0, 1, 0.0 if least_peak else P.O[k]["cost"], True)
    for v in sorted(P.cand):
        for ph in range(P.maxneed[v] + 1):
            A[ph, v] = var(1 if ph in P.hold[v] else 0, 1, 0.0, True)

    def avail(ph, v):
        return [c for c in (A.get((ph, v)), R.get((ph, P.prod[v]))) if c is not None]

    for ph in range(P.nP):
        for v in sorted(P.reads_ph(ph)):  # b_i's reads
            row([(c, 1.0) for c in avail(ph, v)], 1, INF)
        for k in P.rops:  # reruns' reads
            rk = R.get((ph, k))
            if rk is not None:
                for v in P.reads[k]:
                    row([(rk, 1.0)] + [(c, -1.0) for c in avail(ph, v)], -INF, 0)
    for v in sorted(P.cand):  # carrying
        for ph in range(P.maxneed[v]):
            row([(A[ph + 1, v], 1.0)] + [(c, -1.0) for c in avail(ph, v)], -INF, 0)

    # Forward: A[0, v] keeps v alive past its last forward use.
    by_last = {}
    for v in sorted(P.cand):
        by_last.setdefault(P.lastfwd[v], []).append(v)
    cum = None
    for q, o in enumerate(P.fwd):
        const = P.steps[o]["other_during"]
        const += sum(P.M[v] for v in P.cand if P.pos[P.prod[v]] <= q <= P.lastfwd[v])
        new = [v for v in by_last.get(q - 1, []) if (0, v) in A]
        if new or cum is None:
            c = var(-INF, INF)
            terms = [(c, 1.0)] + [(A[0, v], -P.M[v] / scale) for v in new]
            if cum is not None:
                terms.append((cum, -1.0))
            row(terms, 0, 0)
            cum = c
        mem_row([(cum, 1.0)], const)

    # Phases: Checkmate's memory recurrence with FREE variables.
    for ph in range(P.nP):
        b = P.stages[P.stage_ph[ph]]
        rd = P.reads_ph(ph)
        ks = [k for k in P.rops if (ph, k) in R]  # forward order
        cur = var(-INF, INF)
        row([(cur, 1.0)] + [(A[ph, v], -P.M[v] / scale) for v in sorted(P.cand) if (ph, v) in A],
            0, 0)
        ob = P.steps[b]["other_before"]
        for n, k in enumerate(ks):
            rk = R[ph, k]
            mem_row([(cur, 1.0), (rk, P.new_bytes[k] / scale)], ob)
            nxt = var(-INF, INF)
            terms = [(nxt, 1.0), (cur, -1.0), (rk, -sum(P.M[v] for v in P.makes[k]) / scale)]
            for v in sorted(set(P.reads[k]) | set(P.makes[k])):
                if v in rd or (ph + 1) in P.hold[v]:
                    continue
                f = var(0, 1, 0.0, free_integer)
                row([(f, 1.0), (rk, -1.0)], -INF, 0)
                for j in ks[n + 1:]:
                    if v in P.reads[j]:
                        row([(f, 1.0), (R[ph, j], 1.0)], -INF, 1)
                if (ph + 1, v) in A:
                    row([(f, 1.0), (A[ph + 1, v], 1.0)], -INF, 1)
                terms.append((f, P.M[v] / scale))
            row(terms, 0, 0)
            cur = nxt
        if P.last_ph[ph]:
            mem_row([(cur, 1.0)], P.steps[b]["other_during"])

    h = quiet_highs()
    h.setOptionValue("output_flag", False)
    lp = highspy.HighsLp()
    lp.num_col_ = len(cols_lo)
    lp.num_row_ = len(rows_lo)
    lp.col_cost_ = np.array(cols_cost, dtype=np.double)
    lp.col_lower_ = np.array(cols_lo, dtype=np.double)
    lp.col_upper_ = np.array(cols_hi, dtype=np.double)
    lp.row_lower_ = np.array(rows_lo, dtype=np.double)
    lp.row_upper_ = np.array(rows_hi, dtype=np.double)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts + [len(idx)], dtype=np.int32)
    lp.a_matrix_.index_ = np.array(idx, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(val, dtype=np.double)
    lp.integrality_ = [highspy.HighsVarType.kInteger if x else highspy.HighsVarType.kContinuous
                       for x in cols_int]
    h.passModel(lp)
    size = {"columns": len(cols_lo), "integers": sum(cols_int), "rows": len(rows_lo),
            "nonzeros": len(idx), "scale": scale}
    return h, R, A, size


def solve(P, budget, time_limit, threads, start=None, least_peak=False, cold=False):
    """Solves at `budget` in two passes sharing the time limit: FREE binary (30% of it),
    then, unless that settled it, FREE continuous, started from the best solution so far.
    Both are the same problem, so the better solution and the larger dual bound of the two
    stand. `start` (rerun sets per phase, e.g. memplan's own program) is offered to HiGHS
    as a first incumbent, kept only if the model finds it feasible.
    cold: one pass (FREE continuous), no start, HiGHS's default options but for the time
    limit, the thread count and silence: what HiGHS finds on its own, independent of
    memplan."""
    import highspy
    import numpy as np

    if cold:
        start = None
    out = {"start": None, "passes": [], "optimal": False, "infeasible": False,
           "objective": None, "highs_objective": None, "dual_bound": None, "nodes": 0,
           "warm_start": not cold and start is not None,
           "options": ({"time_limit": time_limit, "threads": int(threads),
                        "rest": "HiGHS defaults (mip_rel_gap 1e-4, random_seed 0)"} if cold else
                       {"time_limit": time_limit, "threads": int(threads), "random_seed": 0,
                        "mip_rel_gap": 1e-6,
                        "passes": "FREE binary for 30% of the time, then FREE continuous "
                                  "from the best solution so far"})}
    if start is not None:
        peak_s, cost_s = P.evaluate(start)
        out["start"] = {"model_peak_bytes": peak_s, "cost": cost_s,
                        "fits_model": least_peak or peak_s <= budget}
    best, best_obj, bound = None, None, None
    t0 = time.monotonic()
    passes = ((False, 1.0),) if cold else ((True, 0.3), (False, 1.0))
    for free_integer, share in passes:
        left = time_limit - (time.monotonic() - t0)
        if left <= 1:
            break
        h, R, A, size = build_milp(P, budget, least_peak, free_integer)
        out["model"] = size
        h.setOptionValue("time_limit", float(left if share >= 1 else time_limit * share))
        h.setOptionValue("threads", int(threads))
        if not cold:
            h.setOptionValue("random_seed", 0)
            h.setOptionValue("mip_rel_gap", 1e-6)
        incumbent = best if best is not None else start
        if incumbent is not None and all((ph, k) in R for ph in range(P.nP)
                                         for k in incumbent[ph]):
            A_s = P.required_A(incumbent)
            cols = list(R.values()) + list(A.values())
            vals = [1.0 if k in incumbent[ph] else 0.0 for (ph, k) in R] + \
                   [1.0 if v in A_s[ph] else 0.0 for (ph, v) in A]
            h.setSolution(len(cols), np.array(cols, dtype=np.int32), np.array(vals, dtype=np.double))
        elif start is not None and incumbent is start:
            out["start"]["fits_model"] = False
        p0 = time.monotonic()
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        has_sol = info.primal_solution_status == 2  # feasible
        unit = size["scale"] if least_peak else 1.0
        rec = {"free": "binary" if free_integer else "continuous",
               "status": h.modelStatusToString(status), "solve_s": round(time.monotonic() - p0, 3),
               "dual_bound": None, "objective": None, "nodes": info.mip_node_count}
        out["nodes"] += info.mip_node_count
        if status == highspy.HighsModelStatus.kInfeasible:
            out["infeasible"] = True
            out["passes"].append(rec)
            break
        if abs(info.mip_dual_bound) < 1e300:
            rec["dual_bound"] = info.mip_dual_bound * unit
            bound = rec["dual_bound"] if bound is None else max(bound, rec["dual_bound"])
        if has_sol:
            # The objective of the returned solution, c.x: HiGHS 1.16 can report another
            # value for an incumbent that came from setSolution (seen: 254.93 for 255.09).
            x = np.array(h.getSolution().col_value)
            obj = float(np.dot(np.array(h.getLp().col_cost_), x)) * unit
            rec["objective"] = obj
            rec["highs_objective"] = info.objective_function_value * unit
            if best_obj is None or obj < best_obj - 1e-12 * max(1.0, abs(obj)):
                best_obj = obj
                out["highs_objective"] = rec["highs_objective"]
                best = P.no_reruns()
                for (ph, k), c in R.items():
                    if x[c] > 0.5:
                        best[ph].add(k)
        out["passes"].append(rec)
        if status == highspy.HighsModelStatus.kOptimal:
            # Optimal within the pass's mip_rel_gap: dual_bound stays HiGHS's proven bound.
            out["optimal"] = True
            if bound is None:
                bound = best_obj
            break
    out["solve_s"] = round(time.monotonic() - t0, 3)
    out["objective"] = best_obj
    if best_obj is not None and bound is not None and not out["optimal"] and \
            best_obj - bound <= 1e-6 * max(1.0, abs(best_obj)):
        out["optimal"] = True
    out["dual_bound"] = None if out["infeasible"] else bound
    if least_peak and best_obj is not None:
        out["objective"] = round(best_obj)
    out["status"] = ("Optimal" if out["optimal"] else "Infeasible" if out["infeasible"] else
                     "Time limit" if best is not None else "No solution")
    out["gap"] = None if best_obj is None or bound is None else \
        (best_obj - bound) / max(1e-12, abs(best_obj))
    return out, best


# --------------------------------------------------------------------------- programs


def runs_of(P, chosen):
    """The run sequence of rerun sets: the forward ops, then per stage its phases' reruns
    in forward order (with the view reruns they need) and the stage's backward op."""
    T, O = P.T, P.O
    runs = [O[o]["id"] for o in P.fwd]
    epoch = {v: 0 for v in P.cand}  # bumped at each rerun of the value's producer
    made = {t: 0 for o in P.fwd for t in O[o]["outputs"] if P.grp(t) is not None}
    counter = [0]

    def ensure(t, out):
        v = P.grp(t)
        if v is None or t == v:
            return
        p = T[t]["producer"]
        if O[p]["phase"] != "forward" or made.get(t) == epoch[v]:
            return  # a backward-made view (held), or made since its base was
        for u in O[p]["inputs"]:
            ensure(u, out)
        out.append(O[p]["id"])
        for u in O[p]["outputs"]:
            if P.grp(u) is not None:
                made[u] = epoch[P.grp(u)]

    view_runs = 0
    for ph in range(P.nP):
        b = P.stages[P.stage_ph[ph]]
        seq = []
        for k in sorted(chosen[ph], key=lambda k: P.pos[k]):
            for t in O[k]["inputs"]:
                ensure(t, seq)
            seq.append(O[k]["id"])
            for t in O[k]["outputs"]:
                if t in P.cand:
                    counter[0] += 1
                    epoch[t] = counter[0]
                    made[t] = epoch[t]
        if P.last_ph[ph]:
            for t in O[b]["inputs"]:
                ensure(t, seq)
            for t in O[b]["outputs"]:
                if T[t]["alias_of"] >= 0:
                    ensure(T[t]["alias_of"], seq)
            seq.append(O[b]["id"])
            view_runs -= 1
        view_runs += len(seq) - len(chosen[ph])
        runs.extend(seq)
    return runs, view_runs


def reruns_of_plan(P, plan):
    """memplan's step program as rerun sets per phase, or (None, why) when the MILP cannot
    express it: a stage whose reruns do not split into S forward-ordered runs."""
    ids = {op["id"]: n for n, op in enumerate(P.O)}
    seen, pending, sets = set(), [], []
    for s in plan["steps"]:
        if "run" not in s:
            continue
        o = ids[s["run"]]
        if P.O[o]["phase"] != "forward":
            i = len(sets) // P.S
            if i >= P.nS or P.stages[i] != o:
                return None, "backward op %s out of schedule order" % P.O[o]["id"]
            segs = [[]]
            for k in (k for k in pending if k in P.makes):
                if segs[-1] and P.pos[k] <= P.pos[segs[-1][-1]]:
                    segs.append([])
                segs[-1].append(k)
            if len(segs) > P.S:
                return None, ("stage %d (%s) reruns %d forward-ordered runs > --substages %d" %
                              (i, P.O[o]["id"], len(segs), P.S))
            sets.extend([set() for _ in range(P.S - len(segs))] + [set(x) for x in segs])
            pending = []
        elif o in seen:
            pending.append(o)
        seen.add(o)
    return sets, None


def segments_needed(P, plan):
    """The least S (rerun phases per stage) whose MILP can express memplan's program."""
    ids = {op["id"]: n for n, op in enumerate(P.O)}
    seen, last, segs, most = set(), None, 0, 1
    for s in plan["steps"]:
        if "run" not in s:
            continue
        o = ids[s["run"]]
        if P.O[o]["phase"] != "forward":
            most, last, segs = max(most, segs), None, 0
        elif o in seen and o in P.makes:
            if last is None or P.pos[o] <= P.pos[last]:
                segs += 1
            last = o
        seen.add(o)
    return most


def plan_cost(P, plan):
    """The summed cost of the reruns of a memplan.plan/1 step program, in P's cost unit."""
    ids = {op["id"]: n for n, op in enumerate(P.O)}
    seen, cost, runs = set(), 0.0, 0
    for s in plan["steps"]:
        if "run" not in s:
            continue
        o = ids[s["run"]]
        if o in seen:
            cost += P.O[o]["cost"]
            runs += 1
        seen.add(o)
    return cost, runs


def realize(args, P, chosen, budget, workdir, tag):
    """Turns rerun sets into a memplan.plan/1 (memplan's BuildProgram places the frees and
    in-place accumulations) and replays it with `memplan verify`."""
    sets = sum((["--set", s] for s in args.set), [])
    runs, view_runs = runs_of(P, chosen)
    runs_file = os.path.join(workdir, tag + ".runs.json")
    plan_file = os.path.join(workdir, tag + ".plan.json")
    with open(runs_file, "w") as f:
        json.dump({"runs": runs}, f)
    run([args.export_tool, args.graph, "--objective", args.objective, "--runs", runs_file,
         "--budget", str(budget), "-o", plan_file] + sets, ok=(0, 1))
    vjson = os.path.join(workdir, tag + ".verify.json")
    run([args.memplan, "verify", args.graph, plan_file, "--json", vjson, "--quiet"] + sets,
        ok=(0, 1))
    v = json.load(open(vjson))
    vcost, vruns = plan_cost(P, json.load(open(plan_file)))
    return {"valid": v["valid"], "error": v["error"], "peak_bytes": v["peak_bytes"],
            "within_budget": v["within_budget"], "recompute_cost": vcost,
            "recompute_runs": vruns, "view_reruns": view_runs,
            "verify_recompute_flops": v["recompute_cost"]}


def memplan_plan(args, budget, workdir, tag):
    out_json = os.path.join(workdir, "%s.memplan.report.json" % tag)
    out_plan = os.path.join(workdir, "%s.memplan.plan.json" % tag)
    cmd = [args.memplan, "plan", args.graph, "--budget", str(budget), "--objective",
           args.objective, "--budget-of", "allocated", "--json", out_json, "-o", out_plan,
           "--quiet"]
    for s in args.set:
        cmd += ["--set", s]
    _, dt = run(cmd, ok=(0, 3))
    return json.load(open(out_json)), json.load(open(out_plan)), dt


def in_model(P, start, why):
    if start is None:
        return {"expressible": False, "why": why}
    peak, cost = P.evaluate(start)
    return {"expressible": True, "model_peak_bytes": peak, "model_cost": cost}


def least_peak(args, P, floor_plan, workdir, name, cold=False):
    """The least peak of the MILP's program space (minimise the peak instead of the cost),
    warm-started with memplan's least-peak program (cold: not, HiGHS defaults); its
    solution verified as the others."""
    start, why = reruns_of_plan(P, floor_plan)
    sol, chosen = solve(P, 0, args.time_limit, args.threads,
                        start if (start is not None and args.warm_start) else None,
                        least_peak=True, cold=cold)
    sol["memplan_program_in_model"] = in_model(P, start, why)
    if chosen is not None:
        sol["model_peak_bytes"], sol["model_cost"] = P.evaluate(chosen)
        # An incumbent's Z may carry more than its reruns need (a time limit stops before
        # the least A is found): its reruns' own peak is the objective.
        sol["objective"] = min(sol["objective"], sol["model_peak_bytes"])
        if sol["dual_bound"] is not None and sol["objective"] <= sol["dual_bound"] + 1e-6 * sol["objective"]:
            sol["optimal"], sol["status"] = True, "Optimal"
        sol["program"] = realize(args, P, chosen, 0, workdir,
                                 name + (".least_peak_cold" if cold else ".least_peak"))
    print("%-26s least peak   %s %-18s peak %s bound %s %6.1fs  verified %s" % (
        P.ex["graph"], "cold" if cold else "warm", sol["status"], sol["objective"], sol["dual_bound"], sol["solve_s"],
        sol.get("program", {}).get("peak_bytes")), flush=True)
    return sol


def compare(res):
    """memplan's cost over the MILP's best verified program that fits, and over HiGHS's
    dual bound (the objective when proven optimal), in %; None when a side has nothing to
    compare (memplan does not fit, no MILP program fits, no bound, or a reference of 0
    with memplan above it)."""
    m = res["memplan"]
    if not m["feasible"]:
        return None, None

    def pct(ref):
        if ref is None:
            return None
        if ref <= 1e-12:
            return 0.0 if m["recompute_cost"] <= 1e-12 else None
        return round(100.0 * (m["recompute_cost"] - ref) / ref, 2)

    prog = res.get("milp_program")
    best = prog["recompute_cost"] if prog and prog["valid"] and prog["within_budget"] else None
    bound = res["milp"]["dual_bound"]
    if res["milp"]["optimal"] and res["milp"]["objective"] is not None:
        bound = res["milp"]["objective"]
    return pct(best), pct(bound)


def warm_start_gain(sol):
    """How much the warm-started solve improved on its start (memplan's own program)."""
    st = sol.get("start")
    if not sol.get("warm_start") or st is None or not st.get("fits_model"):
        return None
    obj = sol.get("objective")
    if obj is None:
        return None
    d = st["cost"] - obj
    tol = 1e-6 * max(1.0, abs(st["cost"]))
    return {"start_cost": st["cost"], "final_cost": obj, "improved": d > tol,
            "improvement_pct": round(100.0 * d / st["cost"], 2) if st["cost"] > 1e-12 else 0.0}


def reference(res):
    """The independent reference for memplan's cost at this budget: a proven optimum of the
    MILP's space (either solve: a proof does not depend on the start), else the larger
    proven lower bound (dual bound) of the two solves, else none. A time-limited incumbent
    is never one (warm-started, it is memplan's own program unless HiGHS improved on it)."""
    sols = [("warm", res["milp"])] + ([("cold", res["milp_cold"])] if "milp_cold" in res else [])
    if any(s["infeasible"] for _, s in sols):
        return {"kind": "proven_infeasible", "cost": None, "from": [n for n, s in sols
                                                                    if s["infeasible"]]}
    bounds = [(s["dual_bound"], n) for n, s in sols if s.get("dual_bound") is not None]
    best_bound = max(bounds)[0] if bounds else None
    opt = [(s["objective"], n) for n, s in sols if s["optimal"] and s["objective"] is not None]
    if opt:
        cost = min(opt)[0]
        return {"kind": "proven_optimum", "cost": cost, "bound": best_bound,
                "from": sorted(n for c, n in opt if abs(c - cost) <= 1e-4 * max(1.0, abs(cost)))}
    if bounds:
        return {"kind": "dual_bound", "cost": best_bound, "bound": best_bound,
                "from": sorted(n for b, n in bounds if b == best_bound)}
    return {"kind": None, "cost": None, "from": []}


def vs_reference(res):
    """memplan's cost over the reference, in % (None: no reference, or memplan over budget)."""
    m, ref = res["memplan"], res["reference"]
    if not m["feasible"] or ref["cost"] is None:
        return None
    if ref["cost"] <= 1e-12:
        return 0.0 if m["recompute_cost"] <= 1e-12 else None
    return round(100.0 * (m["recompute_cost"] - ref["cost"]) / ref["cost"], 2)


def vs_cold_program(res):
    """memplan's cost over the cold solve's verified program (a program HiGHS found on its
    own: an upper bound on the optimum, not a reference), in %."""
    m, prog = res["memplan"], res.get("milp_cold_program")
    if not m["feasible"] or not prog or not prog["valid"] or not prog["within_budget"]:
        return None
    ref = prog["recompute_cost"]
    if ref <= 1e-12:
        return 0.0 if m["recompute_cost"] <= 1e-12 else None
    return round(100.0 * (m["recompute_cost"] - ref) / ref, 2)


def summary_line(res):
    s, m = res["milp"], res["memplan"]
    prog = res.get("milp_program") or {}

    def g(x):
        return "-" if x is None else "%.6g" % x

    c = res.get("milp_cold") or {}
    ref = res["reference"]
    return ("%-26s %-6s %10d  warm %-10s obj %-9s bound %-9s %5.1fs verified %s"
            " | cold %-10s obj %-9s bound %-9s %5.1fs"
            " | memplan %s cost %s %.2fs | reference %s %s => %s%%" % (
                res["name"], res["budget_label"], res["budget_bytes"], s["status"],
                g(s["objective"]), g(s["dual_bound"]), s["solve_s"],
                g(prog.get("recompute_cost")), c.get("status", "-"), g(c.get("objective")),
                g(c.get("dual_bound")), c.get("solve_s", 0.0),
                "fits" if m["feasible"] else "over", g(m["recompute_cost"]), m["plan_s"],
                ref["kind"], g(ref["cost"]), res["memplan_vs_reference_pct"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--budget-pct", default="90,70,50,tight",
                    help="comma list of percentages of the baseline peak, or 'tight'")
    ap.add_argument("--budget", default="", help="comma list of budgets in bytes (instead)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="HiGHS seconds per solve")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--substages", default="auto",
                    help="rerun phases before each backward op (each op once per phase); "
                         "auto: per budget, the fewest that express memplan's program")
    ap.add_argument("--max-substages", type=int, default=3, help="the most auto picks")
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--export-tool", default=None,
                    help="memplan_milp_export (default: in --memplan's build folder)")
    ap.add_argument("--objective", default="time", choices=["time", "flops"])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-least-peak", dest="least_peak", action="store_false",
                    help="with 'tight': skip the MILP that minimises the peak")
    ap.add_argument("--no-warm-start", dest="warm_start", action="store_false",
                    help="do not offer memplan's program to HiGHS as a first incumbent")
    ap.add_argument("--no-cold", dest="cold", action="store_false",
                    help="skip the second, cold solve (no start, HiGHS defaults) per budget")
    ap.add_argument("--json", default="", help="write the results here (a JSON object)")
    ap.add_argument("--workdir", default="", help="keep exports and plans here")
    args = ap.parse_args()
    try:
        import highspy  # noqa: F401
    except ImportError:
        die("needs highspy (pip install highspy)")
    if args.export_tool is None:
        bdir = os.path.dirname(os.path.dirname(os.path.abspath(args.memplan)))
        args.export_tool = os.path.join(bdir, "bench", "memplan_milp_export")
    for exe in (args.memplan, args.export_tool):
        if not os.access(exe, os.X_OK):
            die("not executable: %s" % exe)
    workdir = args.workdir or os.path.join("/tmp", "checkmate_milp.%d" % os.getpid())
    os.makedirs(workdir, exist_ok=True)
    name = os.path.basename(args.graph).split(".")[0]
    sets = sum((["--set", s] for s in args.set), [])

    export = os.path.join(workdir, name + ".export.json")
    _, export_s = run([args.export_tool, args.graph, "--objective", args.objective, "-o",
                       export] + sets)
    ex = json.load(open(export))
    problems = {}

    def problem(S):
        if S not in problems:
            problems[S] = Problem(ex, S)
        return problems[S]

    def pick(plan):
        """The problem whose phases express memplan's program (--substages auto), or the
        one --substages N names."""
        if args.substages != "auto":
            return problem(int(args.substages))
        return problem(min(args.max_substages, segments_needed(problem(1), plan)))

    P = problem(1)
    if P.unsupported:
        die("%s: outside the model: %s" % (args.graph, "; ".join(P.unsupported[:5])))
    baseline = ex["baseline_peak_bytes"]
    floor = ex["lower_bound_bytes"]
    model_base, _ = P.evaluate(P.no_reruns())
    graph = {"graph": args.graph, "name": ex["graph"], "ops": len(ex["ops"]),
             "forward_ops": len(P.fwd), "stages": P.nS, "substages": args.substages,
             "candidates": len(P.cand), "rerunnable_ops": len(P.rops),
             "baseline_peak_bytes": baseline, "model_baseline_peak_bytes": model_base,
             "lower_bound_bytes": floor, "step_cost": ex["step_cost"],
             "cost_unit": ex["cost_unit"], "objective": ex["objective"], "device": ex["device"],
             "view_op_cost": P.view_cost, "export_s": round(export_s, 3),
             "time_limit_s": args.time_limit}
    if model_base != baseline:
        print("checkmate_milp: warning: %s: the model's save-all peak %d != the simulator's %d"
              % (args.graph, model_base, baseline), file=sys.stderr)

    budgets = []
    if args.budget:
        budgets = [("%d" % int(b), int(b)) for b in args.budget.split(",")]
    else:
        for tok in (t.strip() for t in args.budget_pct.split(",")):
            if tok != "tight":
                budgets.append(("%s%%" % tok, int(baseline * float(tok) / 100.0)))
                continue
            rep, fplan, fdt = memplan_plan(args, floor, workdir, name + ".floor")
            least = int(rep["min_feasible_peak_bytes"])
            budgets.append(("tight", max(floor, least)))
            graph["memplan_least_peak_bytes"] = least
            graph["memplan_least_peak_s"] = round(fdt, 3)
            if args.least_peak:
                # At least 2 phases: a program that remakes a tensor within a stage may reach
                # a lower peak than memplan's (gpt_tiny: 82.1 MB against 84.2 MB).
                PS = pick(fplan) if args.substages != "auto" else \
                    problem(min(args.max_substages, max(2, segments_needed(problem(1), fplan))))
                graph["milp_least_peak"] = least_peak(args, PS, fplan, workdir, name)
                graph["milp_least_peak"]["substages"] = PS.S
                if args.cold:
                    graph["milp_least_peak_cold"] = least_peak(args, PS, fplan, workdir, name,
                                                               cold=True)
                    graph["milp_least_peak_cold"]["substages"] = PS.S

    rows = []
    for label, budget in budgets:
        tag = "%s.%d" % (name, budget)
        res = {"name": ex["graph"], "budget_label": label, "budget_bytes": budget,
               "budget_pct": round(100.0 * budget / baseline, 2)}
        rep, mplan, mdt = memplan_plan(args, budget, workdir, tag)
        P = pick(mplan)
        res["substages"] = P.S
        start, why = reruns_of_plan(P, mplan)
        res["memplan_program_in_model"] = in_model(P, start, why)
        sol, chosen = solve(P, budget, args.time_limit, args.threads,
                            start if (start is not None and args.warm_start) else None)
        res["milp"] = sol
        if chosen is not None:
            sol["model_peak_bytes"], sol["model_cost"] = P.evaluate(chosen)
            res["milp_program"] = realize(args, P, chosen, budget, workdir, tag + ".milp")
        if args.cold:
            csol, cchosen = solve(P, budget, args.time_limit, args.threads, cold=True)
            res["milp_cold"] = csol
            if cchosen is not None:
                csol["model_peak_bytes"], csol["model_cost"] = P.evaluate(cchosen)
                res["milp_cold_program"] = realize(args, P, cchosen, budget, workdir,
                                                   tag + ".milp_cold")
        mcost, mruns = plan_cost(P, mplan)
        res["memplan"] = {
            "feasible": rep["feasible"], "peak_bytes": rep["predicted"]["peak_bytes"],
            "recompute_cost": rep["predicted"]["recompute_cost"],
            "recompute_cost_recounted": mcost, "recompute_runs": mruns,
            "algorithm": rep["algorithm"], "search_complete": rep["search_complete"],
            "evaluations": rep["evaluations"], "plan_s": round(mdt, 3),
            "min_feasible_peak_bytes": rep["min_feasible_peak_bytes"]}
        res["memplan_vs_milp_pct"], res["memplan_vs_bound_pct"] = compare(res)
        res["warm_start_gain"] = warm_start_gain(sol)
        res["reference"] = reference(res)
        res["memplan_vs_reference_pct"] = vs_reference(res)
        res["memplan_vs_cold_milp_pct"] = vs_cold_program(res)
        rows.append(res)
        print(summary_line(res), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"graph": graph, "rows": rows}, f, indent=1)
            f.write("\n")


# --------------------------------------------------------------------------- the report


ASSUMPTIONS = """\
- Program space (memplan's execution model, SPEC section 2): the forward runs once in
  schedule order; each backward op runs once in schedule order, preceded by S rerun phases,
  each a set of forward ops rerun in forward order, each op at most once per phase, so a
  tensor may be recomputed in many stages and up to S times in one (held between uses, or
  freed after each use and recomputed). S (column "S") is, per budget, the fewest phases
  that express memplan's own program at that budget (memplan's builder may rerun an op
  again in the same stage), so that the MILP's space contains memplan's program. Frees:
  each instance right after its last use; in-place gradient accumulation wherever
  memplan's program builder takes it.
- Memory: exact at the buffer level for the save-all program and for memplan's own programs
  (the model's peak of each is checked against the simulator below); bytes no rerun changes
  (resident, kept to the end, every backward-made buffer, in-place accumulation) come from
  the simulator's replay of the baseline; views own no bytes, a backward-made view of a
  forward buffer holds it (as reference counts do). Conservative (over-counts, never
  under-counts) only where a held value is also rerun in the same phase.
- Outside the model: rerun orders that are not forward order within a phase, more than S
  reruns of an op per stage, reordering the backward. When memplan's program is outside
  the MILP's space (column "in model"), the MILP's optimum and bound do not bound it.
- Objective: the summed cost of reruns under memplan's CostModel (objective and device as
  in the header; view-only reruns cost 0 and are left out of the objective, the verified
  cost counts them). The MILP's solution is turned into a step program by memplan's own
  BuildProgram and replayed by `memplan verify`: "verified" columns are the simulator's.
- HiGHS, two solves per budget, each with the same time limit (rows that hit it depend on
  the machine's speed and load; all else is deterministic):
  cold: no start, HiGHS's default options (mip_rel_gap 1e-4) but for one thread and the
  time limit, one pass: what HiGHS finds on its own, independent of memplan;
  warm: memplan's own program offered as the first incumbent, one thread, seed 0, relative
  gap 1e-6, two passes sharing the time limit (FREE binary for 30% of it, then FREE
  continuous from the best solution so far: the same problem, the better solution and
  bound stand). A warm solve stopped by the time limit returns memplan's program unless
  HiGHS improved on it, so its incumbent says nothing about memplan.
- References: only a proven optimum (either solve: a proof holds whatever the start) or,
  where none was proven, the larger proven lower bound (dual bound) of the two solves is
  an independent reference for memplan's cost, and it bounds memplan's program only where
  that program lies in the MILP's space ("in model"). A time-limited incumbent is not a
  reference: the cold one is a program HiGHS found on its own (an upper bound on the
  optimum), the warm one starts as memplan's.
"""


def fmt_bytes(b):
    if b is None:
        return "-"
    return "%.3f MiB" % (b / 1048576.0)


def fmt_num(x, nd=4):
    if x is None:
        return "-"
    return ("%." + str(nd) + "g") % x


def fmt_pct(x):
    return "-" if x is None else ("%+.1f%%" % x if x != 0 else "0.0%")


def prog_peak(lp):
    return (lp.get("program") or {}).get("peak_bytes")


FIELDS = {
    "rows[].milp": "the warm-started solve (memplan's program offered as the first incumbent); "
                   "its objective is no reference where it hit the time limit",
    "rows[].milp_program": "the warm solve's best program, replayed by memplan verify",
    "rows[].milp_cold": "the cold solve: no start, HiGHS's default options but for one thread "
                        "and the time limit",
    "rows[].milp_cold_program": "the cold solve's best program, replayed by memplan verify",
    "rows[].warm_start_gain": "how much the warm solve lowered the cost from its start "
                              "(memplan's program); improved false: it returned memplan's program",
    "rows[].reference": "the independent reference: kind proven_optimum (cost: the optimum, "
                        "from whichever solve proved it), dual_bound (cost: the larger proven "
                        "lower bound of the two solves), proven_infeasible, or null",
    "rows[].memplan_vs_reference_pct": "memplan's cost over reference.cost, in %: against an "
                                       "optimum the gap, against a bound the most the gap can be",
    "rows[].memplan_vs_cold_milp_pct": "memplan's cost over the cold program's (an upper bound "
                                       "on the optimum found without memplan), in %",
    "rows[].memplan_vs_milp_pct": "kept from format /1: memplan's cost over the warm solve's "
                                  "verified program; 0.0 at a time-limited row only says HiGHS "
                                  "found nothing better than memplan's start",
    "rows[].memplan_vs_bound_pct": "kept from format /1: memplan's cost over the warm solve's "
                                   "optimum, else its dual bound",
    "graph.milp_least_peak / graph.milp_least_peak_cold":
        "least-peak solves, warm-started from memplan's least-peak program / cold",
    "dual_bound": "HiGHS's proven lower bound (format /1 put the objective there at optimal rows; "
                  "now always the bound; optimal means within mip_rel_gap: 1e-6 warm, 1e-4 cold)",
}


def status_of(s):
    if s is None:
        return "-"
    if s["optimal"]:
        return "optimal"
    if s["infeasible"]:
        return "infeasible"
    return "time limit" if "Time" in s["status"] else s["status"]


def program_notes(gname, label, which, s, prog):
    """Disagreements between the MILP's model and the simulator for one solve's program."""
    notes = []
    if not prog:
        return notes
    vpeak = prog.get("peak_bytes")
    if not prog["valid"]:
        notes.append("%s %s (%s): the MILP's program is invalid: %s" % (
            gname, label, which, prog["error"]))
    elif vpeak != s.get("model_peak_bytes"):
        notes.append("%s %s (%s): the MILP's program peaks at %d in the simulator, %d in the "
                     "model" % (gname, label, which, vpeak, s["model_peak_bytes"]))
    if prog["valid"] and not prog["within_budget"]:
        notes.append("%s %s (%s): the MILP's program is over the budget in the simulator" % (
            gname, label, which))
    if abs(prog["recompute_cost"] - s["objective"]) > 1e-6 * max(1.0, s["objective"]):
        notes.append("%s %s (%s): the MILP's objective %.6g, its verified program costs %.6g" % (
            gname, label, which, s["objective"], prog["recompute_cost"]))
    if s.get("highs_objective") is not None and s["objective"] is not None and \
            abs(s["highs_objective"] - s["objective"]) > 1e-6 * max(1.0, s["objective"]):
        notes.append("%s %s (%s): HiGHS reported objective %.6g for a solution whose c.x is "
                     "%.6g (the latter is used)" % (gname, label, which, s["highs_objective"],
                                                   s["objective"]))
    return notes


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else round((xs[m - 1] + xs[m]) / 2, 2)


def n_of(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def summarize(graphs):
    """Counts over the cost rows (the JSON's "summary" and the page's headline)."""
    rows = [r for g in graphs for r in g["rows"]]
    kinds = {}
    for r in rows:
        k = (r.get("reference") or {}).get("kind") or "none"
        kinds[k] = kinds.get(k, 0) + 1
    warm = [r["milp"] for r in rows]
    cold = [r["milp_cold"] for r in rows if "milp_cold" in r]
    warm_tl = [r for r in rows if not r["milp"]["optimal"] and not r["milp"]["infeasible"]]
    gains = [r.get("warm_start_gain") for r in warm_tl]
    cold_progs = [r for r in rows if (r.get("milp_cold_program") or {}).get("within_budget")]
    vs_ref = [r for r in rows if r.get("memplan_vs_reference_pct") is not None]
    return {
        "rows": len(rows),
        "reference_kinds": kinds,
        "warm_optimal": sum(1 for s in warm if s["optimal"]),
        "warm_time_limited": len(warm_tl),
        "warm_time_limited_returned_memplans_program": sum(
            1 for g in gains if g is not None and not g["improved"]),
        "warm_improved_on_memplan": sum(
            1 for r in rows if (r.get("warm_start_gain") or {}).get("improved")),
        "cold_solves": len(cold),
        "cold_optimal": sum(1 for s in cold if s["optimal"]),
        "cold_infeasible": sum(1 for s in cold if s["infeasible"]),
        "cold_time_limited_with_program": sum(
            1 for s in cold if not s["optimal"] and not s["infeasible"] and
            s["objective"] is not None),
        "cold_no_program": sum(1 for s in cold if s["objective"] is None and not s["infeasible"]),
        "memplan_at_or_below_cold_program": sum(
            1 for r in cold_progs if r.get("memplan_vs_cold_milp_pct") is not None and
            r["memplan_vs_cold_milp_pct"] <= 0.0),
        "cold_programs_within_budget": len(cold_progs),
        "memplan_at_proven_optimum": sum(
            1 for r in vs_ref if r["reference"]["kind"] == "proven_optimum" and
            r["memplan_vs_reference_pct"] <= 0.01),
        "memplan_above_proven_optimum": sum(
            1 for r in vs_ref if r["reference"]["kind"] == "proven_optimum" and
            r["memplan_vs_reference_pct"] > 0.01),
        "memplan_vs_dual_bound_max_pct": max(
            (r["memplan_vs_reference_pct"] for r in vs_ref
             if r["reference"]["kind"] == "dual_bound"), default=None),
        "memplan_vs_dual_bound_median_pct": median(
            [r["memplan_vs_reference_pct"] for r in vs_ref
             if r["reference"]["kind"] == "dual_bound"]),
        "least_peak": least_peak_summary(graphs),
    }


def least_peak_summary(graphs):
    """Per graph with a least-peak solve: the lowest verified peak either solve found, whether
    a solve proved it least, and memplan's least peak beside it."""
    out = []
    for gdoc in graphs:
        g = gdoc["graph"]
        sols = [(n, g[k]) for n, k in (("cold", "milp_least_peak_cold"),
                                       ("warm", "milp_least_peak")) if g.get(k)]
        if not sols:
            continue
        peaks = [(prog_peak(s), n) for n, s in sols if prog_peak(s) is not None]
        bound = max((s["dual_bound"] for _, s in sols if s["dual_bound"] is not None),
                    default=None)
        best = min(peaks) if peaks else (None, None)
        out.append({"graph": g["name"],
                    "memplan_least_peak_bytes": g.get("memplan_least_peak_bytes"),
                    "milp_least_peak_bytes": best[0], "from": best[1], "bound_bytes": bound,
                    "proven": best[0] is not None and bound is not None and
                    best[0] <= bound * (1 + 1e-4)})
    return out


def render(argv):
    ap = argparse.ArgumentParser(prog="checkmate_milp.py render")
    ap.add_argument("inputs", nargs="+", help="the --json outputs of each graph's run")
    ap.add_argument("--out-json", required=True)
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--meta", default="{}", help="a JSON object: date, machine, commit, ...")
    a = ap.parse_args(argv)
    meta = json.loads(a.meta)
    try:
        import highspy

        h = quiet_highs()
        meta["highs"] = "%d.%d.%d" % (h.versionMajor(), h.versionMinor(), h.versionPatch())
        del highspy
    except ImportError:
        pass
    graphs = []
    for f in a.inputs:  # a graph's --json output, or a whole checkmate.json
        d = json.load(open(f))
        graphs.extend(d["graphs"] if "graphs" in d else [d])
    summary = summarize(graphs)
    doc = {"format": "memplan.bench.checkmate/2", "meta": meta, "assumptions": ASSUMPTIONS,
           "fields": FIELDS, "summary": summary, "graphs": graphs}
    with open(a.out_json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

    L = []
    L.append("# memplan's planner against a Checkmate-style MILP (HiGHS)")
    L.append("")
    L.append("Generated by `bench/checkmate.sh`; raw numbers in `checkmate.json`. Every "
             "number below comes from that run.")
    L.append("")
    for key in ("date", "machine", "load", "commit", "memplan", "memplan_version", "highs",
                "time_limit_s", "objective", "total_s", "note"):
        if key in meta:
            L.append("- %s: %s" % (key.replace("_", " "), meta[key]))
    L.append("")
    S = summary
    k = S["reference_kinds"]
    L.append("## In short")
    L.append("")
    L.append("- %s. Independent references (see below): a proven optimum at %d, only a "
             "proven lower bound (dual bound) at %d, proven infeasible (nothing in the MILP's "
             "space fits) at %d, none at %d." % (
                 n_of(S["rows"], "budget"), k.get("proven_optimum", 0), k.get("dual_bound", 0),
                 k.get("proven_infeasible", 0), k.get("none", 0)))
    L.append("- Where an optimum was proven, memplan's cost is at it at %d budgets and above it "
             "at %d; where only a bound is known, memplan is at most %s above it (median of "
             "those budgets %s; a bound on the gap, not a measured gap: the optimum lies "
             "somewhere between)." % (
                 S["memplan_at_proven_optimum"], S["memplan_above_proven_optimum"],
                 fmt_pct(S["memplan_vs_dual_bound_max_pct"]),
                 fmt_pct(S.get("memplan_vs_dual_bound_median_pct"))))
    L.append("- Warm-started with memplan's program, HiGHS hit the time limit at %s; at "
             "%d of them its best was memplan's own starting program (it found nothing "
             "better), so those incumbents are no reference. It improved on memplan's program "
             "at %s in all." % (
                 n_of(S["warm_time_limited"], "budget"),
                 S["warm_time_limited_returned_memplans_program"],
                 n_of(S["warm_improved_on_memplan"], "budget")))
    L.append("- Cold (no start, HiGHS defaults), it proved the optimum at %d of %d budgets, "
             "proved infeasibility at %d, stopped at the time limit with a program at %d and "
             "without one at %d; memplan costs at most the cold program at %d of the %d "
             "budgets where that program fits." % (
                 S["cold_optimal"], S["cold_solves"], S["cold_infeasible"],
                 S["cold_time_limited_with_program"], S["cold_no_program"],
                 S["memplan_at_or_below_cold_program"], S["cold_programs_within_budget"]))
    lp = S["least_peak"]
    lower = [x for x in lp if x["milp_least_peak_bytes"] is not None and
             x["memplan_least_peak_bytes"] is not None and
             x["milp_least_peak_bytes"] < x["memplan_least_peak_bytes"]]
    if lp:
        L.append("- Least peak: the MILP's space holds a program below memplan's least peak on "
                 "%d of %d graphs (%s); the MILP's least is proven at %d of %d." % (
                     len(lower), len(lp),
                     "; ".join("%s %s against memplan's %s, %s solve" % (
                         x["graph"], fmt_bytes(x["milp_least_peak_bytes"]),
                         fmt_bytes(x["memplan_least_peak_bytes"]), x["from"])
                               for x in lower) or "none",
                     sum(1 for x in lp if x["proven"]), len(lp)))
    L.append("")
    L.append("## The model and its assumptions")
    L.append("")
    L.append(ASSUMPTIONS.rstrip())
    L.append("")
    L.append("## memplan's cost against the independent reference")
    L.append("")
    L.append("Cost: the summed cost of reruns, in the graph's unit (time_us: memplan's roofline "
             "estimate). Reference: the proven optimum of the MILP's space (`optimum`), or "
             "where none was proven the best proven lower bound of the cold and warm solves "
             "(`bound`); \"vs reference\" is memplan's cost over it: 0.0% against an optimum "
             "means memplan found an optimal program of that space; against a bound it is the "
             "most memplan can be above the optimum. `tight` is the least peak memplan reaches "
             "when asked for the floor; \"in model\": memplan's program lies in the MILP's "
             "space (else the reference does not bound it).")
    L.append("")
    L.append("| graph | budget | S | memplan cost | memplan s | memplan peak | in model "
             "| reference | from | vs reference |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for gdoc in graphs:
        g = gdoc["graph"]
        for r in gdoc["rows"]:
            m = r["memplan"]
            ref = r.get("reference") or {"kind": None, "cost": None, "from": []}
            inm = r["memplan_program_in_model"]
            kind = {"proven_optimum": "optimum %s", "dual_bound": "bound %s",
                    "proven_infeasible": "infeasible%s"}.get(ref["kind"], "none%s")
            vs = fmt_pct(r.get("memplan_vs_reference_pct"))
            if ref["kind"] == "dual_bound" and r.get("memplan_vs_reference_pct") is not None:
                vs = "at most " + vs
            L.append("| %s | %s %s | %d | %s%s | %.2f | %s | %s | %s | %s | %s |" % (
                g["name"], r["budget_label"], fmt_bytes(r["budget_bytes"]), r["substages"],
                fmt_num(m["recompute_cost"]), "" if m["feasible"] else " (over)", m["plan_s"],
                fmt_bytes(m["peak_bytes"]), "yes" if inm["expressible"] else "no",
                kind % (fmt_num(ref["cost"]) if ref["cost"] is not None else ""),
                ", ".join(ref["from"]) or "-", vs))
            notes += program_notes(g["name"], r["budget_label"], "warm", r["milp"],
                                   r.get("milp_program"))
            if "milp_cold" in r:
                notes += program_notes(g["name"], r["budget_label"], "cold", r["milp_cold"],
                                       r.get("milp_cold_program"))
            if inm["expressible"] and m["feasible"] and inm["model_peak_bytes"] != m["peak_bytes"]:
                notes.append("%s %s: memplan's program peaks at %d, %d in the model" % (
                    g["name"], r["budget_label"], m["peak_bytes"], inm["model_peak_bytes"]))
        if g["model_baseline_peak_bytes"] != g["baseline_peak_bytes"]:
            notes.append("%s: the model's save-all peak %d, the simulator's %d" % (
                g["name"], g["model_baseline_peak_bytes"], g["baseline_peak_bytes"]))
    L.append("")
    L.append("## The two solves")
    L.append("")
    L.append("Cold: HiGHS alone (no start, defaults). Warm: started from memplan's program "
             "(its cost is \"start\"); \"gain\": how much HiGHS lowered the cost from that "
             "start within the time limit (0.0%: it returned memplan's program). Costs are "
             "those of the programs the simulator verified (`memplan verify`); bounds are "
             "HiGHS's proven lower bounds. \"memplan vs cold\": memplan's cost over the cold "
             "program's, an upper bound on the optimum found independently of memplan.")
    L.append("")
    L.append("| graph | budget | cold status | cold cost | cold bound | cold s | memplan vs cold "
             "| warm status | start (memplan) | warm cost | gain | warm bound | warm s |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for gdoc in graphs:
        g = gdoc["graph"]
        for r in gdoc["rows"]:
            c, w = r.get("milp_cold"), r["milp"]
            cp, wp = r.get("milp_cold_program") or {}, r.get("milp_program") or {}
            gain = r.get("warm_start_gain")
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f |" % (
                g["name"], r["budget_label"], status_of(c),
                fmt_num(cp.get("recompute_cost")) + ("" if not cp or (
                    cp["valid"] and cp["within_budget"]) else " (!)"),
                fmt_num(c["dual_bound"]) if c else "-",
                "%.1f" % c["solve_s"] if c else "-", fmt_pct(r.get("memplan_vs_cold_milp_pct")),
                status_of(w), fmt_num((w.get("start") or {}).get("cost")),
                fmt_num(wp.get("recompute_cost")) + ("" if not wp or (
                    wp["valid"] and wp["within_budget"]) else " (!)"),
                ("-" if gain is None else ("%.2f%%" % gain["improvement_pct"]
                                           if gain["improved"] else "0.0%")),
                fmt_num(w["dual_bound"]), w["solve_s"]))
    L.append("")
    L.append("## Least peak")
    L.append("")
    L.append("The least peak of the MILP's program space (minimising the peak instead of the "
             "cost, with at least S = 2 phases per stage; its program verified), cold and "
             "warm-started from memplan's least-peak program, against the least peak memplan "
             "reaches and the floor (PeakLowerBound: no program of any kind goes lower). "
             "\"optimal\" only where proven: the verified peak meets HiGHS's bound.")
    L.append("")
    L.append("| graph | ops | fwd / stages / candidates | baseline | floor | memplan least | "
             "cold least (verified) | cold bound | cold status | warm least (verified) | "
             "warm bound | warm status | S | solve s cold / warm | model integers |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def lp_status(lp):
        if lp is None:
            return "-"
        if lp["optimal"] or (lp["dual_bound"] is not None and prog_peak(lp) is not None
                             and prog_peak(lp) <= lp["dual_bound"] * (1 + 1e-6)):
            return "optimal"
        return lp["status"].lower()

    for gdoc in graphs:
        g = gdoc["graph"]
        lp = g.get("milp_least_peak")
        if lp is None:
            continue
        lc = g.get("milp_least_peak_cold")
        L.append("| %s | %d | %d / %d / %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | "
                 "%s / %.1f | %d |" % (
                     g["name"], g["ops"], g["forward_ops"], g["stages"], g["candidates"],
                     fmt_bytes(g["baseline_peak_bytes"]), fmt_bytes(g["lower_bound_bytes"]),
                     fmt_bytes(g.get("memplan_least_peak_bytes")),
                     fmt_bytes(prog_peak(lc)) if lc else "-",
                     fmt_bytes(lc["dual_bound"]) if lc else "-", lp_status(lc),
                     fmt_bytes(prog_peak(lp)), fmt_bytes(lp["dual_bound"]), lp_status(lp),
                     lp["substages"], "%.1f" % lc["solve_s"] if lc else "-", lp["solve_s"],
                     lp["model"]["integers"]))
        for which, x in (("warm", lp), ("cold", lc)):
            prog = (x or {}).get("program")
            if prog and prog["peak_bytes"] != x.get("model_peak_bytes"):
                notes.append("%s least peak (%s): the MILP's program peaks at %s in the "
                             "simulator, %s in the model" % (g["name"], which,
                                                             prog["peak_bytes"],
                                                             x["model_peak_bytes"]))
    L.append("")
    L.append("## Consistency check: where the MILP's model and memplan's simulator disagreed")
    L.append("")
    L.append("Not a measurement: the MILP's accounting and `memplan verify` are two models of "
             "the same memplan semantics, checked against each other.")
    L.append("")
    if notes:
        L.extend("- " + n for n in notes)
    else:
        L.append("- nowhere: every MILP program (cold and warm) verified valid, within its "
                 "budget, at the peak and cost the model gave it; memplan's programs had the "
                 "model's peak.")
    L.append("")
    with open(a.out_md, "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "render":
        render(sys.argv[2:])
    else:
        main()
