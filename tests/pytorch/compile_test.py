#!/usr/bin/env python3
"""torch.compile steps (issue 33): export(compile=...) and estimate(compile=...)
against compiled CPU steps measured with torch.profiler (memplan.torch.measure
(compile=...): a fresh torch.compile of a fresh model, nothing from the
export), and compile_options() plans applied to torch.compile and measured.

    compile_test.py --memplan build/cli/memplan [--quick] [--require-torch VERSION]

--quick (the oldest torch): the aot_eager predictions and one plan only.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import types
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import torch  # noqa: E402
import torch._functorch.config  # noqa: E402
import torch._inductor.config  # noqa: E402

import memplan.torch as mt  # noqa: E402
from checks import Checks  # noqa: E402

# aot_eager: measured within 4 bytes on every model here (bench/results/
# compile_predict.md: within 0.0002% on the bench's seven); a 50x margin.
AOT_TOLERANCE = 1e-4
# inductor: its fusion and layout changes are not modelled; measured -19% to
# +9% on the bench's models (docs/compile.md), +8.8% on gpt_small.
INDUCTOR_TOLERANCE = 0.10
HF_TINY = "hf:gpt2:n_layer=2,n_embd=64,n_head=2,vocab_size=1000,n_positions=64,seq=32"


def rel(a, b):
    return (a - b) / b


def setup(spec, batch, shape=None):
    torch.manual_seed(0)
    model = mt.load_model(spec)
    inputs = mt.example_inputs(model, batch, shape)
    return model, inputs, mt.make_target(model, inputs)


def measured(spec, inputs, target, backend, held, config=None):
    torch._dynamo.reset()
    with torch._functorch.config.patch(**(config or {})):
        return mt.measure(mt.load_model(spec), inputs, target, hold_outputs=held,
                          compile=backend)["peak_bytes"]


def prediction_checks(check, backend, cases, tolerance):
    for spec, batch, shape in cases:
        model, inputs, target = setup(spec, batch, shape)
        for held in (True, False):
            est = mt.estimate(model, inputs, target=target, compile=backend, hold_outputs=held)
            got = measured(spec, inputs, target, backend, held)
            e = rel(est.peak_bytes, got)
            check(f"{backend} {spec} batch {batch}, output {'held' if held else 'dropped'}: "
                  f"predicted within {100 * tolerance:g}% of the measured compiled step "
                  f"({100 * e:+.4f}%)", abs(e) <= tolerance, f"{est.peak_bytes} vs {got}")
            check(f"{backend} {spec}: the report says the step is compiled",
                  est.report["graph"].get("compile") == backend, est.report["graph"])


def plan_checks(check, quick):
    spec, batch = "models:gpt_small", 8
    model, inputs, target = setup(spec, batch)
    default = mt.estimate(model, inputs, target=target, compile="aot_eager",
                          hold_outputs=False).peak_bytes
    budgets = [default + 1, int(default * 0.75)] if quick else \
        [default + 1, int(default * 0.75), int(default * 0.6), int(default * 0.3)]
    peaks = []
    for budget in budgets:
        opts = mt.compile_options(model, inputs, budget, backend="aot_eager", target=target,
                                  hold_outputs=False)
        got = measured(spec, inputs, target, "aot_eager", False, opts.functorch_config)
        e = rel(opts.peak_bytes, got)
        label = f"compile_options(aot_eager, gpt_small, budget {budget})"
        check(f"{label}: predicted peak of the planned step within 0.01% of its measured "
              f"peak ({100 * e:+.4f}%)", abs(e) <= AOT_TOLERANCE, f"{opts.peak_bytes} vs {got}")
        check(f"{label}: fits == (predicted <= budget)", opts.fits == (opts.peak_bytes <= budget),
              repr(opts))
        if opts.fits:
            check(f"{label}: the measured step fits (strictly)", got <= budget, f"{got} > {budget}")
        peaks.append((budget, opts.peak_bytes, opts.fits, opts))
    first = peaks[0][3]
    check("a budget above torch's own partition: no options, torch's default",
          first.functorch_config == {} and first.fits and first.peak_bytes == default, repr(first))
    check("the predicted peak never rises as the budget falls",
          all(b[1] <= a[1] for a, b in zip(peaks, peaks[1:])), [p[:3] for p in peaks])
    if not quick:
        low = peaks[-1]
        check("30% of the default peak: no point fits; fits False and the options give the "
              "lowest peak found, below the default",
              not low[2] and low[1] < default and low[3].functorch_config, repr(low[3]))
        check("the options' solver plugs into torch's partitioner (a CustomKnapsackSolver)",
              type(low[3].functorch_config["activation_memory_budget_solver"]).__name__ ==
              "MemplanKnapsackSolver")


def batch_norm_plan_checks(check):
    """A model with batch norm: a cut may save a running statistic the forward
    then updates (the capture's identity hooks on saved tensors)."""
    spec = "models:res_cnn"
    model, inputs, target = setup(spec, 8)
    planner = mt.CompilePlanner(model, inputs, backend="aot_eager", target=target,
                                hold_outputs=False)
    opts = planner.options(int(0.9 * planner.default_peak))
    got = measured(spec, inputs, target, "aot_eager", False, opts.functorch_config)
    check(f"CompilePlanner(aot_eager, res_cnn, 90%): the planned step's predicted peak is the "
          f"measured one ({opts.peak_bytes} vs {got})", opts.peak_bytes == got and
          opts.peak_bytes < planner.default_peak, repr(opts))


def inductor_plan_checks(check):
    spec, batch = "models:gpt_small", 8
    model, inputs, target = setup(spec, batch)
    default = measured(spec, inputs, target, "inductor", False)
    opts = mt.compile_options(model, inputs, int(0.6 * opts_default(model, inputs, target)),
                              backend="inductor", target=target, hold_outputs=False)
    got = measured(spec, inputs, target, "inductor", False, opts.functorch_config)
    check(f"compile_options(inductor, 60%): torch.compile runs with the options and the "
          f"measured peak falls ({default} -> {got})", got < default and opts.functorch_config,
          repr(opts))


def opts_default(model, inputs, target):
    return mt.estimate(model, inputs, target=target, compile="inductor",
                       hold_outputs=False).peak_bytes


def raises(fn, kind, text):
    try:
        fn()
    except kind as e:
        return str(e) == text or str(e).startswith(text), str(e)
    except Exception as e:  # noqa: BLE001 - reported as the wrong error
        return False, f"{type(e).__name__}: {e}"
    return False, "no error"


def error_checks(check):
    model, inputs, target = setup("models:gpt_small", 2)
    ok, text = raises(lambda: mt.export(model, inputs, target, compile="tvm"), ValueError,
                      "compile 'tvm': expected one of aot_eager, inductor")
    check("an unknown backend is refused by name", ok, text)
    ok, text = raises(lambda: mt.export(model, inputs, target,
                                        compile_config={"activation_memory_budget": 0.5}),
                      ValueError, "compile_config needs compile= (aot_eager or inductor)")
    check("compile_config without compile is refused", ok, text)
    ok, text = raises(lambda: mt.export(model, inputs, target, compile="aot_eager",
                                        compile_config={"no_such_option": 1}), ValueError,
                      f"compile_config: torch {torch.__version__} has no "
                      "torch._functorch.config.no_such_option")
    check("an unknown torch._functorch.config name is refused", ok, text)
    branchy, x, t = setup("models:data_dependent", 2)
    ok, text = raises(lambda: mt.export(branchy, x, t, compile="aot_eager"), mt.ExportError,
                      "torch.compile breaks this step into 5 graphs (4 graph break(s): "
                      "Unsupported Tensor.item() call with capture_scalar_outputs=False at ")
    check("a step torch.compile breaks into graphs is refused, naming the break", ok, text)
    saved = sys.modules.get("torch._inductor.custom_graph_pass")
    sys.modules["torch._inductor.custom_graph_pass"] = types.ModuleType("stand_in")
    try:
        ok, text = raises(lambda: mt.compile_options(model, inputs, 1), RuntimeError,
                          "compile_options needs torch 2.14 or newer (torch._inductor."
                          "custom_graph_pass.CustomKnapsackSolver); this is torch "
                          f"{torch.__version__}")
    finally:
        sys.modules["torch._inductor.custom_graph_pass"] = saved
    check("without torch's solver hook, compile_options names the torch it needs", ok, text)
    from memplan.torch._compile_plan import make_solver
    solver = make_solver(["addmm"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keep, recompute = solver([1.0], None, 0.0, None, [object()])
    texts = [str(w.message) for w in caught]
    check("a solver that fails keeps torch's own cut for that graph, with a warning naming why",
          keep == [0] and recompute == [] and any(
              t.startswith("memplan's knapsack solver failed (AttributeError: ") and
              t.endswith("this graph keeps what torch's own cut saves") for t in texts), texts)
    check("planned nodes missing from the traced graph are named in a warning",
          "memplan's plan names 1 nodes to recompute; 1 are not candidates in the graph "
          "torch.compile traced (its loss compiled apart from the model?): the peak may "
          "differ from the plan's" in texts, texts)


def cli_checks(check, memplan):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "g.json")
        env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")}
        cmd = [sys.executable, "-m", "memplan", "export", "models:gpt_small", "--batch", "4",
               "--static", "--compile", "aot_eager", "-o", out, "-q"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        check("memplan export --compile aot_eager", p.returncode == 0, p.stderr[-800:])
        p = subprocess.run([memplan, "analyze", out], capture_output=True, text=True)
        check("memplan analyze names the compiled step",
              "compiled  torch.compile, backend aot_eager (source.compile)" in p.stdout,
              p.stdout[:600])
        p = subprocess.run(cmd + ["--partition", "min_cut"],
                           capture_output=True, text=True, env=env)
        check("--partition with --compile is refused (exit 2)", p.returncode == 2 and
              "--partition with --compile: the compiled step uses its backend's partitioner"
              in p.stderr, p.stderr[-400:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--require-torch")
    args = ap.parse_args()
    os.environ["MEMPLAN_BINARY"] = os.path.abspath(args.memplan)
    if args.require_torch and not torch.__version__.startswith(args.require_torch):
        print(f"FAIL expected torch {args.require_torch}, found {torch.__version__}")
        return 1
    torch.set_num_threads(1)
    torch._functorch.config.enable_autograd_cache = False
    torch._inductor.config.fx_graph_cache = False
    torch._inductor.config.compile_threads = 1
    check = Checks()
    print(f"torch {torch.__version__}")
    cases = [("models:gpt_small", 8, None), ("models:res_cnn", 8, None), (HF_TINY, 2, None)]
    prediction_checks(check, "aot_eager", cases[:2] if args.quick else cases, AOT_TOLERANCE)
    plan_checks(check, args.quick)
    if not args.quick:
        prediction_checks(check, "inductor", cases[:1], INDUCTOR_TOLERANCE)
        batch_norm_plan_checks(check)
        inductor_plan_checks(check)
        error_checks(check)
        cli_checks(check, args.memplan)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
