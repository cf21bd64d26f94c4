#!/usr/bin/python3
"""The portable memplan for the GPU machine (scripts/build-portable.sh): it
builds the CUDA backend, CUPTI collection and kernels itself (so a machine
with nvcc but no CUPTI fails here), links nothing but glibc (`ldd`), stays
under the 64 MiB that travels to the GPU machine, and loads CUPTI at run time
from where `memplan doctor` says (a bad MEMPLAN_CUPTI_LIBRARY is named in the
error, word for word).

Usage: portable_build_test.py --build-dir DIR   (the binary is DIR/cli/memplan)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import Checks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLIBC = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
         "librt.so.1", "ld-linux-x86-64.so.2"}
LIMIT = 64 << 20


def finish(c):
    return c.summary()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    c = Checks()
    if not shutil.which("nvcc"):
        c("nvcc is on PATH (CI must build the CUDA profiler)", False)
        return finish(c)
    r = subprocess.run([os.path.join(ROOT, "scripts", "build-portable.sh"), a.build_dir],
                       capture_output=True, text=True, timeout=1100)  # CTest's limit: 1200 s
    if not c.check(r.returncode == 0, "scripts/build-portable.sh builds",
                   r.stdout[-3000:] + r.stderr[-3000:]):
        return finish(c)
    binary = os.path.join(a.build_dir, "cli", "memplan")
    c.check(r.stdout.strip().splitlines()[-1] == os.path.abspath(binary),
            "the script prints the binary's path last", r.stdout[-500:])
    size = os.path.getsize(binary)
    c.check(size < LIMIT, f"the binary is under 64 MiB ({size} bytes)")
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=60).stdout
    libs = {line.split()[0].rsplit("/", 1)[-1] for line in ldd.splitlines() if line.strip()}
    c.check(libs <= GLIBC, "ldd: nothing but glibc", ldd)
    c.check("libstdc++.so.6" not in libs and "libfmt.so.9" not in libs
            and not any("cupti" in x or "cudart" in x for x in libs),
            "libstdc++, fmt, cudart and CUPTI are not needed at load time", ldd)

    doctor_json = os.path.join(a.build_dir, "doctor.json")
    d = subprocess.run([binary, "doctor", "--no-device", "--json", doctor_json],
                       capture_output=True, text=True, timeout=60)
    c.check(d.returncode == 0, "memplan doctor runs", d.stderr)
    with open(doctor_json) as f:
        doc = json.load(f)
    c.check(doc["format"] == "memplan.doctor/1" and doc["cuda_built"] is True
            and doc["onnx_built"] is False, "built with CUDA, without ONNX", doc)
    c.check(doc["cupti"]["library"] is not None and doc["cupti"]["error"] is None
            and doc["cupti"]["version"] // 10000 == doc["cupti"]["built_version"] // 10000,
            "CUPTI is found and loaded at run time (this machine's toolkit)", doc["cupti"])

    env = dict(os.environ, MEMPLAN_CUPTI_LIBRARY="/nonexistent/libcupti.so.13")
    d = subprocess.run([binary, "doctor", "--no-device"], capture_output=True, text=True, env=env,
                       timeout=60)
    want = ("  cupti     CUPTI unavailable: no usable libcupti.so.13 (/nonexistent/libcupti.so.13: "
            "/nonexistent/libcupti.so.13: cannot open shared object file: No such file or "
            "directory); set MEMPLAN_CUPTI_LIBRARY to its path")
    c.check(want in d.stdout.splitlines(), "a bad MEMPLAN_CUPTI_LIBRARY is named", d.stdout)
    return finish(c)


if __name__ == "__main__":
    sys.exit(main())
