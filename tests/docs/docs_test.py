#!/usr/bin/env python3
"""Self-test of the docs checkers (CTest docs.selftest): scripts/docs_check.py and
scripts/docs_tables.py must pass a page whose shown output and tables are what the
commands and bench/results/*.json give, and fail one where a number was changed by hand,
a duration is not marked as varying, a console block has no marker, or a table marker
is unknown or unclosed. --write must repair a stale page and keep the `{~}` marks.

Usage: docs_test.py --memplan PATH"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from checks import Checks  # noqa: E402

PY = sys.executable
CHECK = os.path.join(ROOT, "scripts", "docs_check.py")
TABLES = os.path.join(ROOT, "scripts", "docs_tables.py")
TIMEOUT = 300


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=TIMEOUT, cwd=ROOT)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    check = Checks()

    def ok(name, cond, detail=""):
        return check.check(cond, name, detail)
    with tempfile.TemporaryDirectory(prefix="memplan_docs_test_") as d:
        def docs_check(*pages, write_mode=False):
            return run([PY, CHECK, "--memplan", memplan] + (["--write"] if write_mode else [])
                       + list(pages))

        # A page whose block is empty: --write fills it, then it checks clean.
        page = write(d, "page.md", "# t\n\n<!-- check -->\n```console\n"
                     "$ memplan analyze examples/gpt_tiny.graph.json --top 2\n```\n")
        rc, out = docs_check(page)
        ok("an empty checked block fails", rc == 1, out)
        rc, out = docs_check(page, write_mode=True)
        ok("--write fills it", rc == 0, out)
        text = open(page, encoding="utf-8").read()
        ok("--write wrote the output", "  peak      151.45 MiB (158806024 bytes)" in text, text)
        rc, out = docs_check(page)
        ok("the written page checks clean", rc == 0, out)

        # A number changed by hand in a checked block.
        write(d, "page.md", text.replace("151.45 MiB (158806024", "151.46 MiB (158806024", 1))
        rc, out = docs_check(page)
        ok("a hand-edited number in a checked block fails", rc == 1 and "151.46" in out, out)
        # ... and a changed space in a line without {~}.
        write(d, "page.md", text.replace("  peak      151.45", "  peak     151.45", 1))
        rc, out = docs_check(page)
        ok("a changed column in a line without {~} fails", rc == 1, out)

        # {~}: a marked value may differ, an unmarked one may not.
        marked = text.replace("151.45 MiB (158806024 bytes) at step 70",
                              "{~} MiB (158806024 bytes) at step {~}", 1)
        write(d, "page.md", marked)
        rc, out = docs_check(page)
        ok("{~} matches the value it stands for", rc == 0, out)
        write(d, "page.md", marked.replace("(158806024 bytes)", "(158806025 bytes)", 1))
        rc, out = docs_check(page)
        ok("{~} does not excuse the rest of the line", rc == 1, out)
        rc, out = docs_check(page, write_mode=True)
        fixed = open(page, encoding="utf-8").read()
        ok("--write repairs the line and keeps its {~}",
           rc == 0 and "{~} MiB (158806024 bytes) at step {~}" in fixed, fixed)

        # Durations must be marked.
        timings = write(d, "timings.md", "<!-- check -->\n```console\n"
                        "$ memplan analyze examples/mlp.graph.json --timings -q\n```\n")
        rc, out = docs_check(timings, write_mode=True)
        ok("--write refuses to leave a duration unmarked", rc == 1 and "{~}" in out, out)
        shown = open(timings, encoding="utf-8").read()
        write(d, "timings.md", re.sub(r"\d+\.\d+ s\b", "{~} s", shown))
        rc, out = docs_check(timings)
        ok("durations marked {~} pass", rc == 0, out)

        # Console blocks need a marker; nocheck says why.
        bare = write(d, "bare.md", "```console\n$ memplan --version\nmemplan 9\n```\n")
        rc, out = docs_check(bare)
        ok("a console block with no marker fails", rc == 1 and "neither" in out, out)
        nocheck = write(d, "nocheck.md", "<!-- nocheck: needs a GPU -->\n```console\n"
                        "$ memplan profile x --backend cuda\n```\n```sh\n$ anything\n```\n")
        rc, out = docs_check(nocheck)
        ok("nocheck blocks and sh blocks are not run", rc == 0, out)
        other = write(d, "other.md", "<!-- check -->\n```console\n$ rm -rf /\n```\n")
        rc, out = docs_check(other)
        ok("a command other than memplan is refused", rc == 1 and "start with" in out, out)
        into = write(d, "into.md", "<!-- check -->\n```console\n$ memplan lower "
                     "examples/mlp.graph.json -o examples/x.json\n```\n")
        rc, out = docs_check(into)
        ok("a command writing into the tree is refused", rc == 1 and "never the tree" in out
           and not os.path.exists(os.path.join(ROOT, "examples", "x.json")), out)
        exit3 = write(d, "exit.md", "<!-- check grep=\"^  budget\" -->\n```console\n$ memplan "
                      "plan examples/mlp.graph.json --budget 1MiB\n```\n")
        docs_check(exit3, write_mode=True)
        text3 = open(exit3, encoding="utf-8").read()
        ok("a non-zero exit is shown as (exit N)", "(exit 3)" in text3, text3)

        # Links: files and headings must exist.
        links = write(d, "links.md", "[a](no_such_file.md) "
                      f"[b]({os.path.join(ROOT, 'README.md')}#no-such-heading) "
                      f"[c]({os.path.join(ROOT, 'docs', 'design.md')}#reliability)\n")
        rc, out = docs_check(links)
        ok("a link to a missing file or heading fails",
           rc == 1 and "no such file" in out and "no such heading" in out
           and "#reliability" not in out, out)

        # Tables.
        rc, out = run([PY, TABLES, "--render", "plan_compare"])
        ok("plan_compare renders", rc == 0 and "| gpt_tiny |" in out, out)
        table = out.rstrip("\n")
        tpage = write(d, "table.md", f"x\n<!-- table: plan_compare -->\n{table}\n<!-- /table -->\n")
        rc, out = run([PY, TABLES, "--check", tpage])
        ok("a table equal to its JSON passes", rc == 0, out)
        edited = table.replace("| gpt_tiny | 6.889 |", "| gpt_tiny | 6.890 |")
        ok("(the edit applies)", edited != table)
        write(d, "table.md", f"x\n<!-- table: plan_compare -->\n{edited}\n<!-- /table -->\n")
        rc, out = run([PY, TABLES, "--check", tpage])
        ok("a hand-edited figure in a table fails", rc == 1 and "6.890" in out, out)
        rc, out = run([PY, TABLES, "--write", tpage])
        ok("--write regenerates the table", rc == 0 and
              "| gpt_tiny | 6.889 |" in open(tpage, encoding="utf-8").read(), out)
        write(d, "table.md", "<!-- table: no_such -->\n<!-- /table -->\n")
        rc, out = run([PY, TABLES, "--check", tpage])
        ok("an unknown generator fails", rc == 1 and "unknown" in out, out)
        write(d, "table.md", "<!-- table: plan_compare -->\n| a |\n")
        rc, out = run([PY, TABLES, "--check", tpage])
        ok("an unclosed table fails", rc == 1 and "not closed" in out, out)
        rc, out = run([PY, TABLES, "--list"])
        names = [line.split()[0] for line in out.splitlines() if line.strip()]
        for name in names:
            rc, out = run([PY, TABLES, "--render", name])
            check(f"generator {name} renders", rc == 0 and out.startswith("|"), out[-300:])
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
