#!/usr/bin/python3
"""Prove a refactoring changed no output: run the CLI over the bench's graphs and
compare every byte it writes with a recorded manifest.

    bench/outputs_identical.py [--memplan build/cli/memplan] [--write] [--keep DIR]

Each case is one `memplan` command (analyze, plan at several budgets, granularities
and algorithms, verify, report, snapshot, check, lower, micro-batch, parallel) on the
examples (examples/*.graph.json) and on synthetic graphs from bench/gen_graph.py
(chain, resnet, transformer). Recorded per case: the exit code and the SHA-256 of
stdout and of every file the command writes (plans, JSON reports, Chrome traces, HTML
pages, memory_viz pickles, joint graphs). stderr is not compared (it carries progress
lines).

Without --write, the run is compared with bench/results/outputs_identical.json and
every difference is listed; exit 1 on any. With --write, the manifest is rewritten
(do that only at a commit whose outputs are the reference). --keep keeps the outputs
for diffing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import provenance  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "bench" / "results" / "outputs_identical.json"
EXAMPLES = ["mlp", "cnn_small.joint", "densenet_toy", "gpt_tiny", "mlp_torch.joint"]
SYNTHETIC = [("chain", 2000), ("resnet", 1000), ("transformer", 1700)]
TIMEOUT_S = 300


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run(memplan: str, work: Path, args: list[str]) -> tuple[int, bytes]:
    proc = subprocess.run(
        [memplan, *args], cwd=work, capture_output=True, timeout=TIMEOUT_S, check=False
    )
    return proc.returncode, proc.stdout


def baseline_peak(memplan: str, work: Path, graph: str) -> tuple[int, int]:
    """The baseline peak and the lower bound analyze reports, in bytes."""
    rc, _ = run(memplan, work, ["analyze", graph, "--json", "peak.json", "-q"])
    if rc != 0:
        sys.exit(f"outputs_identical: analyze {graph} exited {rc}")
    report = json.loads((work / "peak.json").read_text())
    return int(report["peak_bytes"]), int(report["lower_bound_bytes"])


def cases_for(graph: str, peak: int, floor: int) -> list[tuple[str, list[str]]]:
    """The commands run on one graph: (case name, argv after `memplan`). Budgets
    "b70" and "b50" lie 70% and 40% of the way from the lower bound to the peak."""
    g = graph
    b70, b50 = str(floor + (peak - floor) * 7 // 10), str(floor + (peak - floor) * 4 // 10)
    cases = [
        ("analyze", ["analyze", g, "--json", "out.json", "--trace", "out.trace.json"]),
        (
            "analyze_device",
            [
                "analyze",
                g,
                "--device",
                "h100",
                "--alloc-conf",
                "expandable_segments:True",
                "--json",
                "out.json",
            ],
        ),
        ("analyze_adam", ["analyze", g, "--optimizer", "adam", "--json", "out.json"]),
        (
            "analyze_out_of_place",
            ["analyze", g, "--accumulation", "out_of_place", "--json", "out.json"],
        ),
        (
            "plan70",
            [
                "plan",
                g,
                "--budget",
                b70,
                "-o",
                "plan.json",
                "--json",
                "out.json",
                "--trace",
                "out.trace.json",
            ],
        ),
        (
            "plan50_flops",
            [
                "plan",
                g,
                "--budget",
                b50,
                "--objective",
                "flops",
                "-o",
                "plan.json",
                "--json",
                "out.json",
            ],
        ),
        ("plan50_greedy", ["plan", g, "--budget", b50, "--algorithm", "greedy", "-o", "plan.json"]),
        ("plan50_chain", ["plan", g, "--budget", b50, "--algorithm", "chain", "-o", "plan.json"]),
        (
            "plan70_module",
            [
                "plan",
                g,
                "--budget",
                b70,
                "--granularity",
                "module",
                "-o",
                "plan.json",
                "--json",
                "out.json",
            ],
        ),
        ("plan70_sac", ["plan", g, "--budget", b70, "--granularity", "sac", "-o", "plan.json"]),
        (
            "plan70_reserved",
            ["plan", g, "--budget", b70, "--budget-of", "reserved", "-o", "plan.json"],
        ),
        (
            "plan_sweep",
            [
                "plan",
                g,
                "--budget",
                b50,
                "--sweep",
                "4",
                "--html",
                "sweep.html",
                "--json",
                "out.json",
            ],
        ),
        (
            "plan_adam_cpu",
            [
                "plan",
                g,
                "--budget",
                b70,
                "--optimizer",
                "adam",
                "--device",
                "cpu",
                "-o",
                "plan.json",
            ],
        ),
        ("report", ["report", g, "--html", "report.html", "--device", "h100"]),
        ("snapshot", ["snapshot", g, "-o", "snap.pickle"]),
        (
            "check_budget",
            ["check", g, "--budget", b70, "--json", "out.json", "--format", "markdown"],
        ),
        ("check_github", ["check", g, "--budget", b50, "--format", "github"]),
        ("lower", ["lower", g, "-o", "joint.graph.json"]),
        (
            "ddp",
            [
                "analyze",
                g,
                "--optimizer",
                "adam",
                "--parallel",
                "ddp",
                "--world-size",
                "4",
                "--json",
                "out.json",
            ],
        ),
        (
            "zero1",
            [
                "analyze",
                g,
                "--optimizer",
                "adamw",
                "--parallel",
                "zero1",
                "--world-size",
                "4",
                "--json",
                "out.json",
            ],
        ),
        (
            "fsdp",
            [
                "analyze",
                g,
                "--optimizer",
                "adam",
                "--parallel",
                "fsdp",
                "--world-size",
                "4",
                "--fsdp-depth",
                "1",
                "--json",
                "out.json",
            ],
        ),
    ]
    return cases


def plan_chained_cases(graph: str, peak: int) -> list[tuple[str, list[str]]]:
    """Commands that read the plan the 'plan70' case wrote (plan.json kept)."""
    g = graph
    return [
        ("verify", ["verify", g, "plan.json", "--json", "out.json"]),
        ("report_plan", ["report", g, "--html", "report.html", "--plan", "plan.json"]),
        ("snapshot_plan", ["snapshot", g, "-o", "snap.pickle", "--plan", "plan.json"]),
        (
            "check_plan",
            ["check", g, "--plan", "plan.json", "--budget", str(peak), "--json", "out.json"],
        ),
    ]


def record(memplan: str, work: Path, name: str, argv: list[str], keep: Path | None) -> dict:
    produced_before = {p.name for p in work.iterdir()}
    for f in (
        "out.json",
        "out.trace.json",
        "sweep.html",
        "report.html",
        "snap.pickle",
        "joint.graph.json",
    ):
        (work / f).unlink(missing_ok=True)
    rc, stdout = run(memplan, work, argv)
    entry: dict = {"argv": argv, "rc": rc, "stdout": sha256(stdout), "files": {}}
    for f in sorted(work.iterdir()):
        if f.name in produced_before and f.name != "plan.json":
            continue
        if f.name == "plan.json" and argv[0] != "plan":
            continue
        entry["files"][f.name] = sha256(f.read_bytes())
        if keep is not None:
            shutil.copy(f, keep / f"{name}.{f.name}")
    if keep is not None:
        (keep / f"{name}.stdout").write_bytes(stdout)
    return entry


def graphs(work: Path) -> list[str]:
    names = []
    for ex in EXAMPLES:
        shutil.copy(REPO / "examples" / f"{ex}.graph.json", work)
        names.append(f"{ex}.graph.json")
    for shape, ops in SYNTHETIC:
        name = f"{shape}_{ops}.graph.json"
        subprocess.run(
            [
                sys.executable,
                str(REPO / "bench" / "gen_graph.py"),
                "--ops",
                str(ops),
                "--shape",
                shape,
                "-o",
                str(work / name),
            ],
            check=True,
            timeout=TIMEOUT_S,
        )
        names.append(name)
    return names


def microbatch_cases() -> list[tuple[str, str, list[str]]]:
    return [
        (
            "gpt_tiny.graph.json",
            "global_batch",
            [
                "plan",
                "gpt_tiny.graph.json",
                "--budget",
                "40MiB",
                "--global-batch",
                "32",
                "-o",
                "plan.json",
                "--json",
                "out.json",
            ],
        ),
        (
            "gpt_tiny.graph.json",
            "global_batch_module",
            [
                "plan",
                "gpt_tiny.graph.json",
                "--budget",
                "60MiB",
                "--global-batch",
                "16",
                "--granularity",
                "module",
                "-o",
                "plan.json",
            ],
        ),
        (
            "gpt_tiny.graph.json",
            "pipeline",
            [
                "analyze",
                "gpt_tiny.graph.json",
                "--parallel",
                "pipeline",
                "--pp-stages",
                "2",
                "--micro-batches",
                "4",
                "--json",
                "out.json",
            ],
        ),
    ]


def collect(memplan: str, keep: Path | None) -> dict:
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="memplan-identical-") as tmp:
        root = Path(tmp)
        src = root / "graphs"
        src.mkdir()
        for graph in graphs(src):
            work = root / graph.removesuffix(".graph.json")
            work.mkdir()
            shutil.copy(src / graph, work)
            peak, floor = baseline_peak(memplan, work, graph)
            (work / "peak.json").unlink()
            sub = keep / work.name if keep else None
            if sub:
                sub.mkdir(parents=True, exist_ok=True)
            cases = cases_for(graph, peak, floor)
            for name, argv in cases:
                results[f"{work.name}/{name}"] = record(memplan, work, name, argv, sub)
                if name == "plan70":
                    shutil.copy(work / "plan.json", work / "plan70.json")
            (work / "plan.json").unlink(missing_ok=True)
            shutil.copy(work / "plan70.json", work / "plan.json")
            for name, argv in plan_chained_cases(graph, peak):
                results[f"{work.name}/{name}"] = record(memplan, work, name, argv, sub)
        work = root / "microbatch"
        work.mkdir()
        for graph, name, argv in microbatch_cases():
            shutil.copy(src / graph, work)
            results[f"microbatch/{name}"] = record(memplan, work, name, argv, keep)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memplan", default=str(REPO / "build" / "cli" / "memplan"))
    ap.add_argument("--write", action="store_true", help="rewrite the manifest")
    ap.add_argument("--keep", type=Path, help="keep every output in this folder")
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    results = collect(memplan, args.keep)
    if args.write:
        commit = provenance.commit(short=None)
        MANIFEST.write_text(
            json.dumps(
                {
                    "schema": "memplan.outputs_identical/1",
                    "recorded_at_commit": commit,
                    "cases": results,
                },
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )
        files = sum(len(c["files"]) + 1 for c in results.values())
        print(f"outputs_identical: recorded {len(results)} cases, {files} outputs")
        return 0
    expected = json.loads(MANIFEST.read_text())["cases"]
    diffs = []
    for name in sorted(set(expected) | set(results)):
        want, got = expected.get(name), results.get(name)
        if want is None or got is None:
            diffs.append(f"{name}: case {'added' if want is None else 'missing'}")
            continue
        for key in ("argv", "rc", "stdout"):
            if want[key] != got[key]:
                diffs.append(f"{name}: {key} differs")
        for f in sorted(set(want["files"]) | set(got["files"])):
            if want["files"].get(f) != got["files"].get(f):
                diffs.append(f"{name}: {f} differs")
    files = sum(len(c["files"]) + 1 for c in results.values())
    if diffs:
        print("\n".join(diffs))
        print(f"outputs_identical: {len(diffs)} of {files} outputs differ")
        return 1
    print(f"outputs_identical: {len(results)} cases, {files} outputs byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
