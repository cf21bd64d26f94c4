#!/usr/bin/env bash
# Llama-shaped models at scale (issue 17, "At scale"): Llama-2 7B, 13B and 70B
# shapes exported with --device meta (cached in $LLAMA_SCALE_WORK, default
# /tmp/llama_scale: the 70B export takes minutes), then per world size 8..512
# one rank's FSDP step against 80 GB: peak without and with memplan's plans,
# the largest micro-batch that fits, DeepSpeed's ZeRO-3 formula (re-implemented)
# and accelerate's model-state estimates, and the wall time of every memplan call.
# Writes bench/results/llama_scale.json, bench/results/llama_scale.md and a
# README section (/tmp/llama_scale_readme.md unless --readme says otherwise).
#
#   bench/llama_scale.sh [--memplan PATH] [--models 7b,13b] [--worlds 8,64] [...]
#
# Needs the repository's .venv (torch, transformers) and a built memplan
# (default build/cli/memplan). accelerate (for its estimate-memory figures)
# goes into $PEERS_SITE (default ~/.cache/memplan-peers-site, shared with
# bench/peers.sh) with pip --target --no-deps, so the shared .venv is left as
# it is. DeepSpeed's formula is re-implemented in bench/llama_scale.py (deepspeed is
# not installed; its function is not run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
SITE="${PEERS_SITE:-$HOME/.cache/memplan-peers-site}"
if ! PYTHONPATH="$SITE" "$PY" -c "import accelerate, psutil" 2>/dev/null; then
  echo "installing accelerate, psutil into $SITE" >&2
  mkdir -p "$SITE"
  "$PY" -m pip install --quiet --disable-pip-version-check --target "$SITE" --no-deps \
    accelerate psutil 2>&1 | grep -v "is ignored" >&2 || true
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1
cd "$ROOT"
exec "$PY" bench/llama_scale.py --work "${LLAMA_SCALE_WORK:-/tmp/llama_scale}" "$@"
