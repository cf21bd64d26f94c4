#!/usr/bin/env python3
"""What the installed `memplan` command (the wheel's Python launcher, which
execs the C++ binary) adds to a command: the installed command against the
bare binary on examples/mlp.graph.json, alternated, median of N each.

    bench/launcher_overhead.py --wheel-dir build/wheelhouse --memplan build/cli/memplan

Makes a venv with the wheel (no extras) in a temporary folder. Writes
bench/results/launcher_overhead.json (raw times) and prints the medians.
Target (issue 29): the launcher adds at most 50 ms.
"""
import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_MS = 50


def seconds(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel-dir", default=os.path.join(ROOT, "build", "wheelhouse"))
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "launcher_overhead.json"))
    args = ap.parse_args()
    wheel = sorted(glob.glob(os.path.join(args.wheel_dir, "memplan-*.whl")))[-1]
    graph = os.path.join(ROOT, "examples", "mlp.graph.json")
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q",
                        "--disable-pip-version-check", wheel], check=True)
        installed = [os.path.join(venv, "bin", "memplan"), "analyze", graph, "-q"]
        bare = [args.memplan, "analyze", graph, "-q"]
        seconds(installed), seconds(bare)  # warm the page cache
        runs = {"installed": [], "bare": []}
        for _ in range(args.runs):
            runs["installed"].append(seconds(installed))
            runs["bare"].append(seconds(bare))
    med = {k: statistics.median(v) for k, v in runs.items()}
    overhead_ms = 1000 * (med["installed"] - med["bare"])
    result = {"wheel": os.path.basename(wheel), "graph": "examples/mlp.graph.json",
              "runs": args.runs, "python": platform.python_version(),
              "seconds": runs, "median_seconds": med, "overhead_ms": overhead_ms,
              "target_ms": TARGET_MS, "met": overhead_ms <= TARGET_MS,
              "method": "wall time of `memplan analyze GRAPH -q`, the installed command and "
                        "the bare binary alternated, after one warm-up run each"}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"installed {1000 * med['installed']:.1f} ms, bare {1000 * med['bare']:.1f} ms, "
          f"launcher overhead {overhead_ms:.1f} ms (target {TARGET_MS} ms: "
          f"{'met' if result['met'] else 'missed'})")


if __name__ == "__main__":
    main()
