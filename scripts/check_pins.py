#!/usr/bin/env python3
"""Exit 0 when every `name==version` pin of a requirements file is installed
at that version in this Python, else print the first mismatch and exit 1.

    python scripts/check_pins.py requirements/torch-newest.txt
"""
import importlib.metadata as metadata
import sys


def main(path: str) -> int:
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if "==" not in line:
            continue
        name, version = (s.strip() for s in line.split("==", 1))
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have is None or have.split("+")[0] != version:
            print(f"{path}: {name}=={version} wanted, {have} installed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
