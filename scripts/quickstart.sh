#!/usr/bin/env bash
# Installs the dependencies, builds memplan and analyzes the bundled
# DenseNet-like example under each gradient accumulation mode (extra
# arguments go to every `memplan analyze`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_BUILD_TESTS=OFF >/dev/null
cmake --build build -j2 --target memplan
for mode in inplace out_of_place deferred; do
  build/cli/memplan analyze examples/densenet_toy.graph.json --accumulation "$mode" --top 5 "$@"
  echo
done
