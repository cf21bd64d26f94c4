#!/usr/bin/env python3
"""Ground truth for the CUDA caching-allocator model: real PyTorch training
steps on a GPU with the allocator's own event history recorded.

For each model (and each PYTORCH_CUDA_ALLOC_CONF given), in a fresh process:
put the model and a batch on the device, run one warm-up training step and
one measured step (forward, cross-entropy, backward, grads set to None
before), recording torch.cuda.memory's history from before the first
allocation. Writes, per run, the allocator's events of each phase (set-up,
warm-up, measured step: alloc / free / segment events with address, size and
stream), the segments at the end, torch.cuda.memory_stats() after each
phase and cudaMemGetInfo around it all (the device-level view: context and
what lives outside the allocator). The events replayed through
analyzer/alloc's model must give the same segments and the same reserved
bytes.

Usage:
  torch_alloc_trace.py --out DIR [--device cuda|cpu] [--deadline-s S]
                       [--models a,b] [--alloc-confs "default;expandable_segments:True"]
                       [--quick]
Writes DIR/alloc_traces.json (one row per model and configuration, rewritten
after every row) and DIR/traces/CONF__MODEL.json.gz (the events). With
--device cpu (a dry run) the steps run on the CPU and the allocator fields
are null.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORTER = os.path.join(ROOT, "python")
FORMAT = "memplan.alloc_trace/1"

# Model -> batch on an H200 (a few GiB of activations each), and at --quick.
MODELS = {
    "torchvision:resnet18": (128, 2),
    "torchvision:resnet50": (64, 2),
    "torchvision:mobilenet_v2": (64, 2),
    "torchvision:densenet121": (32, 2),
    "torchvision:vit_b_16": (32, 1),
    "models:gpt_small": (1024, 2),
    # Not in the first run's default list: held-out models for the allocator model.
    "torchvision:efficientnet_b0": (64, 2),
    "torchvision:convnext_tiny": (32, 2),
    "torchvision:swin_t": (32, 2),
}
DEFAULT_MODELS = ["torchvision:resnet18", "torchvision:resnet50", "torchvision:mobilenet_v2",
                  "torchvision:densenet121", "torchvision:vit_b_16", "models:gpt_small"]
QUICK_INPUT = (3, 64, 64)  # image models at --quick (vit_b_16 needs 224)
DEFAULT_CONFS = ["default", "expandable_segments:True", "max_split_size_mb:128",
                 "roundup_power2_divisions:4"]
# Configurations after the first run only these models (time).
EXTRA_CONF_MODELS = ["torchvision:resnet50", "torchvision:vit_b_16", "models:gpt_small"]
ACTIONS = {"alloc": "a", "free_requested": "fr", "free_completed": "fc", "segment_alloc": "sa",
           "segment_free": "sf", "segment_map": "sm", "segment_unmap": "su", "snapshot": "s",
           "oom": "o"}
STAT_KEYS = ["allocated_bytes.all.current", "allocated_bytes.all.peak",
             "reserved_bytes.all.current", "reserved_bytes.all.peak",
             "requested_bytes.all.current", "requested_bytes.all.peak",
             "active_bytes.all.peak", "inactive_split_bytes.all.current",
             "segment.all.current", "segment.all.peak", "segment.large_pool.current",
             "segment.small_pool.current", "num_alloc_retries", "num_ooms",
             "oversize_segments.current", "oversize_allocations.current"]


# --------------------------------------------------------------------------
# One run (a child process: the allocator configuration is read once per
# process, at the first CUDA allocation)
# --------------------------------------------------------------------------
def one_run(spec, batch, device, quick):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, EXPORTER)
    import memplan.torch as mt

    cuda = device == "cuda"
    mem = torch.cuda.memory if cuda else None
    row = {"model": spec, "batch": batch, "device": device, "torch": torch.__version__}
    phases = {}
    if cuda:
        torch.cuda.init()
        free0, total = torch.cuda.mem_get_info()
        row["device_total_bytes"] = total
        row["device_used_after_init_bytes"] = total - free0
        row["device_name"] = torch.cuda.get_device_name()
        mem._record_memory_history(enabled="all", context=None, stacks="python",
                                   max_entries=2_000_000)

    def take(phase):
        if not cuda:
            return
        torch.cuda.synchronize()
        snap = mem._snapshot()
        events = []
        for e in snap["device_traces"][0] if snap["device_traces"] else []:
            events.append([ACTIONS.get(e["action"], e["action"]), e["addr"], e["size"],
                           e.get("stream", 0)])
        stats = torch.cuda.memory_stats()
        phases[phase] = {"events": events,
                         "stats": {k: stats.get(k) for k in STAT_KEYS},
                         "used_bytes": total - torch.cuda.mem_get_info()[0]}
        # Start the next phase's history empty.
        mem._record_memory_history(enabled="all", context=None, stacks="python",
                                   max_entries=2_000_000, clear_history=True)

    t0 = time.time()
    model = mt.load_model(spec)
    shape = QUICK_INPUT if quick and spec.startswith("torchvision:") and "vit" not in spec \
        else None
    inputs = mt.example_inputs(model, batch, shape)
    target = mt.make_target(model, inputs)
    model = model.to(device)
    inputs = tuple(x.to(device) for x in inputs)
    target = target.to(device)
    row["resident_bytes"] = sum(t.numel() * t.element_size() for t in
                                list(model.parameters()) + list(model.buffers())
                                + list(inputs) + [target])
    take("setup")

    def step():
        model.zero_grad(set_to_none=True)
        loss = mt.step_loss(model, inputs, target)
        loss.backward()
        del loss

    torch.manual_seed(3)
    step()
    take("warmup")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(3)
    t1 = time.time()
    step()
    if cuda:
        torch.cuda.synchronize()
    row["step_seconds"] = time.time() - t1
    take("step")
    if cuda:
        snap = mem._snapshot()
        row["segments"] = [{"address": s["address"], "total_size": s["total_size"],
                            "allocated_size": s["allocated_size"],
                            "requested_size": s.get("requested_size"),
                            "segment_type": s.get("segment_type"), "stream": s.get("stream"),
                            "blocks": [[b["size"], b.get("requested_size"), b["state"]]
                                       for b in s["blocks"]]}
                           for s in snap["segments"]]
        mem._record_memory_history(enabled=None)
        st = phases["step"]["stats"]
        row.update({"max_allocated_bytes": st["allocated_bytes.all.peak"],
                    "max_reserved_bytes": st["reserved_bytes.all.peak"],
                    "max_requested_bytes": st["requested_bytes.all.peak"],
                    "allocated_before_step_bytes":
                        phases["warmup"]["stats"]["allocated_bytes.all.current"],
                    "reserved_before_step_bytes":
                        phases["warmup"]["stats"]["reserved_bytes.all.current"],
                    "device_used_after_step_bytes": phases["step"]["used_bytes"]})
    row["seconds"] = time.time() - t0
    return row, phases


def child_main(args):
    spec, batch, device, quick, trace_path = args
    try:
        row, phases = one_run(spec, int(batch), device, quick == "1")
    except Exception as e:  # reported, not raised: the parent records it
        import traceback
        print(json.dumps({"model": spec, "error": f"{type(e).__name__}: {e}",
                          "traceback": traceback.format_exc()[-2000:]}))
        return 1
    if phases:
        with gzip.open(trace_path, "wt") as f:
            json.dump({"format": FORMAT, "model": spec, "batch": int(batch),
                       "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                       "action_codes": ACTIONS, "event_fields": ["action", "addr", "size",
                                                                  "stream"],
                       "phases": phases, "segments": row.get("segments")}, f)
        row["trace"] = os.path.basename(trace_path)
        row["events"] = {p: len(v["events"]) for p, v in phases.items()}
    row.pop("segments", None)
    print(json.dumps(row))
    return 0


# --------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--deadline-s", type=float, default=120)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--alloc-confs", default=";".join(DEFAULT_CONFS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child_main(a.child)
    start = time.time()
    os.makedirs(os.path.join(a.out, "traces"), exist_ok=True)
    models = [m for m in a.models.split(",") if m]
    confs = [c for c in a.alloc_confs.split(";") if c]
    if a.device == "cpu":
        confs = confs[:1]
    doc = {"format": FORMAT, "device": a.device, "rows": []}
    path = os.path.join(a.out, "alloc_traces.json")

    def write():
        doc["seconds"] = round(time.time() - start, 1)
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(path + ".tmp", path)

    write()
    failed = 0
    for ci, conf in enumerate(confs):
        for spec in models:
            if ci > 0 and spec not in EXTRA_CONF_MODELS:
                continue
            batch = MODELS.get(spec, (8, 2))[1 if a.quick else 0]
            row = {"model": spec, "batch": batch, "alloc_conf": conf}
            left = a.deadline_s - (time.time() - start)
            if left < 20:
                row["skipped"] = "past the deadline"
                doc["rows"].append(row)
                write()
                continue
            env = dict(os.environ)
            env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
            if conf != "default":
                env["PYTORCH_CUDA_ALLOC_CONF"] = conf
            name = f"{conf.replace(':', '-').replace(',', '_')}__{spec.replace(':', '_')}"
            trace = os.path.join(a.out, "traces", name + ".json.gz")
            cmd = [sys.executable, os.path.abspath(__file__), "--out", a.out, "--child", spec,
                   str(batch), a.device, "1" if a.quick else "0", trace]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                   timeout=min(left - 5, 120))
                lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
                row.update(json.loads(lines[-1]) if lines else
                           {"error": f"exit {p.returncode}: {p.stderr[-1500:]}"})
                if p.returncode != 0:
                    failed += 1
            except subprocess.TimeoutExpired:
                row["error"] = "timed out"
                failed += 1
            row["alloc_conf"] = conf
            doc["rows"].append(row)
            write()
            print(f"[alloc_trace {time.time() - start:.0f}s] {conf} {spec}: "
                  f"{row.get('error') or row.get('max_reserved_bytes')}", file=sys.stderr,
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
