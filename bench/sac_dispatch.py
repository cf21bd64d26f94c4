#!/usr/bin/env python3
"""What selective activation checkpointing (SAC) costs by itself on this CPU:
the cpu preset's sac_dispatch_us (analyzer/plan/cost_model.h).

Per model, every block at the plan's module depth is wrapped in
torch.utils.checkpoint with a SAC policy that saves every op (MUST_SAVE), so
nothing is recomputed: what the step gains over eager is SAC's own work (its
dispatch mode runs every forward op of a wrapped module in the forward and
again in the backward's replay of the module). Steps alternate with eager
ones (median of 5, 3 rounds; the median round is kept); the figure is that
time per forward op of the wrapped modules and per pass. One intra-op
thread, as bench/peers.py measures.

Usage: .venv/bin/python bench/sac_dispatch.py [--json bench/results/sac_dispatch.json]
"""
import argparse
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,  # noqa: E402
                                    create_selective_checkpoint_contexts)

import memplan.torch as mt  # noqa: E402
import peers  # noqa: E402  (paired_seconds: steps alternated with eager ones)
import torch_models as tm  # noqa: E402

# name -> (spec, batch, input shape, module depth): bench/peers.py's models.
MODELS = {
    "gpt": ("models:gpt_small", 8, None, 2),
    "hf_gpt2": (tm.HF_GPT2, 2, None, 4),
    "resnet18": ("torchvision:resnet18", 16, (3, 112, 112), 2),
}
CALIBRATION = "gpt"  # the model the preset's figure comes from


def save_everything(model, paths):
    def contexts():
        return create_selective_checkpoint_contexts(
            lambda ctx, func, *a, **k: CheckpointPolicy.MUST_SAVE, allow_cache_entry_mutation=True)
    for path in paths:
        mod = model.get_submodule(path)
        inner = mod.forward
        mod.forward = lambda *a, _inner=inner, **k: checkpoint(
            _inner, *a, use_reentrant=False, context_fn=contexts, **k)


def measure(name):
    spec, batch, shape, depth = MODELS[name]
    torch.manual_seed(0)
    model = mt.load_model(spec)
    inputs = mt.example_inputs(model, batch, shape)
    target = mt.make_target(model, inputs)
    graph = mt.export(model, inputs, target, name=spec)
    modules = sorted({".".join(o["scope"].split(".")[:depth]) for o in graph["ops"]
                      if o["phase"] == "forward" and o["scope"].count(".") >= depth - 1})
    ops = sum(1 for o in graph["ops"] if o["phase"] == "forward" and any(
        o["scope"] == m or o["scope"].startswith(m + ".") for m in modules))
    wrapped = mt.load_model(spec)
    save_everything(wrapped, modules)
    rounds = []
    for _ in range(3):
        peers.paired_seconds(mt, torch, wrapped, model, inputs, target, repeats=1)  # warm-up
        r = peers.paired_seconds(mt, torch, wrapped, model, inputs, target, repeats=5)
        rounds.append((r["step_seconds"], r["eager_step_seconds"]))
    sac, eager = sorted(rounds, key=lambda r: r[0] - r[1])[1]
    return {"model": spec, "batch": batch, "module_depth": depth, "modules": modules,
            "forward_ops": ops, "eager_step_seconds": eager, "sac_step_seconds": sac,
            "us_per_op_and_pass": (sac - eager) * 1e6 / (2 * ops)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=os.path.join(ROOT, "bench", "results", "sac_dispatch.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in MODELS:
        r = measure(name)
        rows.append(r)
        print(f"{name}: {len(r['modules'])} modules, {r['forward_ops']} forward ops: "
              f"eager {r['eager_step_seconds']:.3f} s, all saved under SAC "
              f"{r['sac_step_seconds']:.3f} s: {r['us_per_op_and_pass']:.1f} us per op and pass",
              flush=True)
    doc = {"format": "memplan.bench.sac_dispatch/1",
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}",
           "torch": torch.__version__, "threads": 1, "calibration": CALIBRATION, "rows": rows}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
