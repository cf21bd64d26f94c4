#!/usr/bin/env python3
"""Real PyTorch training steps on the GPU against memplan's predictions (the
PyTorch phase of profiler/gpu_check.sh).

Per model, in a subprocess of its own (timeout): export the step with the
exporter (symbolic: traced on this machine's CPU at batch 2..4, then sized
with `--set batch=B`, so nothing is traced at the GPU batch), `memplan
analyze` for the baseline and `memplan plan --granularity module` at 70% of
it, then run the eager step on the device, baseline and with the plan's
modules checkpointed, and read torch.cuda's allocator statistics.

Measured, comparable with memplan's allocation-level prediction:
    resident (parameters, buffers, inputs) + max_memory_allocated() - allocated
    before the step (after one warm-up step: cuBLAS's workspace and other
    lasting allocations of the warm-up are not part of the step).
Also recorded: max_memory_reserved(), the raw max_memory_allocated(),
device memory in use (mem_get_info), the error against each.

Compiled steps (rows named compile:BACKEND:MODEL): the step exported as
torch.compile(model, backend=BACKEND) runs it (mt.export(compile=...),
traced on this machine's CPU at the GPU batch, target_device cuda), against
the same compiled step on the device (the warm-up step compiles).

The step holds the model's output until its backward has run, as export's
default (hold_outputs=True) assumes.

Writes OUT/torch_gpu_check.json (memplan.torch_gpu_check/1: {"rows": [...]})
after every model, so a deadline still leaves the rows done so far.

Usage: torch_gpu_check.py --memplan BIN --out DIR [--device cuda|cpu]
                          [--deadline-s N] [--quick] [--models a,b]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(os.path.dirname(HERE), "python")
FORMAT = "memplan.torch_gpu_check/1"
# (model, GPU batch). Small enough for seconds per step on an H200, large
# enough that activations dominate.
MODELS = [("models:gpt_small", 64), ("models:res_cnn", 256), ("models:act_cnn", 64),
          ("resnet18", 128), ("resnet50", 64), ("mobilenet_v2", 64), ("vit_b_16", 32),
          ("densenet121", 32)]
# (backend:model, batch): compiled steps, exported unsymbolically at this batch.
COMPILE_ROWS = [("compile:aot_eager:models:gpt_small", 16), ("compile:aot_eager:resnet18", 32),
                ("compile:inductor:models:gpt_small", 16)]
QUICK_BATCH = 4
PLAN_FRACTION = 0.7


def spec_of(name):
    return name if ":" in name else "torchvision:" + name


def memplan(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"memplan {' '.join(args)}: exit {p.returncode}: {p.stderr[-400:]}")
    return p


def measure_device(mt, torch, spec, batch, device, plan=None, compile=None):
    """The eager step (or torch.compile(model, backend=compile)'s) on `device`
    after one warm-up step, the output held through the backward; allocator
    figures."""
    from memplan.torch._spec import forward_and_loss
    model = mt.load_model(spec).to(device)
    inputs = tuple(x.to(device) for x in mt.example_inputs(model, batch))
    target = mt.make_target(model, inputs).to(device)
    wrapped = mt.apply_plan(model, plan) if plan is not None else []
    resident = sum(t.numel() * t.element_size() for t in
                   list(model.parameters()) + list(model.buffers()) + list(inputs) + [target])

    run = model if compile is None else torch.compile(model, backend=compile)

    def step():
        model.zero_grad(set_to_none=True)
        out, loss = forward_and_loss(run, inputs, target)
        loss.backward()
        del out, loss

    torch.manual_seed(mt.SEED + 3)
    step()
    model.zero_grad(set_to_none=True)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        free_before, total = torch.cuda.mem_get_info()
    t0 = time.perf_counter()
    step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    out = {"resident_bytes": resident, "checkpointed_modules": wrapped, "step_seconds": seconds}
    if cuda:
        peak = torch.cuda.max_memory_allocated()
        free_after, _ = torch.cuda.mem_get_info()
        out.update({
            "allocated_before_step": before,
            "max_memory_allocated": peak,
            "max_memory_reserved": torch.cuda.max_memory_reserved(),
            "device_used_before_step": total - free_before,
            "device_used_after_step": total - free_after,
            "measured_peak_bytes": resident + peak - before,
        })
    else:  # the CPU dry run: the exporter's own profiler measurement
        m = mt.measure(mt.load_model(spec), mt.example_inputs(model, batch), plan=plan,
                       compile=compile)
        out["measured_peak_bytes"] = m["peak_bytes"]
    del model, inputs, target
    if cuda:
        torch.cuda.empty_cache()
    return out


def one_compiled(args, mt, torch, row):
    """A compiled step's row: export(compile=backend) at the batch, analyze,
    the compiled step on the device."""
    _, backend, spec = args.one.split(":", 2)
    spec = spec_of(spec)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "g.json")
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, args.batch)
        target = mt.make_target(model, inputs)
        cuda = args.device.startswith("cuda")
        g = mt.export(model, inputs, target, name=args.one, compile=backend,
                      target_device="cuda" if cuda else "cpu")
        with open(graph, "w") as f:
            f.write(mt.dumps(g))
        row["export_seconds"] = round(time.time() - t0, 2)
        rep = os.path.join(tmp, "r.json")
        memplan(args.memplan, "analyze", graph, "--json", rep, "-q")
        predicted = json.load(open(rep))["peak_bytes"]
    row["predicted_peak_bytes"] = predicted
    base = measure_device(mt, torch, spec, args.batch, args.device, compile=backend)
    row["baseline"] = base
    row["error"] = None
    row["relative_error"] = (predicted - base["measured_peak_bytes"]) / base["measured_peak_bytes"]
    if "max_memory_reserved" in base:
        row["relative_error_vs_reserved"] = (predicted - base["max_memory_reserved"]) / \
            base["max_memory_reserved"]
    row["seconds"] = round(time.time() - t0, 2)
    print(json.dumps(row))
    return 0


def one_model(args):
    """Runs in the child: one row as JSON on stdout's last line."""
    sys.path.insert(0, EXPORTER)
    import torch
    import memplan.torch as mt
    row = {"model": args.one, "batch": args.batch, "device": args.device,
           "torch": torch.__version__}
    if args.one.startswith("compile:"):
        return one_compiled(args, mt, torch, row)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "g.json")
        model = mt.load_model(spec_of(args.one))
        target = "cuda" if args.device.startswith("cuda") else "cpu"
        g, stats = mt.export_symbolic(model, 2, name=args.one, target_device=target)
        with open(graph, "w") as f:
            f.write(mt.dumps(g))
        row["export_seconds"] = round(time.time() - t0, 2)
        row["symbols"] = stats.get("symbols")
        sets = ["--set", f"batch={args.batch}"]
        rep = os.path.join(tmp, "r.json")
        memplan(args.memplan, "analyze", graph, "--json", rep, "-q", *sets)
        predicted = json.load(open(rep))["peak_bytes"]
        row["predicted_peak_bytes"] = predicted
        base = measure_device(mt, torch, spec_of(args.one), args.batch, args.device)
        row["baseline"] = base
        row["error"] = None
        row["relative_error"] = (predicted - base["measured_peak_bytes"]) / base["measured_peak_bytes"]
        if "max_memory_reserved" in base:
            row["relative_error_vs_reserved"] = (predicted - base["max_memory_reserved"]) / \
                base["max_memory_reserved"]
        plan_path = os.path.join(tmp, "plan.json")
        budget = int(predicted * PLAN_FRACTION)
        p = subprocess.run([args.memplan, "plan", graph, *sets, "--budget", str(budget),
                            "--granularity", "module", "-o", plan_path, "-q"],
                           capture_output=True, text=True, timeout=300)
        if p.returncode == 0:
            plan = json.load(open(plan_path))
            pm = measure_device(mt, torch, spec_of(args.one), args.batch, args.device,
                                plan=plan_path)
            row["plan70"] = {"budget_bytes": budget,
                             "predicted_peak_bytes": plan["predicted"]["peak_bytes"],
                             "modules": len(plan.get("modules", [])), **pm,
                             "relative_error": (plan["predicted"]["peak_bytes"]
                                                - pm["measured_peak_bytes"])
                             / pm["measured_peak_bytes"]}
        else:
            row["plan70"] = {"budget_bytes": budget, "exit": p.returncode,
                             "error": p.stderr[-300:]}
    row["seconds"] = round(time.time() - t0, 2)
    print(json.dumps(row))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline-s", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help=f"batch {QUICK_BATCH} (the CPU dry run)")
    ap.add_argument("--models", help="comma-separated names (default: the built-in list)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one_model(args)

    start = time.time()
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, "torch_gpu_check.json")
    batches = dict(MODELS + COMPILE_ROWS)
    # Compiled rows after the first three eager ones: the deadline cuts the
    # last of the eager list first.
    default = [m for m, _ in MODELS[:3]] + [m for m, _ in COMPILE_ROWS] + \
        [m for m, _ in MODELS[3:]]
    names = args.models.split(",") if args.models else default
    doc = {"format": FORMAT, "device": args.device, "quick": args.quick, "rows": [],
           "method": "measured = resident + max_memory_allocated - allocated before the step, "
                     "after one warm-up step; prediction: memplan analyze --set batch=B of a "
                     "symbolic export traced on the CPU at batch 2..4"}

    def write():
        doc["seconds"] = round(time.time() - start, 1)
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, out_path)

    write()
    failed = 0
    for name in names:
        left = args.deadline_s - (time.time() - start) - 5
        if left < 20:
            doc["rows"].append({"model": name, "error": "skipped: deadline"})
            write()
            continue
        batch = QUICK_BATCH if args.quick else batches.get(name, 32)
        cmd = [sys.executable, os.path.abspath(__file__), "--memplan", args.memplan,
               "--out", args.out, "--device", args.device, "--one", name, "--batch", str(batch)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode == 0 and lines:
                row = json.loads(lines[-1])
            else:
                row = {"model": name, "batch": batch,
                       "error": f"exit {p.returncode}: {p.stderr[-600:]}"}
        except subprocess.TimeoutExpired:
            row = {"model": name, "batch": batch, "error": f"timeout after {left:.0f} s"}
        failed += bool(row.get("error"))
        doc["rows"].append(row)
        write()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
