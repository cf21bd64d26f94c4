#!/usr/bin/env bash
# Builds one memplan binary for the GPU machine, which has a driver but none
# of Debian's -dev packages: libstdc++/libgcc static, fmt header-only, the
# CUDA runtime static, CUPTI loaded at run time from that machine's own
# libcupti.so.13 (profiler/cupti_api.h), no ONNX. Needs nvcc and CUPTI's
# headers here (fails without them).
#
# Usage: scripts/build-portable.sh [BUILD_DIR]   (default build-portable)
# Prints the binary's path last; `ldd` of it lists only glibc's libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-portable}
cuda_root=()
[ -x /usr/local/cuda/bin/nvcc ] && cuda_root=(-DCUDAToolkit_ROOT=/usr/local/cuda)
# Unity build (CMake batches of 8 sources): half the compile time of one
# file at a time (49 s vs 110 s for memplan on 2 idle cores).
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
  -DMEMPLAN_BUILD_TESTS=OFF -DMEMPLAN_PORTABLE=ON -DMEMPLAN_WITH_CUDA=ON -DMEMPLAN_WITH_ONNX=OFF "${cuda_root[@]}" >/dev/null
cmake --build "$dir" -j"${JOBS:-2}" --target memplan >&2
strip "$dir/cli/memplan"
echo "$(cd "$dir" && pwd)/cli/memplan"
