#!/usr/bin/env bash
# Per-rank memory of one distributed training step (DDP, ZeRO-1, FSDP2, FSDP1,
# pipelining; torch.distributed with gloo on localhost processes) measured on
# this machine's CPUs, beside `memplan analyze --parallel ...` (issue 17).
# Writes bench/results/parallel.json (every number) and parallel.md (tables).
#
#   bench/parallel_gloo.sh                 # everything (~15 minutes on 2 cores)
#   bench/parallel_gloo.sh --quick         # world size 2, one variant each (~5 minutes)
#   bench/parallel_gloo.sh --predict-only  # redo only memplan's predictions against
#                                          # the measurements in parallel.json
# Environment: PYTHON (default .venv/bin/python), MEMPLAN (default
# build/cli/memplan), WORK (exported graphs, <model>.graph.json; default
# $TMPDIR/memplan_parallel_gloo, reused when present).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
MEMPLAN=${MEMPLAN:-build/cli/memplan}
export WORK=${WORK:-${TMPDIR:-/tmp}/memplan_parallel_gloo}
mkdir -p "$WORK"
# The profiler (kineto) logs two lines per session on stderr; keep the rest.
"$PYTHON" bench/parallel_gloo.py --memplan "$MEMPLAN" --work "$WORK" "$@" \
  2> >(grep --line-buffered -v 'USDT:\|gpuGetDeviceCount\|Memory block of unknown size' >&2)
