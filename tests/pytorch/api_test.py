#!/usr/bin/env python3
"""memplan.torch.estimate / plan, the Python API for a model in the user's own
script, against measured eager CPU steps (memplan.torch.measure) and the
memplan binary's own reports.

    api_test.py --memplan build/cli/memplan
"""
import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import torch  # noqa: E402

import memplan.torch as mt  # noqa: E402
from checks import Checks  # noqa: E402

# Measured: cnn_small and gpt_small within 4 bytes (0.001%); a 10x margin of 0.01%.
TOLERANCE = 1e-4
OPTIMIZER_ERROR = ("optimizer torch.optim.rmsprop.RMSprop: memplan models torch.optim.SGD "
                   "(with or without momentum), Adam, AdamW")


def rel(predicted, measured):
    return (predicted - measured) / measured


def raises(fn, text):
    try:
        fn()
    except ValueError as e:
        return str(e) == text, str(e)
    return False, "no ValueError"


def optimizer_checks(check):
    params = [torch.nn.Parameter(torch.zeros(2))]
    cases = [(torch.optim.SGD, "sgd"), (torch.optim.SGD(params, lr=0.1), "sgd"),
             (torch.optim.SGD(params, lr=0.1, momentum=0.9), "momentum"),
             (torch.optim.Adam, "adam"), (torch.optim.AdamW(params), "adamw"), (None, "none")]
    got = [mt.optimizer_name(o) for o, _ in cases]
    check("optimizer_name maps SGD (momentum or not), Adam, AdamW, classes and instances",
          got == [n for _, n in cases], got)
    ok, text = raises(lambda: mt.optimizer_name(torch.optim.RMSprop), OPTIMIZER_ERROR)
    check("an unsupported optimizer names what is supported", ok, text)
    ok, text = raises(lambda: mt.optimizer_name(torch.optim.Adam(params, amsgrad=True)),
                      "optimizer Adam(amsgrad=True): memplan models torch.optim.SGD (with or "
                      "without momentum), Adam, AdamW without amsgrad")
    check("Adam with amsgrad is refused by name", ok, text)


def estimate_checks(check, tmp):
    model = mt.load_model("models:cnn_small")
    x = mt.example_inputs(model, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    est = mt.estimate(model, x)
    unchanged = all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    check("estimate leaves the model's state and device as they were",
          unchanged and next(model.parameters()).device.type == "cpu")
    measured = mt.measure(model, x)["peak_bytes"]
    e = rel(est.peak_bytes, measured)
    check(f"estimate(cnn_small) within 0.01% of the measured step ({100 * e:+.5f}%)",
          abs(e) <= TOLERANCE, f"{est.peak_bytes} vs {measured}")
    check("fits(peak) and not fits(peak - 1); a text budget is parsed",
          est.fits(est.peak_bytes) and not est.fits(est.peak_bytes - 1)
          and est.fits("1GiB") and not est.fits("1KiB"))
    check("the CPU budget bounds allocated bytes", est.budget_of == "allocated"
          and est.bounded_bytes() == est.peak_bytes)
    top = est.alive_at_peak(3)
    check("alive_at_peak(3): the three largest, largest first",
          len(top) == 3 and top == sorted(top, key=lambda t: -t["bytes"])
          and top == est.report["live_at_peak"][:3], top)
    adam = mt.estimate(model, x, optimizer=torch.optim.Adam)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    check("optimizer=Adam adds 2x the parameter bytes of optimizer state",
          adam.report["by_category"].get("optimizer_state") == 2 * params,
          adam.report["by_category"])
    h100 = mt.estimate(model, x, device="h100")
    check("device='h100': reserved and the whole device, and the budget bounds the device",
          h100.device_total_bytes is not None and h100.reserved_bytes is not None
          and h100.device_total_bytes > h100.reserved_bytes >= h100.peak_bytes
          and h100.bounded_bytes() == h100.device_total_bytes)
    check("the export for a GPU says so (source.target_device cuda)",
          h100.graph["source"]["target_device"] == "cuda"
          and est.graph["source"]["target_device"] == "cpu")
    if mt.TORCH2:  # torch 1.13 has no device context to build a model on meta
        meta = mt.load_model("models:cnn_small", device="meta")
        on_meta = mt.estimate(meta, x)
        check("a model on meta is traced without data: the CPU model's peak",
              on_meta.peak_bytes == est.peak_bytes, f"{on_meta.peak_bytes} vs {est.peak_bytes}")
    files = {name: os.path.join(tmp, name) for name in
             ("g.json", "trace.json", "page.html", "snap.pickle")}
    est.save_graph(files["g.json"])
    est.save_trace(files["trace.json"])
    est.save_html(files["page.html"])
    est.save_snapshot(files["snap.pickle"])
    trace = json.load(open(files["trace.json"]))
    check("save_graph/trace/html/snapshot write their files",
          json.load(open(files["g.json"]))["format"] == "memplan.graph/1"
          and trace["traceEvents"] and "<html" in open(files["page.html"]).read().lower()
          and os.path.getsize(files["snap.pickle"]) > 0)


def loss_checks(check):
    model = mt.load_model("models:mlp")
    x = mt.example_inputs(model, 8)

    def loss(out):
        return out.square().mean()

    est = mt.estimate(model, x, loss_fn=loss)
    measured = mt.measure(model, x, loss_fn=loss)["peak_bytes"]
    e = rel(est.peak_bytes, measured)
    check(f"loss_fn(output) without a target: within 0.01% ({100 * e:+.5f}%)",
          abs(e) <= TOLERANCE, f"{est.peak_bytes} vs {measured}")


def plan_checks(check):
    model = mt.load_model("models:gpt_small")
    x = mt.example_inputs(model, 4)
    base = mt.measure(model, x)["peak_bytes"]
    plan = mt.plan(model, x, budget=int(0.8 * base))
    check("plan at 80% of the measured peak fits, by modules", plan.fits and plan.modules
          and plan.peak_bytes <= plan.budget_bytes and plan.budget_of == "allocated", repr(plan))
    check("plan overhead is a fraction of the step", 0 < plan.overhead < 1, plan.overhead)
    wrapped = plan.apply(model)
    check("apply wraps the plan's modules", wrapped == plan.modules, wrapped)
    measured = mt.measure(model, x)["peak_bytes"]
    e = rel(plan.peak_bytes, measured)
    check(f"the applied plan's measured step is the predicted peak within 0.3% "
          f"({100 * e:+.4f}%) and under the budget", abs(e) <= 0.003
          and measured <= plan.budget_bytes, f"{plan.peak_bytes} vs {measured}")
    tight = mt.plan(mt.load_model("models:gpt_small"), x, budget=1)
    check("a budget nothing fits: fits False, the lowest peak found, no exception",
          not tight.fits and 0 < tight.peak_bytes <= tight.baseline_peak_bytes, repr(tight))


def error_checks(check):
    model = mt.load_model("models:mlp")
    x = mt.example_inputs(model, 2)
    cases = [
        (lambda: mt.estimate(model, x, device="tpu"),
         "device 'tpu': expected one of cpu, cuda, h100, h200, a100"),
        (lambda: mt.estimate(model, x, world_size=4),
         "world_size 4: needs parallel= (one of ddp, zero1, fsdp)"),
        (lambda: mt.plan(model, x, "12 parsecs"),
         'invalid size "12 parsecs"; expected a number of bytes with an optional unit '
         "(B KB MB GB TB KiB MiB GiB TiB), e.g. 24GiB"),
        (lambda: mt.plan(model, x, "1GiB", granularity="layer"),
         "granularity 'layer': expected one of module, sac, op"),
    ]
    for fn, text in cases:
        ok, got = raises(fn, text)
        check(f"bad argument: {text[:40]}...", ok, got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    os.environ["MEMPLAN_BINARY"] = os.path.abspath(args.memplan)
    check = Checks()
    print(f"torch {torch.__version__}")
    optimizer_checks(check)
    with tempfile.TemporaryDirectory() as tmp:
        estimate_checks(check, tmp)
    loss_checks(check)
    plan_checks(check)
    error_checks(check)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
