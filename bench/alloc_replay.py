#!/usr/bin/env python3
"""Real caching-allocator histories replayed through memplan's allocator model.

profiler/torch_alloc_trace.py recorded PyTorch's CUDA caching allocator on a
GPU (torch.cuda.memory._record_memory_history: every alloc, free and segment
event of the set-up, a warm-up step and a measured step). The allocs and the
frees (free_completed; free_requested where a trace has no completions) go to
analyzer/alloc's model through tests/tools/alloc_replay (Malloc/Free by id);
the segments it asks the device for (its reserved bytes after each event) are
checked against the trace's own segment events, which are never fed in.

Usage: bench/alloc_replay.py --replay build/tests/alloc_replay
                             [--traces DIR ...] [--json OUT] [--check]
DIR: a torch_alloc_trace.py --out folder (alloc_traces.json, alloc_traces/);
default: the two runs of 2026-12-04, bench/results/gpu and bench/results/gpu/run2
(the second: held-out models and settings, recorded after the first was checked).
Writes bench/results/gpu/alloc_replay.json (one row per trace: the model's and
the real reserved peak, segment counts, the first segment whose size differs).
--check: exit 1 unless every trace but the named exceptions (KNOWN_MISSES) is
reproduced to the byte and each exception stays within its bound.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIRS = [os.path.join(BENCH, "results", "gpu"),
                os.path.join(BENCH, "results", "gpu", "run2")]
# (run, trace) -> the range its relative reserved-peak error (model - real)
# / real may take. Each model segment count differs by one from some point on
# (first_segment_size_difference): the model's device addresses are synthetic
# (creation order), cudaMalloc's are not, so when free blocks of one size lie
# in different segments the model may pick another (caching_allocator.h);
# likely, not shown. convnext_tiny was a held-out model (the second run).
KNOWN_MISSES = {("gpu", "default__torchvision_resnet18.json.gz"): (0.0, 0.04),
                ("run2", "default__torchvision_convnext_tiny.json.gz"): (-0.005, 0.0)}


PHASES = ("setup", "warmup", "step")


def side(sizes_and_signs):
    """Reserved peak, end, segment allocations and their sizes from a list of
    (phase, +bytes | -bytes) segment changes."""
    cur = peak = 0
    allocs = []
    for _, delta in sizes_and_signs:
        cur += delta
        peak = max(peak, cur)
        if delta > 0:
            allocs.append(delta)
    return {"reserved_peak_bytes": peak, "reserved_end_bytes": cur,
            "segment_allocs": len(allocs), "segment_alloc_bytes": sum(allocs)}, allocs


def replay(binary, trace_gz, alloc_conf):
    """The trace's own segment changes and the model's, by phase."""
    with gzip.open(trace_gz, "rt") as f:
        doc = json.load(f)
    events = [(ph, e) for ph in PHASES if ph in doc["phases"] for e in doc["phases"][ph]["events"]]
    free_action = "fc" if any(e[0] == "fc" for _, e in events) else "fr"
    lines, fed, live, real, allocs = [alloc_conf], [], {}, [], 0
    for ph, (action, address, size, *_) in events:
        if action == "a":
            live[address] = allocs
            allocs += 1
            lines.append(f"m {live[address]} {size}")
            fed.append(ph)
        elif action == free_action and address in live:
            lines.append(f"f {live.pop(address)}")
            fed.append(ph)
        elif action in ("sa", "sm"):
            real.append((ph, size))
        elif action in ("sf", "su"):
            real.append((ph, -size))
    p = subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{trace_gz}: alloc_replay exit {p.returncode}: {p.stderr}")
    out = json.loads(p.stdout)
    if out["failed"]:
        raise RuntimeError(f"{trace_gz}: the model refused events {out['failed'][:5]}")
    model, before = [], 0
    for ph, (_, reserved) in zip(fed, out["per_event"]):
        if reserved != before:
            model.append((ph, reserved - before))
            before = reserved
    real_all, real_sizes = side(real)
    model_all, model_sizes = side(model)
    first = next((i for i in range(max(len(real_sizes), len(model_sizes)))
                  if i >= len(real_sizes) or i >= len(model_sizes)
                  or real_sizes[i] != model_sizes[i]), -1)
    phases = {ph: {"real": side([x for x in real if x[0] == ph])[0],
                   "model": side([x for x in model if x[0] == ph])[0]} for ph in PHASES}
    return {"free_action": free_action, "allocs": allocs,
            "real": real_all, "model": model_all, "first_segment_size_difference": first,
            "phases": phases}


def rows(binary, traces_dirs):
    out, device = [], None
    for traces_dir in traces_dirs:
        meta = json.load(open(os.path.join(traces_dir, "alloc_traces.json")))
        device = meta.get("device")
        out += run_rows(binary, traces_dir, meta)
    return {"format": "memplan.bench.alloc_replay/1", "device": device,
            "source": "profiler/torch_alloc_trace.py on the lent H200 (bench/results/gpu)",
            "rows": out}


def run_rows(binary, traces_dir, meta):
    run = os.path.basename(os.path.normpath(traces_dir))
    out = []
    for r in meta["rows"]:
        if "trace" not in r:
            continue
        trace = os.path.join(traces_dir, "alloc_traces", r["trace"])
        conf = "" if r["alloc_conf"] in ("", "default") else r["alloc_conf"]
        d = replay(binary, trace, conf)
        real, model = d["real"]["reserved_peak_bytes"], d["model"]["reserved_peak_bytes"]
        out.append({"run": run, "trace": r["trace"], "model": r["model"], "batch": r["batch"],
                    "alloc_conf": r["alloc_conf"] or "default", "torch": r["torch"],
                    "allocs": d["allocs"],
                    "real_reserved_peak_bytes": real, "model_reserved_peak_bytes": model,
                    "torch_max_reserved_bytes": r["max_reserved_bytes"],
                    "relative_error": (model - real) / real,
                    "real_segment_allocs": d["real"]["segment_allocs"],
                    "model_segment_allocs": d["model"]["segment_allocs"],
                    "first_segment_size_difference": d["first_segment_size_difference"],
                    "phases": d["phases"]})
    return out


def check(doc):
    problems = []
    for r in doc["rows"]:
        if r["real_reserved_peak_bytes"] != r["torch_max_reserved_bytes"]:
            problems.append(f"{r['trace']}: the trace's segments reserve "
                            f"{r['real_reserved_peak_bytes']} B, torch's stats "
                            f"{r['torch_max_reserved_bytes']} B")
        bound = KNOWN_MISSES.get((r["run"], r["trace"]))
        if bound is None and (r["relative_error"] != 0 or r["first_segment_size_difference"] != -1):
            problems.append(f"{r['trace']}: model reserves {r['model_reserved_peak_bytes']} B, "
                            f"PyTorch {r['real_reserved_peak_bytes']} B (first segment that "
                            f"differs: {r['first_segment_size_difference']})")
        if bound is not None and not bound[0] <= r["relative_error"] <= bound[1]:
            problems.append(f"{r['trace']}: {r['relative_error']:+.4f} outside {bound}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay", required=True, help="the tests/tools/alloc_replay binary")
    ap.add_argument("--traces", nargs="+", default=DEFAULT_DIRS)
    ap.add_argument("--json", help="write the rows here (default: not written)")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    doc = rows(a.replay, a.traces)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    for r in doc["rows"]:
        print(f"{r['run']}/{r['trace']}: model {r['model_reserved_peak_bytes']} B, PyTorch "
              f"{r['real_reserved_peak_bytes']} B ({100 * r['relative_error']:+.2f}%), segments "
              f"{r['model_segment_allocs']} / {r['real_segment_allocs']}")
    if a.check:
        problems = check(doc)
        for p in problems:
            print("alloc_replay: " + p, file=sys.stderr)
        if not doc["rows"]:
            print("alloc_replay: no traces", file=sys.stderr)
            return 1
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
