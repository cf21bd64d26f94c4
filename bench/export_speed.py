#!/usr/bin/python3
"""The Llama-2 meta exports' wall time (issue 34, target 4): the symbolic
export's five traces one after another (MEMPLAN_EXPORT_JOBS=1, how export ran
before) against the default (one forked process per CPU on the meta device),
in one run, and whether the two files are byte-identical.

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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "bench", "results")
TARGETS_S = {"7b": 30, "70b": 60}  # issue 34


def timed_export(python, spec, out, jobs):
    """{wall_s, max_rss_mib, rc} of one export; jobs None: the default."""
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "python")}
    env.pop("MEMPLAN_EXPORT_JOBS", None)
    if jobs is not None:
        env["MEMPLAN_EXPORT_JOBS"] = str(jobs)
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name, python, "-m",
                            "memplan", "export", spec, "--batch", "1", "--device", "meta", "-q",
                            "-o", out], env=env, capture_output=True, text=True)
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
    out = ["| model | ops | one after another s | parallel s (jobs) | speed-up | target s | "
           "met | max RSS MiB (one process) | same file |",
           "|---|---:|---:|---:|---:|---:|:---:|---:|:---:|"]
    for r in doc["rows"]:
        seq, par = r["sequential"], r["parallel"]
        out.append(f"| {r['label']} | {r['ops']} | {seq['wall_s']:.1f} | {par['wall_s']:.1f} "
                   f"({doc['cores']}) | {seq['wall_s'] / par['wall_s']:.2f}x | {r['target_s']} | "
                   f"{'yes' if par['wall_s'] < r['target_s'] else 'no'} | "
                   f"{max(seq['max_rss_mib'], par['max_rss_mib']):.0f} | "
                   f"{'yes' if r['identical'] else 'NO'} |")
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
           "cores": os.cpu_count(), "machine": platform.platform(), "commit": llama_scale.commit(),
           "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for key in a.models.split(","):
            m = llama_scale.MODELS[key]
            spec = llama_scale.spec_of(m)
            files = {k: os.path.join(tmp, f"{key}.{k}.json") for k in ("sequential", "parallel")}
            row = {"model": key, "label": m["label"], "spec": spec, "target_s": TARGETS_S[key]}
            row["sequential"] = timed_export(a.python, spec, files["sequential"], 1)
            row["parallel"] = timed_export(a.python, spec, files["parallel"], None)
            for k in files:
                if row[k]["rc"] != 0:
                    sys.exit(f"{key} {k}: exit {row[k]['rc']}: {row[k]['stderr']}")
            text = {k: open(f).read() for k, f in files.items()}
            row["identical"] = text["sequential"] == text["parallel"]
            row["ops"] = len(json.loads(text["parallel"])["ops"])
            print(f"{m['label']}: {row['sequential']['wall_s']} s -> {row['parallel']['wall_s']} s,"
                  f" identical {row['identical']}", flush=True)
            doc["rows"].append(row)
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    with open(a.md, "w") as f:
        f.write(markdown(doc))
    print(re.sub(r"\n+$", "", markdown(doc)))
    return 0 if all(r["identical"] for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
