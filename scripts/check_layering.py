#!/usr/bin/python3
"""Check the analyzer's layering: every #include, and every stage library's link line.

    scripts/check_layering.py [--root DIR]    # exit 1 and one line per violation
    scripts/check_layering.py --self-test     # the check catches what it should

The analyzer is one folder per pipeline stage (analyzer/CMakeLists.txt builds one
library each). ALLOWED below is the one place that says which stage may include
which: a file may include its own stage and the stages listed, nothing else. An
entry with a file name ("ir/buffer_interval.h") allows that header only.

Also checked: nothing under analyzer/ includes profiler/ or cli/ code, and each
`memplan_stage(NAME ... DEPS ...)` in analyzer/CMakeLists.txt links only stages
its row allows.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

# stage -> what it may include besides itself.
ALLOWED: dict[str, list[str]] = {
    "base": [],
    "ir": ["base"],
    "import": ["base", "ir"],
    "sim": ["base", "ir"],
    "lower": ["base", "ir", "sim"],
    # The allocator model sees buffer intervals, never the graph.
    "alloc": ["base", "ir/buffer_interval.h"],
    # Planners never see an importer, an allocator or a report.
    "plan": ["base", "ir", "sim"],
    "drivers": ["base", "ir", "import", "sim", "lower", "alloc", "plan"],
    "report": ["base", "ir", "sim", "lower", "alloc", "plan", "drivers"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
STAGE_CALL = re.compile(r"memplan_stage\((\w+)(.*?)\)\s*$", re.MULTILINE | re.DOTALL)


def stage_of(path: str) -> str:
    """The stage of a path relative to analyzer/: its first folder ("" at the root)."""
    parts = path.split("/")
    return parts[0] if len(parts) > 1 else ""


def allowed(src_stage: str, included: str) -> bool:
    target = stage_of(included)
    if target == src_stage:
        return True
    rules = ALLOWED[src_stage]
    return target in rules or included in rules


def check_includes(root: Path) -> list[str]:
    errors = []
    analyzer = root / "analyzer"
    for f in sorted(analyzer.rglob("*")):
        if f.suffix not in (".h", ".cc"):
            continue
        rel = f.relative_to(analyzer).as_posix()
        src = stage_of(rel)
        if not src:
            errors.append(f"analyzer/{rel}: expected in a stage folder, not at analyzer/'s root")
            continue
        if src not in ALLOWED:
            errors.append(f"analyzer/{rel}: folder '{src}' is not a stage of ALLOWED")
            continue
        text = f.read_text()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            where = f"analyzer/{rel}:{line}"
            if inc.startswith(("profiler/", "cli/")):
                errors.append(f"{where}: the analyzer may not include {inc}")
            elif inc.startswith("analyzer/"):
                target = inc.removeprefix("analyzer/")
                if stage_of(target) not in ALLOWED:
                    errors.append(f"{where}: {inc} is in no stage of ALLOWED")
                elif not allowed(src, target):
                    may = ", ".join(ALLOWED[src]) or "nothing else"
                    errors.append(
                        f"{where}: {src} may not include {stage_of(target)} ({inc}); "
                        f"{src} may include: {may}"
                    )
    return errors


def check_links(root: Path) -> list[str]:
    errors = []
    text = (root / "analyzer" / "CMakeLists.txt").read_text()
    seen = set()
    for m in STAGE_CALL.finditer(text):
        name, args = m.group(1), m.group(2)
        seen.add(name)
        if name not in ALLOWED:
            errors.append(f"analyzer/CMakeLists.txt: stage library {name} is not in ALLOWED")
            continue
        deps = re.search(r"\bDEPS\b(.*)", args, re.DOTALL)
        for dep in re.findall(r"memplan_(\w+)", deps.group(1) if deps else ""):
            if dep not in ALLOWED[name]:
                errors.append(f"analyzer/CMakeLists.txt: memplan_{name} may not link memplan_{dep}")
    for name in sorted(set(ALLOWED) - seen):
        errors.append(f"analyzer/CMakeLists.txt: no memplan_stage({name} ...)")
    return errors


def self_test() -> int:
    """Builds a tiny tree with one violation of each kind and checks the words."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for folder in ALLOWED:
            (root / "analyzer" / folder).mkdir(parents=True, exist_ok=True)
        (root / "analyzer/plan/p.cc").write_text(
            '#include "analyzer/plan/p.h"\n#include "analyzer/import/graph_json.h"\n'
        )
        (root / "analyzer/alloc/a.h").write_text(
            '#include "analyzer/ir/buffer_interval.h"\n#include "analyzer/ir/graph.h"\n'
        )
        (root / "analyzer/base/b.cc").write_text('#include "profiler/cupti.h"\n')
        (root / "analyzer/loose.cc").write_text("")
        stages = "\n".join(
            f"memplan_stage({s} SOURCES x.cc)" for s in ALLOWED if s not in ("plan",)
        )
        (root / "analyzer/CMakeLists.txt").write_text(
            stages + "\nmemplan_stage(plan SOURCES p.cc\n  DEPS memplan_sim memplan_alloc)\n"
        )
        got = check_includes(root) + check_links(root)
    want = [
        "analyzer/alloc/a.h:2: alloc may not include ir (analyzer/ir/graph.h); "
        "alloc may include: base, ir/buffer_interval.h",
        "analyzer/base/b.cc:1: the analyzer may not include profiler/cupti.h",
        "analyzer/loose.cc: expected in a stage folder, not at analyzer/'s root",
        "analyzer/plan/p.cc:2: plan may not include import (analyzer/import/graph_json.h); "
        "plan may include: base, ir, sim",
        "analyzer/CMakeLists.txt: memplan_plan may not link memplan_alloc",
    ]
    if got != want:
        print("check_layering self-test failed:\n  got:  " + "\n        ".join(got))
        print("  want: " + "\n        ".join(want))
        return 1
    print(f"check_layering self-test: {len(want)} violations caught, word for word")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    errors = check_includes(args.root) + check_links(args.root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layering: {len(errors)} violations")
        return 1
    files = sum(1 for f in (args.root / "analyzer").rglob("*") if f.suffix in (".h", ".cc"))
    print(f"check_layering: {files} files in {len(ALLOWED)} stages, every include allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
