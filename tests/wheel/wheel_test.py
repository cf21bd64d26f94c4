#!/usr/bin/env python3
"""The wheel as a user gets it: a fresh venv, `pip install memplan-*.whl[torch,
vision,hf]`, no checkout on PYTHONPATH, then

* `memplan --version` names the package's and the binary's versions;
* `memplan analyze` through the installed command prints what the checkout's
  build prints (examples/mlp.graph.json), and bad input is exit 2;
* `memplan export` + `memplan analyze` from the shell predict a measured
  eager CPU step (`memplan measure`) within 0.5%;
* a user's script (user_script.py) estimates a torchvision and a
  transformers model within 0.5% of their measured steps and applies a plan
  whose measured step is lower than the unplanned one;
* the installed binary needs no library outside the wheel but glibc's,
  libstdc++, libgcc and zlib (auditwheel copied the rest in).

    wheel_test.py --wheel-dir build/wheelhouse --memplan build/cli/memplan

The install takes the extras' newest releases memplan is tested on
(requirements/torch-newest.txt as pip constraints): what PyPI published
this morning must not decide whether CI passes. Before pip runs, the
dependencies the extras reach are hard-linked from .venv-newest, which
holds those versions (link_deps.py, like uv's link mode): pip then finds
them satisfied, installs memplan, and checks the result; torch with its CUDA
libraries is 5.7 GB, and a second copy filled CI's disk. `--deps-from ''`
makes pip install everything. A failed install prints pip's own error lines
and the free disk space.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from checks import Checks  # noqa: E402

CONSTRAINTS = os.path.join(ROOT, "requirements", "torch-newest.txt")
TOLERANCE = 0.005
# What the manylinux policy lets a wheel take from the system (auditwheel
# grafts everything else into memplan.libs/).
SYSTEM_LIBS = ("linux-vdso", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
               "ld-linux", "libstdc++.so", "libgcc_s.so", "libz.so")


def pip_failure(p, where):
    """pip's stderr without the lines about index folders that this machine
    lacks (they can fill the whole tail), and the free disk space."""
    lines = [x for x in p.stderr.splitlines() if "it is neither a file nor a directory" not in x]
    free = shutil.disk_usage(where).free / 2**30
    return "\n".join([f"exit {p.returncode}, {free:.1f} GiB free in {where}", *lines[-40:]])


def clean_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMPLAN_BINARY")}
    return env


def run(cmd, cwd, timeout=900):
    return subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def rel_error(predicted, measured):
    return (predicted - measured) / measured


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel-dir", required=True)
    ap.add_argument("--memplan", required=True, help="the checkout's build of the binary")
    ap.add_argument("--python", default=os.environ.get("MEMPLAN_VENV_PYTHON", "python3.11"))
    ap.add_argument("--venv", default=None, help="where to make the fresh venv")
    ap.add_argument("--work-dir", default=None,
                    help="where the test's folder goes (default: the system's temp folder); "
                    "CTest puts it in the build folder, on the file system of the checkout's "
                    "venvs, so that --deps-from can hard-link")
    ap.add_argument("--reuse-venv", action="store_true",
                    help="developers: keep --venv if it exists (CI makes a fresh one)")
    ap.add_argument("--deps-from", default=os.path.join(ROOT, ".venv-newest", "bin", "python"),
                    help="a venv's python whose installed dependencies are hard-linked into "
                    "the fresh venv before pip runs (link_deps.py); '' makes pip install "
                    "them all (about 6 GB)")
    args = ap.parse_args()
    args.memplan = os.path.abspath(args.memplan)
    check = Checks()
    wheels = sorted(glob.glob(os.path.join(args.wheel_dir, "memplan-*manylinux*.whl")))
    if not check("a repaired manylinux wheel exists", len(wheels) == 1,
                 "" if len(wheels) == 1 else
                 f"{wheels} in {args.wheel_dir} (scripts/build-wheel.sh makes it)"):
        return 1
    wheel = wheels[0]
    print(f"wheel: {os.path.basename(wheel)}, {os.path.getsize(wheel) / 2**20:.2f} MiB")
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memplan-wheel-", dir=args.work_dir) as tmp:
        venv = os.path.abspath(args.venv or os.path.join(tmp, "venv"))
        py, memplan = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "memplan")
        reuse = args.reuse_venv and os.path.exists(memplan)
        if not reuse:
            shutil.rmtree(venv, ignore_errors=True)
            p = run([args.python, "-m", "venv", venv], tmp)
            if not check("fresh venv", p.returncode == 0, p.stderr[-500:]):
                return 1
            if args.deps_from and not link_checks(check, args.deps_from, wheel, venv, tmp):
                return 1
        t = time.time()
        p = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 *(["--force-reinstall", "--no-deps"] if reuse else []),
                 "-c", CONSTRAINTS, wheel + "[torch,vision,hf]"], tmp, timeout=1800)
        if not check(f"pip install WHEEL[torch,vision,hf] -c {os.path.relpath(CONSTRAINTS, ROOT)}"
                     f" ({time.time() - t:.0f} s)",
                     p.returncode == 0, "" if p.returncode == 0 else pip_failure(p, tmp)):
            return 1
        version_checks(check, py, tmp)
        bare_checks(check, args.python, wheel, tmp)
        cli_checks(check, memplan, args.memplan, tmp)
        library_checks(check, venv)
        export_checks(check, memplan, tmp)
        script_checks(check, py, venv, tmp)
    return check.summary()


def link_checks(check, deps_python, wheel, venv, tmp):
    """Hard-links the extras' dependencies from `deps_python`'s venv into the
    fresh one (link_deps.py), so that pip installs memplan and only what that
    venv lacks."""
    site = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
    p = run([deps_python, os.path.join(HERE, "link_deps.py"), wheel, "--extras",
             "torch,vision,hf", "--into", site[0] if site else venv], tmp)
    ok = p.returncode == 0 and len(site) == 1
    r = json.loads(p.stdout) if ok else {}
    return check(f"the extras' dependencies hard-linked from {deps_python}: "
                 f"{len(r.get('linked', []))} distributions, {r.get('files', 0)} files, "
                 f"{r.get('bytes', 0) / 2**30:.2f} GiB "
                 f"({r.get('copied_bytes', 0) / 2**30:.2f} GiB copied: another file system); "
                 f"left to pip: {r.get('left')}",
                 ok and bool(r["linked"]), "" if ok else p.stderr[-1500:] or p.stdout[-500:])


def version_checks(check, py, tmp):
    """The venv holds the constraint file's versions and no broken
    requirement."""
    p = run([py, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"], tmp)
    have = {d["name"].lower(): d["version"] for d in json.loads(p.stdout or "[]")}
    want = dict(line.split("==") for line in open(CONSTRAINTS).read().splitlines()
                if line and not line.startswith("#"))
    wrong = {k: have.get(k.lower()) for k, v in want.items() if have.get(k.lower()) != v}
    check(f"the venv has {os.path.relpath(CONSTRAINTS, ROOT)}'s versions", not wrong,
          f"wanted {want}, have {wrong}")
    p = run([py, "-m", "pip", "check", "--disable-pip-version-check"], tmp)
    check("pip check: no broken requirements", p.returncode == 0, p.stdout[-800:])


def bare_checks(check, python, wheel, tmp):
    """The wheel without extras: the analyzer works, the torch side says
    which extra to install."""
    venv = os.path.join(tmp, "bare")
    p = run([python, "-m", "venv", venv], tmp)
    if not check("fresh venv for the wheel without extras", p.returncode == 0, p.stderr[-500:]):
        return
    py, memplan = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "memplan")
    p = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], tmp)
    if not check("pip install WHEEL (no extras)", p.returncode == 0,
                 "" if p.returncode == 0 else pip_failure(p, tmp)):
        return
    p = run([memplan, "analyze", os.path.join(ROOT, "examples", "mlp.graph.json"), "-q"], tmp)
    check("no extras: memplan analyze runs without torch", p.returncode == 0, p.stderr[-500:])
    p = run([memplan, "export", "models:mlp", "--batch", "2", "-o", "g.json"], tmp)
    check("no extras: memplan export is exit 2 naming the extra",
          p.returncode == 2 and p.stderr == "memplan export: needs PyTorch: pip install "
          "'memplan[torch]'\n", f"{p.returncode} {p.stderr!r}")
    p = run([py, "-c", "import memplan.torch"], tmp)
    check("no extras: import memplan.torch names the extra", p.returncode != 0 and
          "ImportError: memplan.torch needs PyTorch: pip install 'memplan[torch]'" in p.stderr,
          p.stderr[-300:])


def cli_checks(check, memplan, built, tmp):
    p = run([memplan, "--version"], tmp)
    lines = p.stdout.splitlines()
    check("memplan --version names the package and the binary",
          p.returncode == 0 and len(lines) == 2 and lines[0].startswith("memplan ")
          and "(Python package)" in lines[0] and lines[1].startswith("binary: memplan"),
          repr(p.stdout + p.stderr))
    graph = os.path.join(ROOT, "examples", "mlp.graph.json")
    p, want = run([memplan, "analyze", graph], tmp), run([built, "analyze", graph], tmp)
    check("memplan analyze through the installed command prints what the build prints",
          p.returncode == 0 and p.stdout == want.stdout and p.stdout, p.stderr[-500:])
    p = run([memplan, "analyze", os.path.join(tmp, "missing.json")], tmp)
    check("bad input through the installed command: exit 2 naming the file",
          p.returncode == 2 and "missing.json" in p.stderr, f"{p.returncode} {p.stderr!r}")
    p = run([memplan, "--help"], tmp)
    check("memplan --help lists the Python commands too",
          p.returncode == 0 and "export" in p.stdout and "measure" in p.stdout
          and "analyze" in p.stdout, p.stdout[-400:])


def library_checks(check, venv):
    binaries = glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "memplan", "bin",
                                      "memplan"))
    if not check("the binary is inside the installed package", len(binaries) == 1, binaries):
        return
    p = subprocess.run(["ldd", binaries[0]], capture_output=True, text=True, timeout=60)
    outside = []
    for line in p.stdout.splitlines():
        name = os.path.basename(line.strip().split(" ")[0])
        path = line.split("=>")[-1].strip().split(" (")[0] if "=>" in line else name
        if "not found" in line:
            outside.append(line.strip())
        elif not name.startswith(SYSTEM_LIBS) and "memplan.libs" not in path:
            outside.append(line.strip())
    check("the binary links nothing outside the wheel but glibc, libstdc++, libgcc and zlib",
          p.returncode == 0 and not outside, "; ".join(outside) or p.stderr)


def export_checks(check, memplan, tmp):
    graph, report = os.path.join(tmp, "cnn.graph.json"), os.path.join(tmp, "cnn.report.json")
    p = run([memplan, "export", "models:cnn_small", "--batch", "4", "--static", "-o", graph,
             "-q"], tmp)
    if not check("memplan export models:cnn_small (installed command)", p.returncode == 0,
                 p.stderr[-800:]):
        return
    p = run([memplan, "analyze", graph, "--json", report, "-q"], tmp)
    if not check("memplan analyze of the export", p.returncode == 0, p.stderr[-500:]):
        return
    m = run([memplan, "measure", "models:cnn_small", "--batch", "4", "-q"], tmp)
    if not check("memplan measure models:cnn_small", m.returncode == 0, m.stderr[-800:]):
        return
    predicted = json.load(open(report))["peak_bytes"]
    measured = json.loads(m.stdout)["peak_bytes"]
    e = rel_error(predicted, measured)
    check(f"export + analyze within 0.5% of the measured step ({100 * e:+.4f}%)",
          abs(e) <= TOLERANCE, f"predicted {predicted}, measured {measured}")
    p = run([memplan, "export", "torchvision:no_such_net", "--batch", "2", "-o", graph], tmp)
    check("memplan export of a model that cannot be built: exit 2 naming it",
          p.returncode == 2 and p.stderr.strip().endswith(
              "memplan export: torchvision:no_such_net: ValueError: torchvision.models has no "
              "no_such_net"), f"{p.returncode} {p.stderr[-300:]!r}")


def script_checks(check, py, venv, tmp):
    script = os.path.join(tmp, "user_script.py")
    shutil.copy(os.path.join(HERE, "user_script.py"), script)
    p = run([py, script], tmp)
    if not check("the user's script runs", p.returncode == 0, p.stderr[-2000:]):
        return
    r = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"torch {r['torch']}, transformers {r['transformers']}")
    installed = os.path.realpath(r["memplan_file"])
    check("memplan.torch is the installed package, not a checkout",
          installed.startswith(os.path.realpath(venv) + os.sep) and "site-packages" in installed
          and not installed.startswith(os.path.join(ROOT, "python") + os.sep), r["memplan_file"])
    for name in ("resnet18", "gpt2"):
        e = rel_error(r[name]["predicted"], r[name]["measured"])
        check(f"estimate({name}) within 0.5% of the measured step ({100 * e:+.4f}%)",
              abs(e) <= TOLERANCE, json.dumps(r[name]))
    plan = r["plan"]
    check("plan at 96% of resnet18's peak fits and names modules",
          plan["fits"] and plan["peak"] <= plan["budget"] and plan["modules"], json.dumps(plan))
    check("plan.apply wraps the plan's modules", plan["wrapped"] == plan["modules"],
          json.dumps(plan))
    e = rel_error(plan["peak"], plan["measured"])
    check(f"the applied plan's measured step is its predicted peak within 0.3% ({100 * e:+.4f}%)",
          abs(e) <= 0.003, json.dumps(plan))
    measured_base = r["resnet18"]["measured"]
    check("the applied plan lowers the measured step below the unplanned one "
          f"({plan['measured']} < {measured_base} B)", plan["measured"] < measured_base)
    check("fits() bounds the peak: fits(peak) and not fits(peak - 1)",
          r["fits"] == [True, False], r["fits"])


if __name__ == "__main__":
    sys.exit(main())
