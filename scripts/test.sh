#!/usr/bin/env bash
# Installs the build and test dependencies, builds everything and runs every
# test through CTest. The optional parts (the CUDA profiler, the ONNX
# importer) are required here: a machine without them fails instead of
# testing less.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_BUILD_TESTS=ON \
  -DMEMPLAN_WITH_CUDA=ON -DMEMPLAN_WITH_ONNX=ON >/dev/null
cmake --build build -j2
# The wheel (pyproject.toml) from the same build folder and options: only the
# link runs. tests/wheel installs it into a fresh venv (ctest -L wheel).
MEMPLAN_WHEEL_BUILD_DIR=build \
  MEMPLAN_WHEEL_CMAKE_ARGS="MEMPLAN_BUILD_TESTS=ON MEMPLAN_WITH_CUDA=ON MEMPLAN_WITH_ONNX=ON" \
  scripts/build-wheel.sh build/wheelhouse
echo "Optional parts built:"
build/cli/memplan doctor --no-device
(cd build && ctest --output-on-failure -j2)

# Sanitizer stage: the doctest suite and the fuzz regression replays (ctest -L
# unit) built with ASan + UBSan at -O1 (CMakePresets.json "asan", build-asan/).
# MEMPLAN_SANITIZERS=0 skips it.
if [[ "${MEMPLAN_SANITIZERS:-1}" != 0 ]]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j2
  ctest --preset asan -j2
fi
