#!/usr/bin/python3
"""The Llama-2 meta exports' wall time (issue 34, target 4), three ways in
one run: every layer traced at the symbolic export's five sizes one after
another (--fold-layers never, MEMPLAN_EXPORT_JOBS=1: how export first ran);
every layer, one forked process per CPU (--fold-layers never: the default
before layer folding); and the default (the decoder stack traced at 3, 4 and
5 layers and folded, memplan.torch._fold, in parallel). All three files must
be byte-identical.

    bench/export_speed.py [--models 7b,70b] [--python .venv/bin/python]

Writes bench/results/export_speed.{json,md}. Each export is
`python -m memplan export SPEC --batch 1 --device meta -q` under GNU time
(wall seconds; max RSS is the largest single process's, and the parallel
run holds up to one such process per CPU at once). Run it alone.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_scale  # noqa: E402
import provenance  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "bench", "results")
TARGETS_S = {"7b": 30, "70b": 60}  # issue 34


NEVER = ["--fold-layers", "never"]
WAYS = {"sequential": (1, NEVER), "parallel": (None, NEVER),
        "folded": (None, [])}  # (MEMPLAN_EXPORT_JOBS, extra arguments)


def timed_export(python, spec, out, jobs, extra=()):
    """{wall_s, max_rss_mib, rc} of one export; jobs None: the default."""
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "python")}
    env.pop("MEMPLAN_EXPORT_JOBS", None)
    if jobs is not None:
        env["MEMPLAN_EXPORT_JOBS"] = str(jobs)
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name, python, "-m",
                            "memplan", "export", spec, "--batch", "1", "--device", "meta", "-q",
                            "-o", out, *extra], env=env, capture_output=True, text=True)
        wall, rss = t.read().split()[-2:]
    return {"wall_s": float(wall), "max_rss_mib": round(int(rss) / 1024, 1), "rc": p.returncode,
            "stderr": p.stderr[-400:]}


def markdown(doc):
    lines = ["# Meta-device export speed (issue 34, target 4)", "",
             f"{doc['date']}, {doc['cores']} CPUs, commit {doc['commit']}. "
             "`bench/export_speed.py`; raw data: `bench/results/export_speed.json`.", ""]
    lines += table_lines(doc)
    return "\n".join(lines) + "\n"


def table_lines(doc):
    """The table docs/benchmarks.md shows (scripts/docs_tables.py)."""
    out = ["| model | ops | every layer, one after another s | every layer, parallel s | "
           "folded s | speed-up over parallel | target s | met | max RSS MiB (one process) | "
           "same file |",
           "|---|---:|---:|---:|---:|---:|---:|:---:|---:|:---:|"]
    for r in doc["rows"]:
        seq, par, fold = r["sequential"], r["parallel"], r["folded"]
        rss = max(x["max_rss_mib"] for x in (seq, par, fold))
        out.append(f"| {r['label']} | {r['ops']} | {seq['wall_s']:.1f} | {par['wall_s']:.1f} "
                   f"| {fold['wall_s']:.1f} | {par['wall_s'] / fold['wall_s']:.2f}x | "
                   f"{r['target_s']} | {'yes' if fold['wall_s'] < r['target_s'] else 'no'} | "
                   f"{rss:.0f} | {'yes' if r['identical'] else 'NO'} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="7b,70b")
    ap.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    ap.add_argument("--json", default=os.path.join(RESULTS, "export_speed.json"))
    ap.add_argument("--md", default=os.path.join(RESULTS, "export_speed.md"))
    a = ap.parse_args()
    doc = {"format": "memplan.bench.export_speed/1",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "cores": os.cpu_count(), "machine": platform.platform(), "commit": provenance.commit(),
           "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for key in a.models.split(","):
            m = llama_scale.MODELS[key]
            spec = llama_scale.spec_of(m)
            files = {k: os.path.join(tmp, f"{key}.{k}.json") for k in WAYS}
            row = {"model": key, "label": m["label"], "spec": spec, "target_s": TARGETS_S[key]}
            for k, (jobs, extra) in WAYS.items():
                row[k] = timed_export(a.python, spec, files[k], jobs, extra)
            for k in files:
                if row[k]["rc"] != 0:
                    sys.exit(f"{key} {k}: exit {row[k]['rc']}: {row[k]['stderr']}")
            text = {k: open(f).read() for k, f in files.items()}
            row["identical"] = len(set(text.values())) == 1
            row["ops"] = len(json.loads(text["folded"])["ops"])
            print(f"{m['label']}: " + " -> ".join(f"{row[k]['wall_s']} s" for k in WAYS)
                  + f", identical {row['identical']}", flush=True)
            doc["rows"].append(row)
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    with open(a.md, "w") as f:
        f.write(markdown(doc))
    print(re.sub(r"\n+$", "", markdown(doc)))
    return 0 if all(r["identical"] for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
