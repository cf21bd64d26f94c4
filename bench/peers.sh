#!/usr/bin/env bash
# memplan beside PyTorch's memory tools (issue 16, "peers"): torch.compile's
# activation_memory_budget, PyTorch's automatic SAC (SACEstimator + sac_ilp),
# MemTracker, accelerate's formula and DeepSpeed's formula, re-implemented
# (deepspeed is not installed), on the same CPU steps.
# Writes bench/results/peers.json and bench/results/peers.md.
#
#   bench/peers.sh [--memplan PATH] [--quick] [other bench/peers.py options]
#
# --quick: the GPT only, 3 budgets, aot_eager (a few minutes); the full run
# (3 models, 6 budgets, inductor on the GPT too) takes about 20-25 minutes on
# 2 shared cores. Needs the repository's .venv (torch, torchvision,
# transformers) and a built memplan (default build/cli/memplan). The peers'
# own dependencies (pulp and pwlf for sac_ilp, scipy and psutil under them,
# accelerate) go into $PEERS_SITE (default ~/.cache/memplan-peers-site) with
# pip --target --no-deps, so the shared .venv is left as it is.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
SITE="${PEERS_SITE:-$HOME/.cache/memplan-peers-site}"
PKGS=(pulp pwlf scipy psutil accelerate)

if ! PYTHONPATH="$SITE" "$PY" -c "import pulp, pwlf, scipy, psutil, accelerate" 2>/dev/null; then
  echo "installing ${PKGS[*]} into $SITE" >&2
  mkdir -p "$SITE"
  "$PY" -m pip install --quiet --disable-pip-version-check --target "$SITE" --no-deps \
    "${PKGS[@]}" 2>&1 | grep -v "is ignored" >&2 || true
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1
cd "$ROOT"
exec "$PY" bench/peers.py "$@"
