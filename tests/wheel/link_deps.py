#!/usr/bin/env python3
"""Hard-links into a fresh venv the distributions that `pip install
WHEEL[extras]` needs, taken from a venv that already has them installed (what
uv's link mode does). The fresh venv then holds the very files pip would have
unpacked, at no disk cost; `pip install` afterwards finds them satisfied and
installs memplan and whatever was not linked.

    link_deps.py WHEEL --extras torch,vision,hf --into VENV_SITE_PACKAGES

Run it with the source venv's python (it reads that venv's metadata and needs
`packaging`). A requirement is linked only when the source has a version that
satisfies it, with the requirement's own markers and extras; the rest is left
to pip. Files outside site-packages (console scripts, whose shebang names the
source venv) are not linked. Prints one JSON line: what was linked, what was
left, files and bytes, and the bytes copied because the venvs lie on different
file systems (make the fresh venv beside the source to avoid that).

Why: torch 2.15.0 with its CUDA libraries is 5.7 GB installed, and a second
copy filled CI's disk (stop 47's CI: "No space left on device").
"""
import argparse
import errno
import json
import os
import shutil
import sys
import zipfile
from email.parser import Parser
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def wheel_requirements(wheel):
    """Requires-Dist of the wheel's METADATA."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(name).decode()
    return Parser().parsestr(text).get_all("Requires-Dist") or []


def applies(req, extras):
    """Whether the requirement's marker holds for some of the extras asked
    for (or none)."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in ("", *extras))


def closure(top, extras, installed):
    """Distributions of the source venv that the requirements `top` (asked
    with `extras`) reach, and the requirements it cannot satisfy."""
    linked, left = {}, set()  # linked: name -> (dist, the extras followed)
    todo = [(Requirement(r), tuple(extras)) for r in top]
    while todo:
        req, asked = todo.pop()
        if not applies(req, asked):
            continue
        name = canonicalize_name(req.name)
        dist = installed.get(name)
        if dist is None or not req.specifier.contains(dist.version, prereleases=True):
            left.add(str(req))
            continue
        followed = linked[name][1] if name in linked else None
        if followed is not None and set(req.extras) <= followed:
            continue
        linked[name] = (dist, (followed or set()) | set(req.extras))
        todo += [(Requirement(r), tuple(req.extras)) for r in dist.requires or []]
    return [d for d, _ in linked.values()], sorted(left)


def link_file(src, dst):
    """Hard link, else a copy (another file system). Returns (bytes, copied)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
        copied = False
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        shutil.copy2(src, dst)
        copied = True
    return os.path.getsize(dst), copied


def link_dist(dist, site, into):
    """Links the dist's files (its RECORD) that lie in `site`; returns (files,
    bytes, bytes copied instead of linked)."""
    files = nbytes = copied = 0
    for f in dist.files or []:
        src = os.path.realpath(dist.locate_file(f))
        rel = os.path.relpath(src, site)
        if rel.startswith(os.pardir) or not os.path.isfile(src):
            continue
        dst = os.path.join(into, rel)
        if os.path.lexists(dst):
            continue
        size, was_copied = link_file(src, dst)
        nbytes += size
        copied += size if was_copied else 0
        files += 1
    return files, nbytes, copied


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel")
    ap.add_argument("--extras", default="")
    ap.add_argument("--into", required=True, help="the fresh venv's site-packages")
    args = ap.parse_args()
    site = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    site = os.path.realpath(site)
    installed = {canonicalize_name(d.metadata["Name"]): d
                 for d in metadata.distributions(path=[site])}
    extras = [e for e in args.extras.split(",") if e]
    own = {"memplan"}
    top = [r for r in wheel_requirements(args.wheel)
           if canonicalize_name(Requirement(r).name) not in own]
    dists, left = closure(top, extras, installed)
    files = nbytes = copied = 0
    for d in dists:
        n, b, c = link_dist(d, site, os.path.realpath(args.into))
        files, nbytes, copied = files + n, nbytes + b, copied + c
    print(json.dumps({"linked": sorted(f"{d.metadata['Name']}=={d.version}" for d in dists),
                      "left": left, "files": files, "bytes": nbytes, "copied_bytes": copied,
                      "source": site}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
