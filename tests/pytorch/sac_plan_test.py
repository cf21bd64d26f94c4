#!/usr/bin/python3
"""Op-level plans (`memplan plan --granularity sac`) applied to a model
outside the project's tables (bench/results/torch_models*.json, the other
tests): torchvision's mnasnet1_0 at batch 4, exported with measured scratch,
planned at 60% of its predicted baseline, applied through selective
activation checkpointing policies (memplan.torch.apply_plan) and measured.

* at --module-depth 2 (memplan's default: the stem's single batch norms and
  the three-block stacks layers.8 ... layers.13) no plan reaches 60%, and the
  lowest one found (exit 3) is measured within 0.3% of its prediction; at
  --module-depth 3 (one inverted-residual block per module) the plan fits
  and is measured within 0.3% too;
* the measured step's gradients are the unplanned step's; the policy
  modules (no random op among them) keep no RNG state;
* a block's output that only the next module reads (its residual add) is
  never saved by the block's policy: the next module's checkpoint holds it
  as its input, and SAC's cache would hold it until the block's backward
  ends, since the block's recomputation stops before its last op. Before
  that rule the depth-2 plan was predicted 0.89% below the measured step
  (1.47% with the default scratch rules; issue 31).

Usage: sac_plan_test.py --memplan PATH [--require-torch VERSION]
Fails (does not skip) when torch or torchvision is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
try:
    import torch
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"FAIL: {e}; install torch and torchvision (scripts/install-deps.sh --test)")
    sys.exit(1)
import memplan.torch as mt  # noqa: E402
from checks import Checks  # noqa: E402

SPEC, BATCH, FRACTION = "torchvision:mnasnet1_0", 4, 0.6
# Measured on torch 2.14.1 and 2.15.0 alike (CPU, one thread): -0.011% at
# depth 2 (-0.887% before the rule above; what is left is the CPU RNG state,
# 5,056 B, not modelled, that the three plainly wrapped batch norms hold from
# their forward to their backward), +0.004% at depth 3 (-0.101% before). The
# tolerance is the exporter tests' for plans with measured scratch.
PLAN_TOLERANCE = 0.003
# (module depth, whether the plan must fit)
DEPTHS = ((2, False), (3, True))
TIMEOUT = 600  # s for each memplan run: a hung planner fails the test


def memplan(binary, *args, ok=(0,)):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode not in ok:
        raise RuntimeError(f"memplan {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def fresh():
    model = mt.load_model(SPEC)
    inputs = mt.example_inputs(model, BATCH)
    return model, inputs, mt.make_target(model, inputs)


def escaping_adds_saved(plan, graph):
    """The policy entries that save a residual add whose output nothing in
    its own module reads again (a block's output, read by the next module's
    forward and backward): there should be none."""
    ops = {o["id"]: o for o in graph["ops"]}
    readers = {}
    for o in graph["ops"]:
        for t in o["inputs"]:
            readers.setdefault(t, []).append(o)

    def inside(op, module):
        scope = op.get("scope", "")
        return scope == module or scope.startswith(module + ".")
    bad = []
    for r in plan.get("sac", []):
        for o in r["ops"]:
            op = ops[o["op"]]
            if not op["type"].startswith("aten.add.Tensor") or o["policy"] != "save":
                continue
            rs = [u for t in op["outputs"] for u in readers.get(t, [])]
            if any(u["phase"] == "forward" for u in rs) and \
                    not any(inside(u, r["module"]) for u in rs):
                bad.append(f"{r['module']}: {o['op']}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--require-torch", help="fail unless torch.__version__ starts with this")
    args = ap.parse_args()
    check = Checks()
    if args.require_torch and not torch.__version__.startswith(args.require_torch):
        check(f"torch {args.require_torch}", False, f"this is torch {torch.__version__}")
        return check.summary()
    name = f"{SPEC.split(':')[1]} b{BATCH} (torch {torch.__version__})"
    with tempfile.TemporaryDirectory() as tmp:
        model, inputs, target = fresh()
        graph = mt.export(model, inputs, target, name=SPEC, workspace="measure")
        path = os.path.join(tmp, "g.json")
        with open(path, "w") as f:
            f.write(mt.dumps(graph))
        rep = os.path.join(tmp, "a.json")
        memplan(args.memplan, "analyze", path, "--json", rep, "-q")
        baseline_pred = json.load(open(rep))["peak_bytes"]
        base_model, inputs, target = fresh()
        baseline = mt.measure(base_model, inputs, target)["peak_bytes"]
        base_grads = {n: p.grad for n, p in base_model.named_parameters()}
        budget = int(baseline_pred * FRACTION)
        for depth, must_fit in DEPTHS:
            out = os.path.join(tmp, f"sac{depth}.json")
            p = memplan(args.memplan, "plan", path, "--budget", str(budget), "--granularity",
                        "sac", "--module-depth", str(depth), "-o", out, "-q", ok=(0, 3))
            plan = json.load(open(out))
            what = f"{name}, depth {depth}, sac plan at {FRACTION:.0%}"
            check(f"{what}: {'fits' if must_fit else 'lowest plan written'}, modules with "
                  "policies",
                  (p.returncode == 0 if must_fit else p.returncode in (0, 3))
                  and plan.get("sac"), f"exit {p.returncode}, modules {plan.get('modules')}")
            bad = escaping_adds_saved(plan, graph)
            check(f"{what}: no block output that only the next module reads is saved",
                  not bad, "; ".join(bad))
            model, inputs, target = fresh()
            pm = mt.measure(model, inputs, target, plan=out)
            # The measured step's gradients are the unplanned step's: the
            # policies recompute what they drop, and the modules that keep
            # no RNG state (no random op) lose nothing by it.
            off = [n for n, q in model.named_parameters()
                   if not torch.allclose(q.grad, base_grads[n], rtol=1e-4, atol=1e-6)]
            check(f"{what}: gradients as without the plan", not off, ", ".join(off[:5]))
            check(f"{what}: no module draws random ops (their policies keep no RNG state)",
                  not any(mt._apply._draws_random(r) for r in plan["sac"]),
                  ", ".join(r["module"] for r in plan["sac"] if mt._apply._draws_random(r)))
            pred, meas = plan["predicted"]["peak_bytes"], pm["peak_bytes"]
            e = (pred - meas) / meas
            check(f"{what}: lowers the measured peak", meas < baseline,
                  f"{baseline} B -> {meas} B")
            check(f"{what}: measured within {PLAN_TOLERANCE:.1%} of the prediction",
                  abs(e) <= PLAN_TOLERANCE,
                  f"predicted {pred} B, measured {meas} B ({meas / baseline:.3f} of the "
                  f"baseline), error {100 * e:+.3f}%")
    dropout = {"module": "h.0", "ops": [{"type": "aten.native_dropout.default"}]}
    check("a module with dropout keeps its RNG state (the recomputation redraws the mask)",
          mt._apply._draws_random(dropout))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
