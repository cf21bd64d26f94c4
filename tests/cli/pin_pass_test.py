#!/usr/bin/env python3
"""The greedy's second pass (analyzer/plan/planner.h): when nothing fits after
the drop rounds, they run again from the baseline and give up the each-use
switches for pins once the lowest peak stalls. On bench/gen_graph.py's
2,000-op chain at 40 MB only that pass finds a plan (one pass reported none,
lowest peak 43,625,476 B); the plan must fit and its replay agree.

Usage: pin_pass_test.py --memplan PATH   (about 25 s on 2 cores)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET = 40_000_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    memplan = os.path.abspath(ap.parse_args().memplan)
    with tempfile.TemporaryDirectory() as tmp:
        graph, report, plan = (os.path.join(tmp, n) for n in ("c.json", "r.json", "p.json"))
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_graph.py"), "--ops",
                        "2000", "--shape", "chain", "-o", graph], check=True, timeout=120)
        p = subprocess.run([memplan, "plan", graph, "--budget", str(BUDGET), "--algorithm",
                            "greedy", "--json", report, "-o", plan, "-q"], capture_output=True,
                           text=True, timeout=300)
        r = json.load(open(report)) if os.path.exists(report) else {}
        print(f"exit {p.returncode}, feasible {r.get('feasible')}, "
              f"peak {r.get('min_feasible_peak_bytes')} B, {r.get('evaluations')} programs")
        ok = p.returncode == 0 and r.get("feasible") is True
        ok = ok and r["predicted"]["peak_bytes"] <= BUDGET
        v = subprocess.run([memplan, "verify", graph, plan, "-q"], capture_output=True,
                           text=True, timeout=300)
        print(f"verify: exit {v.returncode} {v.stderr[-300:]}")
        ok = ok and v.returncode == 0
    print("ok" if ok else "FAIL: expected a plan within 40,000,000 B that verifies")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
