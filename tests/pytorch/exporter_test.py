#!/usr/bin/python3
"""Tests of the PyTorch exporter (python/memplan/torch) against
real eager steps on the CPU, under whichever torch runs it (CI: torch 2.14.1
in .venv and 2.15.0 in .venv-newest, requirements/torch-*.txt):

* export (joint) + `memplan analyze` predicts the measured eager peak within 0.05%
  on a small CNN, a residual CNN with in-place ReLU / `+=`, a small GPT, a
  torchvision model (shufflenet_v2_x1_0), a model whose peak is an in-place op
  and conv-bn blocks with in-place ReLU6 / Hardswish / SiLU (MobileNet-style);
* a module plan at 70% of the baseline (`memplan plan --granularity module`),
  applied with torch.utils.checkpoint, lowers the measured peak, and the
  measured peak is within 0.3% of the plan's prediction (the named exceptions
  in PLAN_EXCEPTIONS: within their own measured error);
* torch 2.x: an op-level plan at 70% (`--granularity sac`) applied through
  selective activation checkpointing policies, within 0.3% as well; a policy
  that does not match eager's ops is a PlanError naming module and op;
  measured op times (export times=True) and SAC's dispatch charge: free, it
  gives modules policies; dear, plain wraps, measured within 0.3%; the op
  times sum to x0.5-x2 of the eager step's time;
* the graph carries what it must: `alias_of` for eager's in-place ops, the
  clone eager saves for an in-place activation as a forward op, SiLU's
  derivative as one op (as eager runs it), `grad_of`
  on every parameter gradient, a scope on every op, flops on convolutions;
* the compiled-style graph (in-place ops not recorded) mispredicts a model
  whose eager peak is an in-place op in the forward, so that check can fail;
* forward style: a forward-only graph that memplan lowers itself.

Fails (does not skip) when torch or torchvision is missing: CI installs them.
Usage: exporter_test.py --memplan PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPORTER = os.path.join(ROOT, "python")
# Every case exports with measured scratch (workspace="measure"). Measured at
# HEAD on torch 2.14.1 and 2.15.0: baselines within 0.001%, plans within
# 0.19%; the tolerances are a small factor above that.
BASELINE_TOLERANCE = 0.0005
PLAN_TOLERANCE = 0.003
# Plans measured further off than PLAN_TOLERANCE, by (model spec, plan kind):
# each is held to its own measured |error| (plus a little), so it fails if it
# gets worse. "module" is the 70% module plan, "sac" the 70% op-level plan.
PLAN_EXCEPTIONS = {
    # act_cnn (conv-bn blocks with in-place ReLU6 / Hardswish / SiLU): the
    # module plan is predicted below the measured step, -0.312% on both torch
    # 2.14.1 and 2.15.0, not yet explained (plain checkpoint() keeps each
    # wrapped module's CPU RNG state, 5,056 B, which memplan does not count).
    # Its sac plan measures -0.000% since policy modules without random ops
    # skip that state.
    ("models:act_cnn", "module"): 0.0035,
}
# The sum of the op times export(times=True) measures (each op's least wall
# time of 3 runs), against the eager step's CPU time (least of 5, one
# thread): x0.86-x1.15 for gpt_small on a machine loaded 9 deep on 2 cores
# (once x1.83, the ops slowed too), where the same sum is x0.23-x0.29 of the
# eager step's median wall time (x0.68 with the machine quiet): wall time
# counts the waits for a core.
OP_TIME_BAND = (0.5, 2.0)
TIMEOUT = 600  # s for each subprocess: a hung export or planner fails the test


def plan_tolerance(spec, kind):
    return PLAN_EXCEPTIONS.get((spec, kind), PLAN_TOLERANCE)


def pct(x):
    return f"{100 * x:g}%"

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"FAIL: {e}; install python3-torch and python3-torchvision "
          "(scripts/install-deps.sh --test)")
    sys.exit(1)
sys.path.insert(0, EXPORTER)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [EXPORTER, os.environ.get("PYTHONPATH")]))  # for `python -m memplan`
sys.path.insert(0, os.path.join(ROOT, "tests"))
import memplan.torch as mt  # noqa: E402
from checks import Checks  # noqa: E402

# (model, batch, per-sample input shape, module depth for plans or None)
CASES = [
    ("models:cnn_small", 8, None, None),
    ("models:res_cnn", 4, None, 2),
    ("models:gpt_small", 4, None, 2),
    ("torchvision:shufflenet_v2_x1_0", 2, (3, 224, 224), 2),
    ("models:inplace_shift", 512, None, None),
    ("models:act_cnn", 2, None, 2),
]
# transformers models (torch 2.x venv only: Debian has no transformers): tied
# embeddings (gpt2), SDPA's CPU flash kernel, RMSNorm, SwiGLU, RoPE (llama).
HF_CASES = [
    ("hf:gpt2:n_layer=2,n_embd=128,n_head=4,vocab_size=1000,n_positions=128,seq=64", 2, None,
     None),
    ("hf:llama:hidden_size=128,intermediate_size=344,num_hidden_layers=2,num_attention_heads=4,"
     "num_key_value_heads=2,vocab_size=1000,seq=64", 2, None, None),
]


def memplan(binary, *args, ok=(0,)):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode not in ok:
        raise RuntimeError(f"memplan {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def eager_step_cpu_us(model, inputs, target, repeats=5):
    """The least CPU time (us) of `repeats` eager training steps on one
    intra-op thread, after one warm-up step, as mt.step_seconds runs them."""
    torch.set_num_threads(1)
    best = None
    for i in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        t = time.process_time()
        mt.step_loss(model, inputs, target).backward()
        dt = time.process_time() - t
        if i:
            best = dt if best is None else min(best, dt)
    return 1e6 * best


def fresh(spec, batch, shape):
    model = mt.load_model(spec)
    inputs = mt.example_inputs(model, batch, shape)
    return model, inputs, mt.make_target(model, inputs)


def err(pred, meas):
    return (pred - meas) / meas


def check_graph(check, name, graph, stats):
    tensors = {t["id"]: t for t in graph["tensors"]}
    params = [t for t in tensors.values() if t["kind"] == "parameter"]
    grads = {t["grad_of"] for t in tensors.values() if "grad_of" in t}
    check(f"{name}: every parameter has a gradient (grad_of)",
          grads == {p["id"] for p in params}, f"{len(grads)} of {len(params)}")
    check(f"{name}: every op has a scope", all("scope" in o for o in graph["ops"]))
    check(f"{name}: no self-check errors", not mt.validate(graph))
    convs = [o for o in graph["ops"] if o["type"] == "aten.convolution.default"]
    check(f"{name}: convolutions carry flops", all(o.get("flops", 0) > 0 for o in convs))
    # Forward ops whose output is a view but not a view op: eager's in-place
    # ops (batch norm's running statistics, views of buffers, aside).
    inplace = [o for o in graph["ops"] if o["phase"] == "forward" and any(
        "alias_of" in tensors[t] and tensors[tensors[t]["alias_of"]]["kind"] != "buffer" and not o["type"].startswith(("aten.view", "aten.t.", "aten.detach",
                                                                 "aten._reshape", "aten.transpose",
                                                                 "aten.slice", "aten.split",
                                                                 "aten.expand", "aten.permute",
                                                                 "aten.unsqueeze", "aten.squeeze",
                                                                 "aten.select", "aten._unsafe_view",
                                                                 "aten.alias"))
        for t in o["outputs"])]
    return inplace


def _structure(g):
    return ([(t["id"], t["shape"], t["dtype"], t.get("kind"), t.get("alias_of"),
              t.get("grad_of")) for t in g["tensors"]],
            [(o["id"], o["type"], o["inputs"], o["outputs"], o["phase"], o.get("scope"),
              o.get("workspace_bytes")) for o in g["ops"]])


def meta_checks(check):
    """export on the meta device (no weights, no step run) writes the graph a
    CPU export writes, scratch rules included."""
    for spec in ["models:gpt_small", "models:act_cnn", HF_CASES[1][0]]:
        try:
            model = mt.load_model(spec)
            inputs = mt.example_inputs(model, 2)
            cpu = mt.export(model, inputs, mt.make_target(model, inputs))
            model = mt.load_model(spec, device="meta")
            inputs = mt.example_inputs(model, 2)
            meta = mt.export(model, inputs, mt.make_target(model, inputs))
            a, b = _structure(cpu), _structure(meta)
            diff = next((f"{x} vs {y}" for k in (0, 1) for x, y in zip(a[k], b[k]) if x != y),
                        f"{len(a[1])} vs {len(b[1])} ops")
            check(f"{spec.split(',')[0]}: the meta export is the CPU export", a == b,
                  "" if a == b else diff[:400])
        except Exception as ex:  # noqa: BLE001 - report and count
            check(f"{spec.split(',')[0]}: meta export ran", False, f"{type(ex).__name__}: {ex}")


def parallel_symbolic_checks(check, tmp):
    """The CLI's symbolic export on the meta device traces its sizes in
    forked processes: the same file as one after another. In a process that
    ran a backward before (autograd's threads do not survive a fork), the
    API falls back to one after another, with a warning."""
    import warnings

    from memplan.torch import _export
    spec = "models:gpt_small"
    try:
        model = mt.load_model(spec, device="meta")
        check(f"{spec} on meta: the CLI traces in parallel (this machine's "
              f"{os.cpu_count()} CPUs)", _export.parallel_jobs(model, {}) == (os.cpu_count() or 1))
        check(f"{spec} on the CPU: the CLI traces in its own process",
              _export.parallel_jobs(mt.load_model(spec), {}) == 1)
        files = {}
        for jobs in ("1", "3"):
            files[jobs] = os.path.join(tmp, f"gpt_meta_jobs{jobs}.json")
            p = subprocess.run([sys.executable, "-m", "memplan", "export", spec, "--batch", "2",
                                "--device", "meta", "-q", "-o", files[jobs]],
                               capture_output=True, text=True, timeout=TIMEOUT,
                               env={**os.environ, "MEMPLAN_EXPORT_JOBS": jobs})
            check(f"{spec} --device meta, MEMPLAN_EXPORT_JOBS={jobs}: exits 0",
                  p.returncode == 0, p.stderr[-500:])
        same = all(os.path.exists(f) for f in files.values()) and \
            open(files["1"]).read() == open(files["3"]).read()
        check(f"{spec}: the symbolic export in 3 processes is byte-identical to one", same)
        model = mt.load_model(spec)  # this process has run backwards: fork refused
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            one = mt.export_symbolic(model, 2, name=spec)
            many = mt.export_symbolic(model, 2, name=spec, jobs=3)
        check(f"{spec}: after a backward, jobs=3 falls back to one process, same graph",
              json.dumps(one, sort_keys=True) == json.dumps(many, sort_keys=True))
        check("... and says so", any("one after another" in str(w.message) for w in caught),
              str([str(w.message) for w in caught])[:300])
    except Exception as ex:  # noqa: BLE001 - report and count
        check(f"{spec}: parallel symbolic export ran", False, f"{type(ex).__name__}: {ex}")


def symbolic_checks(check, binary, tmp):
    """Symbolic export (the CLI's default): one export at batch 2, analyzed at
    other sizes with --set, against eager steps measured at those sizes."""
    cases = [("models:res_cnn", [{"batch": 8}]),
             ("models:gpt_small", [{"batch": 8}, {"batch": 8, "seq": 32}])]
    for spec, sizes in cases:
        try:
            symbolic_case(check, binary, tmp, spec, sizes)
        except Exception as ex:  # noqa: BLE001 - report and count
            check(f"{spec}: symbolic export ran", False, f"{type(ex).__name__}: {ex}")
    p = subprocess.run([sys.executable, "-m", "memplan", "export",
                        "torchvision:no_such_net", "--batch", "2", "-o", os.path.join(tmp, "x")],
                       capture_output=True, text=True, timeout=TIMEOUT)
    check("a model that cannot be built: exit 2 naming it",
          p.returncode == 2 and p.stderr.strip().endswith(
              "memplan export: torchvision:no_such_net: ValueError: torchvision.models has no "
              "no_such_net"), f"{p.returncode} {p.stderr[-300:]!r}")


def symbolic_case(check, binary, tmp, spec, sizes):
    out = os.path.join(tmp, spec.replace(":", "_") + ".sym.json")
    p = subprocess.run([sys.executable, "-m", "memplan", "export",
                        spec, "--batch", "2", "-o", out], capture_output=True, text=True,
                       timeout=TIMEOUT)
    if not check(f"{spec}: symbolic export exits 0", p.returncode == 0,
                 "" if p.returncode == 0 else p.stderr[-800:]):
        return
    g = json.load(open(out))
    x = next(t for t in g["tensors"] if t["id"] == "x")
    seq = "seq" in g["symbols"]
    check(f"{spec}: symbols and the input's shape",
          g["symbols"].get("batch") == 2 and x["shape"][0] == "batch"
          and (not seq or (x["shape"] == ["batch", "seq"] and g["symbols"]["seq"] == 64)),
          f"{g['symbols']} {x['shape']}")
    for size in sizes:
        sets = [a for k, v in size.items() for a in ("--set", f"{k}={v}")]
        rep = os.path.join(tmp, "sym.rep.json")
        memplan(binary, "analyze", out, "--json", rep, "-q", *sets)
        pred = json.load(open(rep))["peak_bytes"]
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, size["batch"], seq=size.get("seq"))
        meas = mt.measure(model, inputs, mt.make_target(model, inputs))["peak_bytes"]
        e = err(pred, meas)
        check(f"{spec} exported at batch 2, --set {size}: within {pct(BASELINE_TOLERANCE)} of the "
              "measured step",
              abs(e) <= BASELINE_TOLERANCE,
              f"predicted {pred} B, measured {meas} B, error {100 * e:+.3f}%")
    if spec == "models:res_cnn":
        rep = os.path.join(tmp, "sym.mb.json")
        p = memplan(binary, "plan", out, "--budget", str(int(pred * 0.5)), "--global-batch",
                    "16", "--json", rep, "-q", ok=(0, 1, 3))
        mb = json.load(open(rep))
        check(f"{spec}: plan --global-batch 16 on the export picks a micro-batch",
              p.returncode == 0 and mb.get("batch_symbol") == "batch",
              f"exit {p.returncode}: {p.stderr[-300:]}")
        p = memplan(binary, "check", out, "--set", "batch=8", "--budget", str(int(meas * 1.01)),
                    "-q", ok=(0, 1))
        check(f"{spec}: check --set batch=8 with 1% headroom passes", p.returncode == 0,
              p.stdout[-300:] + p.stderr[-300:])


def timed_sac_checks(check, binary, name, stem, spec, batch, shape, depth, baseline_pred):
    """export(times=True) measures each op's time_us; with them, `plan
    --granularity sac --device cpu` charges SAC's dispatch per forward op of
    each module with a policy: free, it gives modules policies; dear, it
    wraps whole modules plainly (no sac regions), which apply_plan runs in
    plain checkpoint() and which fit as predicted."""
    # Timings on a shared machine: up to 3 tries (a new export each) to land in
    # the band; a sum that is really off misses every time.
    tries = []
    for _ in range(3):
        model, inputs, target = fresh(spec, batch, shape)
        graph = mt.export(model, inputs, target, name=spec, workspace="measure", times=True)
        traced = [o for o in graph["ops"] if not o["id"].endswith(".seed")]
        total_us = sum(o.get("time_us", 0) for o in traced)
        eager_us = eager_step_cpu_us(model, inputs, target)
        tries.append((total_us / eager_us, total_us, eager_us))
        if OP_TIME_BAND[0] <= tries[-1][0] <= OP_TIME_BAND[1]:
            break
    wall_us = 1e6 * mt.step_seconds(model, inputs, target)
    check(f"{name}: times=True gives every traced op a time_us, summing to x{OP_TIME_BAND[0]:g} "
          f"to x{OP_TIME_BAND[1]:g} of the eager step's CPU time (x{tries[-1][0]:.2f})",
          all(o.get("time_us", -1) >= 0 for o in traced)
          and OP_TIME_BAND[0] <= tries[-1][0] <= OP_TIME_BAND[1],
          f"{sum('time_us' not in o for o in traced)} ops without; tries "
          + ", ".join(f"x{r:.2f} ({t:.0f} us of ops, {e:.0f} us CPU)" for r, t, e in tries)
          + f"; the last step {wall_us:.0f} us wall (median of 3)")
    with open(stem + ".timed.json", "w") as f:
        f.write(mt.dumps(graph))
    budget = str(int(baseline_pred * 0.7))
    reps = {}
    for us in ("0", "1000000"):
        out, rep = stem + f".timed.sac{us}.json", stem + f".timed.sac{us}.rep.json"
        p = memplan(binary, "plan", stem + ".timed.json", "--budget", budget, "--granularity",
                    "sac", "--module-depth", str(depth), "--device", "cpu", "--sac-dispatch-us",
                    us, "-o", out, "--json", rep, "-q")
        reps[us] = (json.load(open(rep)), json.load(open(out)), out)
    free, dear = reps["0"][0], reps["1000000"][0]
    check(f"{name}: free SAC dispatch: modules with policies",
          free["feasible"] and free["policy_modules"] and free["sac_dispatch_cost"] == 0,
          json.dumps(free["policy_modules"]))
    plan = reps["1000000"][1]
    check(f"{name}: dear SAC dispatch: whole modules, wrapped plainly",
          dear["feasible"] and dear["modules"] and dear["policy_modules"] == []
          and "sac" not in plan and dear["predicted"]["recompute_cost"]
          > free["predicted"]["recompute_cost"], json.dumps(dear["modules"]))
    model, inputs, target = fresh(spec, batch, shape)
    pm = mt.measure(model, inputs, target, plan=reps["1000000"][2])
    pe = err(plan["predicted"]["peak_bytes"], pm["peak_bytes"])
    tol = plan_tolerance(spec, "timed sac")
    check(f"{name}: the plain-wrapped sac plan runs in checkpoint() within {pct(tol)} of its "
          "prediction", pm["checkpointed_modules"] == dear["modules"] and abs(pe) <= tol,
          f"wrapped {pm['checkpointed_modules']}; predicted {plan['predicted']['peak_bytes']} B, "
          f"measured {pm['peak_bytes']} B, error {100 * pe:+.3f}%")


def sac_plan_checks(check, binary, name, stem, spec, batch, shape, depth, baseline_pred,
                    baseline_meas, module_plan):
    """An op-level plan at the module plan's budget (70%, `plan --granularity
    sac`), applied through selective activation checkpointing: it fits, its
    policies (where a module keeps some ops; the others are wrapped plainly)
    save and recompute, it lowers the measured peak, and the measured peak
    is within 0.3% of the prediction (or its PLAN_EXCEPTIONS bound). Returns
    whether it had policies."""
    budget = module_plan["budget_bytes"]
    p = memplan(binary, "plan", stem + ".json", "--budget", str(budget), "--granularity", "sac",
                "--module-depth", str(depth), "-o", stem + ".sac.json", "-q", ok=(0, 3))
    plan = json.load(open(stem + ".sac.json"))
    policies = [o["policy"] for r in plan.get("sac", []) for o in r["ops"]]
    check(f"{name}: 70% sac plan fits, wraps modules, its policies save and recompute",
          p.returncode == 0 and plan["feasible"] and plan.get("modules")
          and set(r["module"] for r in plan.get("sac", [])) <= set(plan["modules"])
          and (not policies or ("save" in policies and "recompute" in policies)),
          f"exit {p.returncode}, modules {plan.get('modules')}")
    model, inputs, target = fresh(spec, batch, shape)
    pm = mt.measure(model, inputs, target, plan=stem + ".sac.json")
    pe = err(plan["predicted"]["peak_bytes"], pm["peak_bytes"])
    check(f"{name}: sac plan lowers the measured peak",
          pm["peak_bytes"] < baseline_meas, f"{baseline_meas} B -> {pm['peak_bytes']} B")
    tol = plan_tolerance(spec, "sac")
    check(f"{name}: sac planned peak within {pct(tol)} of the plan's prediction",
          abs(pe) <= tol,
          f"predicted {plan['predicted']['peak_bytes']} B, measured {pm['peak_bytes']} B, "
          f"error {100 * pe:+.3f}%")
    if not policies:
        return False
    # A policy that does not match eager's ops is an error naming both.
    bad = json.load(open(stem + ".sac.json"))
    first = bad["sac"][0]
    compute = [o for o in first["ops"] if not mt._apply._is_shape_op(o["type"], mt._apply._resolve(o["type"]))]
    compute[0]["type"] = "aten.cosh.default"
    model, inputs, target = fresh(spec, batch, shape)
    mt.apply_plan(model, bad)
    try:
        mt.step_loss(model, inputs, target).backward()
        check(f"{name}: a sac policy that does not match eager's ops is an error", False)
    except mt.PlanError as e:
        check(f"{name}: a sac policy that does not match eager's ops is an error",
              str(e).startswith(f"plan module {first['module']!r}: eager op #0 is ")
              and "the plan expects cosh (plan op " in str(e), str(e))
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--require-torch", help="fail unless torch's version starts with this")
    args = ap.parse_args()
    check = Checks()
    if args.require_torch:
        check(f"torch {torch.__version__} is {args.require_torch}",
              torch.__version__.startswith(args.require_torch))
    with_policies = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec, batch, shape, depth in CASES + (HF_CASES if mt.TORCH2 else []):
            name = f"{spec} batch {batch}"
            stem = os.path.join(tmp, spec.replace(":", "_"))
            try:
                model, inputs, target = fresh(spec, batch, shape)
                graph, stats = mt.export(model, inputs, target, name=spec, with_stats=True,
                                         workspace="measure")
                with open(stem + ".json", "w") as f:
                    f.write(mt.dumps(graph))
                inplace = check_graph(check, name, graph, stats)
                memplan(args.memplan, "analyze", stem + ".json", "--json", stem + ".rep.json", "-q")
                rep = json.load(open(stem + ".rep.json"))
                meas = mt.measure(model, inputs, target)
                e = err(rep["peak_bytes"], meas["peak_bytes"])
                check(f"{name}: baseline within {pct(BASELINE_TOLERANCE)}",
                      abs(e) <= BASELINE_TOLERANCE and
                      rep["graph"]["style"] == "joint",
                      f"predicted {rep['peak_bytes']} B, measured {meas['peak_bytes']} B, "
                      f"error {100 * e:+.3f}%")
                if spec == "models:res_cnn":
                    check(f"{name}: eager in-place ops recorded as views",
                          stats["inplace_ops"].get("aten.relu_.default", 0) >= 7
                          and stats["inplace_ops"].get("aten.add_.Tensor", 0) == 3
                          and len(inplace) == 10, json.dumps(stats["inplace_ops"]))
                if spec == "models:act_cnn":
                    # Eager saves a clone of the input of hardtanh_/hardswish_/silu_ when
                    # the activation runs: a forward tensor, recomputed with its module
                    # under checkpoint (in the backward, it made the plan +48% high).
                    ops = graph["ops"]
                    fw_clones = [o for o in ops if o["phase"] == "forward"
                                 and o["type"] == "aten.clone.default"]
                    bw_clones = [o for o in ops if o["phase"] == "backward"
                                 and o["type"] == "aten.clone.default"]
                    # torch 1.13's partitioner puts them in the backward (the exporter
                    # hoists them); 2.x traces them in the forward.
                    check(f"{name}: in-place activations' saved clones are forward ops",
                          stats["inplace_clones_hoisted"] == (0 if mt.TORCH2 else 6)
                          and len(fw_clones) == 6
                          and not bw_clones and all(
                              o["scope"].endswith(".2") for o in fw_clones),
                          f"hoisted {stats['inplace_clones_hoisted']}, "
                          f"backward clones {len(bw_clones)}")
                    check(f"{name}: SiLU's traced derivative is one silu_backward",
                          stats["silu_backward_fused"] == (0 if mt.TORCH2 else 2) and sum(
                              o["type"] == "aten.silu_backward.default" for o in ops) == 2
                          and not any(o["type"] == "aten.sigmoid.default" for o in ops),
                          f"fused {stats['silu_backward_fused']}")
                    # Under the min-cut partitioner the activations rerun in the backward,
                    # their clones with them: nothing moves to the forward.
                    gmc, smc = mt.export(model, inputs, target, name=spec, with_stats=True,
                                         workspace="measure",
                                         partition_fn=mt.min_cut_rematerialization_partition)
                    check(f"{name}: min-cut export keeps recomputed in-place clones backward",
                          not mt.validate(gmc) and smc["inplace_clones_hoisted"] == 0,
                          f"hoisted {smc['inplace_clones_hoisted']}")
                if spec == "models:inplace_shift":
                    # Its eager peak is in the forward, where `h += 1` runs in place.
                    g2 = mt.export(model, inputs, target, name=spec, record_inplace=False,
                                   workspace="measure")
                    with open(stem + ".noinp.json", "w") as f:
                        f.write(mt.dumps(g2))
                    memplan(args.memplan, "analyze", stem + ".noinp.json", "--json",
                            stem + ".noinp.rep.json", "-q")
                    e2 = err(json.load(open(stem + ".noinp.rep.json"))["peak_bytes"],
                             meas["peak_bytes"])
                    check(f"{name}: without in-place recording the prediction is off by > 3%",
                          stats["inplace_ops"].get("aten.add_.Tensor") == 2 and abs(e2) > 0.03,
                          f"error {100 * e2:+.3f}%")
                if depth is None:
                    continue
                budget = int(rep["peak_bytes"] * 0.7)
                memplan(args.memplan, "plan", stem + ".json", "--budget", str(budget),
                        "--granularity", "module", "--module-depth", str(depth),
                        "-o", stem + ".plan.json", "-q")
                plan = json.load(open(stem + ".plan.json"))
                model, inputs, target = fresh(spec, batch, shape)
                pm = mt.measure(model, inputs, target, plan=stem + ".plan.json")
                pe = err(plan["predicted"]["peak_bytes"], pm["peak_bytes"])
                check(f"{name}: 70% module plan fits and wraps modules",
                      plan["feasible"] and plan.get("modules") == pm["checkpointed_modules"]
                      and len(pm["checkpointed_modules"]) > 0,
                      f"modules {pm['checkpointed_modules']}")
                check(f"{name}: plan lowers the measured peak",
                      pm["peak_bytes"] < meas["peak_bytes"],
                      f"{meas['peak_bytes']} B -> {pm['peak_bytes']} B")
                tol = plan_tolerance(spec, "module")
                check(f"{name}: planned peak within {pct(tol)} of the plan's prediction",
                      abs(pe) <= tol,
                      f"predicted {plan['predicted']['peak_bytes']} B, measured "
                      f"{pm['peak_bytes']} B, error {100 * pe:+.3f}%")
                if mt.TORCH2:
                    with_policies += sac_plan_checks(check, args.memplan, name, stem, spec, batch,
                                                     shape, depth, rep["peak_bytes"],
                                                     meas["peak_bytes"], plan)
                if mt.TORCH2 and spec == "models:gpt_small":
                    timed_sac_checks(check, args.memplan, name, stem, spec, batch, shape, depth,
                                     rep["peak_bytes"])
            except Exception as ex:  # noqa: BLE001 - report and count
                check(f"{name}: ran", False, f"{type(ex).__name__}: {ex}")

        if mt.TORCH2:
            check("sac plans with policies on 2 or more models (the others wrap plainly)",
                  with_policies >= 2, f"{with_policies}")
        symbolic_checks(check, args.memplan, tmp)
        if mt.TORCH2:
            meta_checks(check)
            parallel_symbolic_checks(check, tmp)
        # Forward style through the CLI: memplan lowers it itself.
        fwd = os.path.join(tmp, "cnn_fwd.json")
        p = subprocess.run([sys.executable, "-m", "memplan", "export",
                            "models:cnn_small", "--batch", "4", "--style", "forward", "-o", fwd],
                           capture_output=True, text=True, timeout=TIMEOUT)
        check("export --style forward exits 0", p.returncode == 0, p.stderr[-500:])
        if p.returncode == 0:
            g = json.load(open(fwd))
            check("forward style has no backward op",
                  g["ops"] and all(o["phase"] == "forward" for o in g["ops"]))
            memplan(args.memplan, "analyze", fwd, "--json", fwd + ".rep.json", "-q")
            rep = json.load(open(fwd + ".rep.json"))
            check("forward style is lowered by memplan",
                  rep["graph"]["style"] != "joint"
                  and rep["graph"]["joint_ops"] > len(g["ops"]), json.dumps(rep["graph"]))
        # A plan naming a module the model lacks is an error, not a silent no-op.
        try:
            mt.apply_plan(mt.load_model("models:cnn_small"), {"modules": ["nope"]})
            check("apply_plan rejects an unknown module", False)
        except mt.PlanError as e:
            check("apply_plan rejects an unknown module",
                  str(e) == "plan module 'nope' is not a submodule of the model", str(e))
        try:
            mt.apply_plan(mt.load_model("models:cnn_small"),
                          {"saved": [], "recomputed": ["relu"], "steps": []})
            check("apply_plan rejects an op-granularity plan", False)
        except mt.PlanError as e:
            check("apply_plan rejects an op-granularity plan, naming the granularities that work",
                  str(e).startswith("this plan decides per tensor (memplan plan --granularity "
                                    "op)") and "--granularity sac" in str(e), str(e))
        if not mt.TORCH2:
            try:
                mt.apply_plan(mt.load_model("models:cnn_small"),
                              {"modules": ["features"], "sac": [{"module": "features",
                                                                 "ops": []}]})
                check("a sac plan on torch 1.13 is an error", False)
            except mt.PlanError as e:
                check("a sac plan on torch 1.13 is an error",
                      str(e).startswith("a sac plan needs torch 2.x"), str(e))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
