#!/usr/bin/env bash
# Installs what memplan needs on Debian 12: the build (always) and the test
# dependencies (with --test). Uses sudo when not root.
set -euo pipefail
packages=(build-essential cmake ninja-build nlohmann-json3-dev libcli11-dev libfmt-dev doctest-dev
          libonnx-dev libprotobuf-dev)
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
