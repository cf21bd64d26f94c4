#!/usr/bin/env bash
# Installs the build and test dependencies, builds everything and runs every
# test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_BUILD_TESTS=ON >/dev/null
cmake --build build -j2
cd build && ctest --output-on-failure -j2
