#!/usr/bin/env python3
"""The summary of profiler/gpu_check.sh: reads its work folder (cases.tsv, the
per-case `memplan profile --json` reports, the environment it recorded, the
PyTorch rows) and writes one memplan.gpu_check/2 JSON
(schemas/gpu_check.schema.json). Called after every case, so it must work on
a half-finished folder.

Usage: gpu_check_summary.py --work DIR --status TEXT --seconds N --dry-run 0|1 --out FILE
"""
import argparse
import json
import os
import sys

FORMAT = "memplan.gpu_check/2"
OVERHEAD_GRAPHS = ("gpt_tiny", "densenet_toy")


def read_text(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except OSError:
        return None, None
    except ValueError as e:
        return None, f"{os.path.basename(path)}: unreadable JSON: {e}"


def tail(path, chars=1500):
    text = read_text(path, "")
    return text[-chars:] if text else None


def case_row(work, fields):
    name, graph, plan, allocator, cupti, repeat, rc, extra, reason = (fields + [""] * 9)[:9]
    row = {"case": name, "graph": os.path.basename(graph).replace(".graph.json", ""),
           "extra_args": extra, "program": "baseline" if plan == "-" else "plan70",
           "allocator": allocator, "cupti": cupti == "on", "repeat": int(repeat),
           "exit": rc if rc == "skipped" else int(rc)}
    if rc == "skipped":
        row["skip_reason"] = reason or "not recorded"
    report, bad = read_json(os.path.join(work, "cases", name + ".json"))
    if rc != "skipped" and report is None:
        row["error"] = bad or tail(os.path.join(work, "logs", name + ".txt"))
        return row
    if report is None:
        return row
    predicted = report.get("predicted_peak_bytes")
    device = report.get("device_peak_bytes")
    row.update({
        "backend": report.get("backend"),
        "predicted_peak_bytes": predicted,
        "measured_peak_bytes": report.get("measured_peak_bytes"),
        "measured_source": report.get("measured_source"),
        "allocator_peak_bytes": report.get("allocator_peak_bytes"),
        "relative_error": report.get("relative_error"),
        "exact": report.get("exact"),
        "first_divergence": report.get("first_divergence"),
        "device_peak_bytes": device,
        "device_relative_error": (device - predicted) / max(predicted, 1)
        if isinstance(device, int) and isinstance(predicted, int) else None,
        "dropped_records": report.get("dropped_records"),
        "records": report.get("records"),
        "run_time_us": report.get("run_time_us"),
        "wall_time_us": report.get("wall_time_us"),
        "notes": report.get("notes", []),
    })
    if rc not in ("0", "skipped"):
        row["error"] = tail(os.path.join(work, "logs", name + ".txt"))
    return row


def overhead(rows):
    out = []
    by_name = {r["case"]: r for r in rows}
    for graph in OVERHEAD_GRAPHS:
        a = by_name.get(graph + ".overhead.cupti")
        b = by_name.get(graph + ".overhead.nocupti")
        if a and b and a.get("wall_time_us") and b.get("wall_time_us"):
            out.append({"graph": graph, "wall_us_cupti": a["wall_time_us"],
                        "wall_us_no_cupti": b["wall_time_us"],
                        "op_us_cupti": a["run_time_us"], "op_us_no_cupti": b["run_time_us"],
                        "wall_overhead": a["wall_time_us"] / b["wall_time_us"] - 1.0})
    return out


def phase(work, exit_file, report_file, log_file):
    """{exit, report, error} of a PyTorch phase, or None when it did not start."""
    code = read_text(os.path.join(work, exit_file))
    doc, bad = read_json(os.path.join(work, report_file))
    if code is None and doc is None:
        return None
    return {"exit": int(code) if code is not None else None, "report": doc,
            "error": bad or (tail(os.path.join(work, "logs", log_file))
                             if code not in (None, "0") else None)}


def summarize(work, status, seconds, dry_run):
    rows = []
    tsv = read_text(os.path.join(work, "cases.tsv"), "")
    for line in tsv.splitlines():
        if line:
            rows.append(case_row(work, line.split("\t")))
    ran = [r for r in rows if isinstance(r["exit"], int)]
    errors = [abs(r["relative_error"]) for r in ran if r.get("relative_error") is not None]
    doctor, _ = read_json(os.path.join(work, "doctor.json"))
    cupti_source = (read_text(os.path.join(work, "cupti_source.txt"), "") + " ").split(" ", 1)
    probe = read_text(os.path.join(work, "probe_exit.txt"))
    torch = phase(work, "torch_exit.txt", os.path.join("torch", "torch_gpu_check.json"),
                  "torch_gpu_check.txt")
    alloc = phase(work, "alloc_trace_exit.txt", os.path.join("alloc", "alloc_traces.json"),
                  "torch_alloc_trace.txt")
    return {
        "format": FORMAT,
        "status": status,
        "dry_run": dry_run,
        "seconds": seconds,
        "environment": (read_text(os.path.join(work, "logs", "environment.txt"), "")
                        .splitlines()),
        "binary": read_text(os.path.join(work, "binary_source.txt")),
        "doctor": doctor,
        "cupti": {"source": cupti_source[0] or None, "path": cupti_source[1].strip() or None,
                  "mode": read_text(os.path.join(work, "cupti_mode.txt"))},
        "probe_exit": int(probe) if probe is not None else None,
        "probe_error": tail(os.path.join(work, "logs", "probe.txt"), 600)
        if probe not in (None, "0") else None,
        "cases_run": len(ran),
        "cases_failed": sum(1 for r in ran if r["exit"] != 0),
        "cases_skipped": len(rows) - len(ran),
        "cases_exact": sum(1 for r in ran if r.get("exact")),
        "max_abs_relative_error": max(errors) if errors else None,
        "cupti_overhead": overhead(rows),
        "cases": rows,
        "alloc_traces": alloc,
        "torch": torch,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--dry-run", type=int, choices=(0, 1), required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    doc = summarize(a.work, a.status, a.seconds, bool(a.dry_run))
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("gpu_check: %s, %d cases run, %d failed, %d skipped, %d exact, max |relative error| %s"
          % (doc["status"], doc["cases_run"], doc["cases_failed"], doc["cases_skipped"],
             doc["cases_exact"], doc["max_abs_relative_error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
