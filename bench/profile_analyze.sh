#!/usr/bin/env bash
# Where does `memplan analyze` spend its time? Sampling profile with perf (call graphs
# via DWARF unwinding) of a Release build with -g -fno-omit-frame-pointer.
#
#   bench/profile_analyze.sh [--ops N] [--shape chain|resnet|transformer] [--out DIR]
#
# Default: 100000-op transformer graph. Builds build-bench-prof at the repo root, writes
# DIR/perf.data (default ${TMPDIR:-/tmp}/memplan-prof) and prints the breakdown from
# bench/perf_breakdown.py (phases, allocator and hash-table shares, top symbols).
# Needs perf (linux-perf) and kernel.perf_event_paranoid <= 2. For heap peaks use
#   valgrind --tool=massif build-bench-prof/cli/memplan analyze G --json /dev/null -q
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
OPS=100000; SHAPE=transformer; OUT="${TMPDIR:-/tmp}/memplan-prof"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ops) OPS="$2"; shift 2 ;;
    --shape) SHAPE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "profile_analyze.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
BUILD="$REPO/build-bench-prof"
cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_BUILD_TESTS=OFF \
  "-DCMAKE_CXX_FLAGS=-g -fno-omit-frame-pointer" >&2
ninja -C "$BUILD" -j2 memplan >&2
mkdir -p "$OUT"
G="$OUT/${SHAPE}_${OPS}.graph.json"
/usr/bin/python3 "$BENCH_DIR/gen_graph.py" --ops "$OPS" --shape "$SHAPE" -o "$G"
perf record -F 1999 --call-graph dwarf,16384 -o "$OUT/perf.data" -- \
  "$BUILD/cli/memplan" analyze "$G" --json /dev/null -q >&2
perf script -i "$OUT/perf.data" -F ip,sym --no-inline 2>/dev/null |
  /usr/bin/python3 "$BENCH_DIR/perf_breakdown.py"
