#!/usr/bin/env python3
"""Runs the command blocks of README.md and docs/*.md marked as checked and compares
what they print with what the page shows (CTest: docs.commands). --write regenerates
the blocks from what the commands print now.

Syntax (docs/design.md, "Shown output is produced, not pasted"):

    <!-- check [grep=REGEX] [head=N] [timeout=S] [needs=onnx] -->
    ```console
    $ memplan plan examples/gpt_tiny.graph.json --budget 110MiB
    ...the output, exactly...
    ```

- A line starting with `$ memplan ` is a command (a trailing backslash continues it on
  the next line); the lines after it, up to the next command, are its output (stdout
  and stderr together). A command that exits non-zero shows `(exit N)` as its last line.
- `needs=onnx` skips the block (and says so) when this memplan was built without the
  optional ONNX importer.
- `grep=REGEX` keeps only the output lines REGEX matches (re.search); `head=N` keeps the
  first N lines and shows `...` in place of the rest.
- `{~}` in a shown line stands for one run of non-space characters that may differ from
  run to run (timings, addresses); in such a line a run of spaces matches any run of
  spaces, so a column may move with the value. Every other character must be printed
  as shown. Durations (`0.03 s`, `12.5 ms`, `3 us`) must be marked `{~}`: an unmarked
  one is an error, as it would fail on the next machine.
- A ```console block without `<!-- check ... -->` right before it must be preceded by
  `<!-- nocheck: REASON -->` (output that needs a GPU, torch, a model download...).

The commands run without a shell (shlex-split; `memplan` is replaced by --memplan), in a
scratch directory that links the repository's top-level entries, so relative paths such
as examples/gpt_tiny.graph.json work; an output flag (-o, --json, ...) must name a plain
file, so written files stay out of the tree. The blocks of one page share that directory,
in page order. Each command has a timeout.

Exit status: 0 all blocks match; 1 a block differs (a diff is printed) or a rule is
broken; 2 bad usage.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_RE = re.compile(r"^<!--\s*check(?P<opts>(\s+[^>]*?)?)\s*-->\s*$")
NOCHECK_RE = re.compile(r"^<!--\s*nocheck:\s*\S.*-->\s*$")
FENCE_OPEN = "```console"
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
WILD = "{~}"
# A duration as memplan prints one: a number, optional space, a unit of time.
DURATION_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:s|ms|us|µs|ns)\b")
DEFAULT_TIMEOUT = 120
OUTPUT_FLAGS = ("-o", "--out", "--output", "--json", "--trace", "--html", "--emit-costs")
DIFF = "\0"  # marks a problem --write fixes (the block differs), as opposed to a broken rule


def pages(root):
    out = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    for dirpath, _, files in os.walk(docs):
        out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".md")]
    return [p for p in out if os.path.exists(p)]


def parse_opts(text, where):
    opts = {"grep": None, "head": None, "timeout": DEFAULT_TIMEOUT, "needs": None}
    for tok in shlex.split(text or ""):
        if "=" not in tok:
            raise ValueError(f"{where}: check option {tok!r} is not NAME=VALUE")
        k, v = tok.split("=", 1)
        if k == "grep":
            opts["grep"] = re.compile(v)
        elif k in ("head", "timeout"):
            opts[k] = int(v)
        elif k == "needs" and v == "onnx":
            opts[k] = v
        else:
            raise ValueError(f"{where}: unknown check option {tok!r} "
                             "(grep=, head=, timeout=, needs=onnx)")
    return opts


def find_blocks(lines, path):
    """Yields (kind, start, end, opts): start/end index the fence lines; kind is 'check',
    'nocheck' or 'bare' (a console block with neither marker)."""
    i = 0
    while i < len(lines):
        fence = FENCE_RE.match(lines[i])
        if fence and lines[i].strip() != FENCE_OPEN:
            # another fenced block (```sh, ````markdown...): skip it whole, so that an
            # example of the syntax inside it is not taken for a block to run
            close = fence.group(1)
            i += 1
            while i < len(lines) and lines[i].strip() != close:
                i += 1
            i += 1
            continue
        if lines[i].strip() == FENCE_OPEN:
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            if j == len(lines):
                raise ValueError(f"{path}:{i + 1}: console block never closed")
            prev = lines[i - 1] if i > 0 else ""
            m = CHECK_RE.match(prev)
            if m:
                yield "check", i, j, parse_opts(m.group("opts"), f"{path}:{i}")
            elif NOCHECK_RE.match(prev):
                yield "nocheck", i, j, None
            else:
                yield "bare", i, j, None
            i = j + 1
        else:
            i += 1


def split_commands(body, where):
    """[(command text, [shown output lines])] from a block's lines."""
    cmds = []
    i = 0
    while i < len(body):
        line = body[i]
        if line.startswith("$ "):
            text, raw = line[2:], [line]
            while text.endswith("\\"):
                i += 1
                if i == len(body):
                    raise ValueError(f"{where}: command ends with a backslash")
                text = text[:-1].rstrip() + " " + body[i].strip()
                raw.append(body[i])
            cmds.append([text, [], raw])
        elif not cmds:
            raise ValueError(f"{where}: output before the first `$ memplan` command")
        else:
            cmds[-1][1].append(line)
        i += 1
    return cmds


def scratch_dir(root):
    d = tempfile.mkdtemp(prefix="memplan_docs_")
    for name in os.listdir(root):
        if name.startswith(".") or name == "build":
            continue
        os.symlink(os.path.join(root, name), os.path.join(d, name))
    return d


def run_command(text, memplan, cwd, opts, where):
    argv = shlex.split(text)
    if not argv or argv[0] != "memplan":
        raise ValueError(f"{where}: checked commands start with `memplan`, not {text!r}")
    for flag, value in zip(argv, argv[1:]):
        if flag in OUTPUT_FLAGS and "/" in value:
            raise ValueError(f"{where}: `{text}` writes {value!r}: checked commands write "
                             "into the scratch directory (a plain file name), never the tree")
    argv[0] = memplan
    try:
        p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=opts["timeout"], env=dict(os.environ, NO_COLOR="1"))
    except subprocess.TimeoutExpired:
        return [f"(timed out after {opts['timeout']} s)"], True
    out = p.stdout.decode("utf-8", "replace").splitlines()
    out = [line.rstrip() for line in out]
    if opts["grep"] is not None:
        out = [line for line in out if opts["grep"].search(line)]
    if opts["head"] is not None and len(out) > opts["head"]:
        out = out[:opts["head"]] + ["..."]
    if p.returncode != 0:
        out.append(f"(exit {p.returncode})")
    return out, False


def line_regex(shown):
    parts = []
    for piece in re.split(r"(\{~\}| +)", shown):
        if piece == WILD:
            parts.append(r"\S+")
        elif piece and piece.strip() == "":
            parts.append(r" +")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def line_matches(shown, actual):
    if WILD not in shown:
        return shown.rstrip() == actual
    return line_regex(shown.rstrip()).fullmatch(actual) is not None


def remark(old, new):
    """The line --write writes for printed line `new` where the page showed `old`: `old`
    itself when it still matches; else `new` with the {~} marks of `old` kept on the
    whitespace-separated tokens they still match (so a changed figure elsewhere in the
    line does not drop a timing's mark)."""
    if old is None or WILD not in old:
        return new
    if line_matches(old, new):
        return old
    old_parts, new_parts = re.split(r"(\s+)", old.rstrip()), re.split(r"(\s+)", new)
    if len(old_parts) != len(new_parts):
        return new
    return "".join(o if WILD in o and line_regex(o).fullmatch(n) else n
                   for o, n in zip(old_parts, new_parts))


def unmarked_durations(shown):
    return [m.group(0) for m in DURATION_RE.finditer(shown)]


def features(memplan):
    """What this memplan was built with, from `memplan doctor` (the optional ONNX importer)."""
    try:
        p = subprocess.run([memplan, "doctor"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
    except subprocess.TimeoutExpired:
        return set()
    text = p.stdout.decode("utf-8", "replace")
    return {"onnx"} if re.search(r"^\s*onnx\s+built in", text, re.M) else set()


def check_page(path, memplan, write, rel, built):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    problems, n_checked = [], 0
    new_lines = list(lines)
    offset = 0
    cwd = None
    try:
        for kind, start, end, opts in list(find_blocks(lines, rel)):
            where = f"{rel}:{start + 1}"
            if kind == "bare":
                problems.append(f"{where}: console block with neither <!-- check --> nor "
                                "<!-- nocheck: REASON --> before it")
                continue
            if kind == "nocheck":
                continue
            if opts["needs"] and opts["needs"] not in built:
                print(f"{where}: skipped: this memplan was built without {opts['needs']}")
                continue
            n_checked += 1
            if cwd is None:
                cwd = scratch_dir(ROOT)
            body = lines[start + 1:end]
            regenerated = []
            for cmd, shown, head in split_commands(body, where):
                actual, timed_out = run_command(cmd, memplan, cwd, opts, where)
                if timed_out:
                    problems.append(f"{where}: `{cmd}` timed out after {opts['timeout']} s")
                ok = len(shown) == len(actual) and all(
                    line_matches(s, a) for s, a in zip(shown, actual))
                if not ok:
                    problems.append(DIFF + diff(where, cmd, shown, actual))
                kept = [remark(shown[k] if k < len(shown) else None, a)
                        for k, a in enumerate(actual)]
                for s in (kept if write else shown):
                    bad = unmarked_durations(s.replace(WILD, ""))
                    if bad:
                        problems.append(f"{where}: `{cmd}`: duration {bad[0]!r} shown without "
                                        f"{WILD} (timings vary; mark it): {s!r}")
                regenerated += head + kept
            if write:
                new_lines[start + 1 + offset:end + offset] = regenerated
                offset += len(regenerated) - (end - start - 1)
    finally:
        if cwd is not None:
            for name in os.listdir(cwd):
                p = os.path.join(cwd, name)
                if os.path.islink(p) or os.path.isfile(p):
                    os.unlink(p)
                else:
                    shutil.rmtree(p, ignore_errors=True)
            os.rmdir(cwd)
    if write and new_lines != lines:
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(new_lines))
    return problems, n_checked


def diff(where, cmd, shown, actual):
    lines = [f"{where}: the output of `{cmd}` differs from the page "
             f"({len(shown)} lines shown, {len(actual)} printed):"]
    for k in range(max(len(shown), len(actual))):
        s = shown[k] if k < len(shown) else "<none>"
        a = actual[k] if k < len(actual) else "<none>"
        if k >= len(shown) or k >= len(actual) or not line_matches(s, a):
            lines.append(f"    line {k + 1}: page    {s!r}")
            lines.append(f"    line {k + 1}: printed {a!r}")
    return "\n".join(lines)


LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's heading anchors of a markdown page."""
    out = set()
    with open(path, encoding="utf-8") as f:
        in_fence = False
        for line in f:
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
            if in_fence or not line.startswith("#"):
                continue
            text = line.lstrip("#").strip().lower()
            text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
            out.add(text.replace(" ", "-"))
    return out


def check_links(paths):
    """Every relative link of the pages points at a file that exists (and, with #anchor,
    at a heading of that page); README.md links every page under docs/."""
    problems = []
    for path in paths:
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in LINK_RE.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            line = text.count("\n", 0, m.start()) + 1
            if not os.path.exists(dest):
                problems.append(f"{rel}:{line}: link to {target!r}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel}:{line}: link to {target!r}: no such heading")
    readme = os.path.join(ROOT, "README.md")
    if readme in paths:
        with open(readme, encoding="utf-8") as f:
            linked = {os.path.normpath(os.path.join(ROOT, m.group(1).partition("#")[0]))
                      for m in LINK_RE.finditer(f.read())}
        for p in pages(ROOT):
            if p != readme and p not in linked:
                problems.append(f"README.md: does not link {os.path.relpath(p, ROOT)}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"),
                    help="the memplan binary (CTest passes $<TARGET_FILE:memplan>)")
    ap.add_argument("--write", action="store_true",
                    help="rewrite every checked block with what its commands print now")
    ap.add_argument("pages", nargs="*", help="pages to check (default: README.md, docs/**)")
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    if not os.access(memplan, os.X_OK):
        print(f"docs_check: error: {args.memplan} is not an executable", file=sys.stderr)
        return 2
    paths = [os.path.abspath(p) for p in args.pages] or pages(ROOT)
    failed, total, built = 0, 0, features(memplan)
    for path in paths:
        rel = os.path.relpath(path, ROOT)
        try:
            problems, n = check_page(path, memplan, args.write, rel, built)
        except ValueError as e:
            problems, n = [str(e)], 0
        total += n
        for p in problems:
            print(p.lstrip(DIFF))
        fixed = [p for p in problems if p.startswith(DIFF)] if args.write else []
        failed += len(problems) - len(fixed)
        print(f"{rel}: {n} checked blocks, {len(problems)} problems")
    links = check_links(paths)
    for p in links:
        print(p)
    failed += len(links)
    verb = "rewritten" if args.write else "checked"
    print(f"docs_check: {total} blocks {verb}, {len(links)} link problems, {failed} problems")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
