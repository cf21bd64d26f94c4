#!/usr/bin/env python3
"""What the allocator model (reserved memory) adds to `memplan analyze`.

On synthetic 100k-op graphs (bench/gen_graph.py: chain, transformer, resnet),
runs `memplan analyze GRAPH --timings -q` --repeat times and reads the phase
split it prints on stderr ("timings: parse X s, lower Y s, analyze Z s,
reserved W s"). Reports, per graph, the median of each phase and the
reserved phase's share of parse + lower + analyze + reserved, with every run
in the JSON. Run it alone: the figures are wall times.

Usage: bench/reserved_overhead.py [--memplan build/cli/memplan] [--ops 100000]
       [--repeat 3] [--work DIR] [--out bench/results/reserved_overhead]
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMINGS = re.compile(r"timings: parse ([0-9.]+) s, lower ([0-9.]+) s, analyze ([0-9.]+) s, "
                     r"reserved ([0-9.]+) s")
PHASES = ("parse", "lower", "analyze", "reserved")


def run_once(memplan, graph):
    proc = subprocess.run([memplan, "analyze", graph, "--timings", "-q"], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit("memplan analyze %s: exit %d: %s" % (graph, proc.returncode, proc.stderr))
    m = TIMINGS.search(proc.stderr)
    if not m:
        sys.exit("memplan analyze %s --timings printed no timings line: %r" % (graph, proc.stderr))
    return dict(zip(PHASES, (float(x) for x in m.groups())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                   "memplan-reserved-overhead"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "reserved_overhead"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for shape in ("chain", "transformer", "resnet"):
        graph = os.path.join(args.work, "%s_%d.json" % (shape, args.ops))
        if not os.path.exists(graph):
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_graph.py"), "--ops",
                            str(args.ops), "--shape", shape, "-o", graph], check=True)
        runs = [run_once(args.memplan, graph) for _ in range(args.repeat)]
        median = {p: statistics.median(r[p] for r in runs) for p in PHASES}
        total = sum(median.values())
        rows.append({"graph": "%s_%d" % (shape, args.ops), "runs": runs, "median_s": median,
                     "total_s": total, "reserved_share": median["reserved"] / total})
        print("%-20s total %.3f s, reserved %.3f s (%.1f%%)" %
              (rows[-1]["graph"], total, median["reserved"], 100 * rows[-1]["reserved_share"]))
    commit = provenance.commit()
    meta = {"benchmark": "reserved_overhead",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": "%s, %d CPUs" % (platform.machine(), os.cpu_count()), "commit": commit,
            "command": "memplan analyze GRAPH --timings -q", "repeat": args.repeat}
    with open(args.out + ".json", "w") as f:
        json.dump({**meta, "rows": rows}, f, indent=1)
        f.write("\n")
    lines = ["# The allocator model's share of `memplan analyze`", "",
             "%s, %s, commit %s. `bench/reserved_overhead.py`: `%s`, median of %d runs per "
             "graph (raw runs in reserved_overhead.json). Share = reserved / (parse + lower + "
             "analyze + reserved)." % (meta["date"], meta["machine"], commit, meta["command"],
                                       args.repeat), "",
             "| graph | parse s | lower s | analyze s | reserved s | total s | reserved share |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        m = r["median_s"]
        lines.append("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f%% |" %
                     (r["graph"], m["parse"], m["lower"], m["analyze"], m["reserved"],
                      r["total_s"], 100 * r["reserved_share"]))
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
