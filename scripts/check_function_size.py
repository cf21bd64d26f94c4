#!/usr/bin/python3
"""No function over LIMIT lines in the C++ tree, but the tables named in EXCEPTIONS.

    scripts/check_function_size.py [--root DIR] [--limit 150] [--list N]
    scripts/check_function_size.py --self-test

A function's length is counted from the line of its name to its closing brace,
lambdas and local classes included. The parser is a brace counter over the code
with comments and string literals blanked: a `{` opened at namespace or class
scope after a parenthesised header is a function body. Exit 1 and one line per
function over the limit (file:line: name, N lines); --list N prints the N longest.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

FOLDERS = ["analyzer", "cli", "profiler", "bench", "fuzz", "kernels"]
LIMIT = 150
# (file, function): why it may be longer. Only data tables written as code.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("analyzer/ir/op_table.cc", "RuleFor"): "the backward rule table: one case per op family",
    ("analyzer/report/memviz/pickle.cc", "Step"): "the pickle opcode table: one case per opcode",
}

_TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"(?P<d>[^(\s]*)\(.*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|'
    r"'(?:\\.|[^'\\\n])*'",
    re.DOTALL,
)
_SCOPE_HEAD = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;()]*$|extern\s+\"C\"\s*$")


def blank(code: str) -> str:
    """Comments and literals replaced by spaces, newlines kept."""
    return _TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


def functions(code: str) -> list[tuple[str, int, int]]:
    """(name, first line, line count) of every function body in `code`."""
    text = blank(code)
    out = []
    stack: list[str] = []  # per open brace: "scope", "func" or "block"
    head_start = 0  # where the text since the last ; { } begins
    func_open: list[tuple[int, str, int]] = []  # (depth, name, first line)
    for i, c in enumerate(text):
        if c == "{":
            head = text[head_start:i]
            in_body = "func" in stack
            if in_body:
                kind = "block"
            elif _SCOPE_HEAD.search(head.strip()) or "(" not in head:
                kind = "scope"
            elif re.search(r"=\s*$", head.strip()) or re.search(r"\)\s*=", head):
                kind = "block"
            else:
                kind = "func"
                paren = head.index("(")
                names = re.findall(r"[~\w:]+(?:operator\s*\S+)?", head[:paren])
                name = names[-1] if names else "?"
                lead = len(head) - len(head.lstrip())
                first = text.count("\n", 0, head_start + lead) + 1
                func_open.append((len(stack), name, first))
            stack.append(kind)
            head_start = i + 1
        elif c == "}":
            if stack:
                kind = stack.pop()
                if kind == "func" and func_open and func_open[-1][0] == len(stack):
                    _, name, first = func_open.pop()
                    last = text.count("\n", 0, i) + 1
                    out.append((name, first, last - first + 1))
            head_start = i + 1
        elif c == ";" and "func" not in stack:
            head_start = i + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            head_start = text.find("\n", i) + 1 or len(text)
    return out


def scan(root: Path) -> list[tuple[str, str, int, int]]:
    rows = []
    for folder in FOLDERS:
        for f in sorted((root / folder).rglob("*")):
            if f.suffix not in (".h", ".cc", ".cu", ".cuh"):
                continue
            rel = f.relative_to(root).as_posix()
            for name, first, n in functions(f.read_text(errors="replace")):
                rows.append((rel, name, first, n))
    return rows


def self_test() -> int:
    code = (
        "namespace a {\nstruct S {\n  int f(int x) {\n    return x;\n  }\n};\n"
        "int g() {\n  auto l = [] {\n    return 1;\n  };\n  /* { */ return l(); // }\n}\n"
        'const char* t = "{";\nint h(int);\n}  // namespace a\n'
    )
    got = functions(code)
    want = [("f", 3, 3), ("g", 7, 6)]
    if got != want:
        print(f"check_function_size self-test failed: got {got}, want {want}")
        return 1
    print("check_function_size self-test: methods, lambdas, comments and literals counted right")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--limit", type=int, default=LIMIT)
    ap.add_argument("--list", type=int, default=0, help="print the N longest functions")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    rows = scan(args.root)
    for rel, name, first, n in sorted(rows, key=lambda r: -r[3])[: args.list]:
        print(f"{n:5d}  {rel}:{first}: {name}")
    over = [r for r in rows if r[3] > args.limit and (r[0], r[1]) not in EXCEPTIONS]
    for rel, name, first, n in over:
        print(f"{rel}:{first}: {name} is {n} lines; at most {args.limit}")
    stale = [k for k in EXCEPTIONS if not any((r[0], r[1]) == k for r in rows)]
    for rel, name in stale:
        print(f"check_function_size: exception {rel}: {name} names no function")
    if over or stale:
        return 1
    print(
        f"check_function_size: {len(rows)} functions, none over {args.limit} lines "
        f"but {len(EXCEPTIONS)} tables"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
