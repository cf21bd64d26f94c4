#!/usr/bin/env python3
"""bench/results/torch_models_2x.json -> the markdown table the README shows
(bench/results/torch_models_2x.md), with the summary figures under it."""
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def pct(x):
    return "—" if x is None else f"{100 * x:+.3f}%".replace("-", "−")


def name(spec):
    if spec.startswith("hf:"):
        arch = spec.split(":")[1]
        return {"gpt2": "hf gpt2-style (4 layers, d=256, seq 128)",
                "llama": "hf llama-style (4 layers, d=256, GQA, seq 128)"}.get(arch, spec)
    if spec == "models:gpt_small":
        return "GPT (models:gpt_small, 4 layers, d=128, seq 64)"
    return spec.split(":")[-1]


def render(doc):
    """The table and its summary lines, as markdown lines (scripts/docs_tables.py shows
    them on docs/pytorch.md)."""
    lines = ["| model | measured b2 (MiB) | error b2 | measured b8 (MiB) | error b8 "
             "(`--set batch=8`) | b8, measured scratch | b8, no scratch | b8 70% plan: error "
             "| time overhead (predicted) | b8 50% plan: error | time overhead (predicted) "
             "| b8 70% SAC plan: error | time overhead (predicted) | b8 50% SAC plan: error "
             "| time overhead (predicted) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base_errs, plan_errs, sac_errs = [], [], []
    for r in doc["rows"]:
        if "error" in r and "batch2" not in r:
            lines.append(f"| {name(r['model'])} | failed: {r['error'][-120:]!r} |" + " |" * 13)
            continue
        b2, b8 = r["batch2"], r["batch8"]
        base_errs += [b2["error_rules"], b8["error_rules"]]
        cells = [name(r["model"]), f"{b2['measured_peak_bytes'] / MIB:.2f}",
                 pct(b2["error_rules"]), f"{b8['measured_peak_bytes'] / MIB:.2f}",
                 pct(b8["error_rules"]), pct(b8["error_measure"]), pct(b8["error_none"])]
        for key in ("plan70", "plan50", "sac70", "sac50"):
            p = r.get(key, {})
            if not p.get("feasible"):
                cells += ["no fit", "—"]
                continue
            (plan_errs if key.startswith("plan") else sac_errs).append(p["error"])
            cells += [pct(p["error"]),
                      f"{100 * p['measured_time_overhead']:.0f}% "
                      f"({100 * (p['predicted_recompute_overhead'] or 0):.0f}%)"]
        lines.append("| " + " | ".join(cells) + " |")
    abs_base = [abs(e) for e in base_errs]
    lines.append("")
    if abs_base:
        lines.append(f"Baselines (batch 2 and 8, default scratch rules): {len(abs_base)} figures, "
                     f"largest |error| {100 * max(abs_base):.3f}%, median "
                     f"{100 * statistics.median(abs_base):.3f}%.")
    for label, errs in (("Module plans", plan_errs), ("SAC (op-level) plans", sac_errs)):
        if errs:
            lines.append(f"{label}: {len(errs)} figures, largest |error| "
                         f"{100 * max(abs(e) for e in errs):.3f}%, median "
                         f"{100 * statistics.median(abs(e) for e in errs):.3f}%.")
    return lines


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "bench", "results",
                                                             "torch_models_2x.json")
    lines = render(json.load(open(src)))
    out = os.path.join(ROOT, "bench", "results", "torch_models_2x.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
