#!/usr/bin/env bash
# Installs what memplan needs on Debian 12: the build (always) and the test
# dependencies (with --test). Uses sudo when not root.
set -euo pipefail
packages=(build-essential cmake ninja-build nlohmann-json3-dev libcli11-dev libfmt-dev doctest-dev
          libonnx-dev libprotobuf-dev python3-venv)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(python3 python3-jsonschema python3-torch python3-torchvision python3-networkx python3-onnx chromium)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The PyTorch 2.x exporter tests run in a venv at the repository root (.venv):
# torch 2.14.1 + torchvision 0.29.1 (wheels for Python 3.11, a CUDA build that
# runs on the CPU) and transformers. Debian's python3-torch (1.13) above is
# the other tested version.
if [[ "${1:-}" == "--test" ]]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv"
  want='import torch, torchvision, transformers, ruff; assert torch.__version__.startswith("2.14.1"), torch.__version__'
  if ! "$venv/bin/python" -c "$want" >/dev/null 2>&1; then
    py="${MEMPLAN_VENV_PYTHON:-python3.11}"
    command -v "$py" >/dev/null || { echo "install-deps: $py not found (the torch 2.14.1 wheels are for Python 3.11; set MEMPLAN_VENV_PYTHON)" >&2; exit 1; }
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check torch==2.14.1 torchvision==0.29.1 \
      transformers==4.57.6 ruff==0.17.6 2>&1 | grep -v "^WARNING: Location" || true
    "$venv/bin/python" -c "$want"
  fi
fi
