#!/usr/bin/env bash
# Installs what memplan needs on Debian 12: the build (always) and the test
# dependencies (with --test). Uses sudo when not root.
#   install-deps.sh [--test [--no-venvs]]   --no-venvs: the packages, not the torch venvs
#   install-deps.sh --venvs                 only the torch venvs (scripts/test.sh
#                                           makes them while the build runs)
set -euo pipefail
apt=1 test=0 venvs=0
case "${1:-}" in
  --test) test=1 venvs=1; [[ "${2:-}" == --no-venvs ]] && venvs=0 ;;
  --venvs) apt=0 venvs=1 ;;
  "") ;;
  *) echo "install-deps: unknown argument $1" >&2; exit 2 ;;
esac
packages=(build-essential cmake ninja-build nlohmann-json3-dev libcli11-dev libfmt-dev doctest-dev
          libonnx-dev libprotobuf-dev python3-venv)
if ((test)); then
  packages+=(python3 python3-jsonschema python3-torch python3-torchvision python3-networkx python3-onnx chromium)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((apt && ${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The PyTorch exporter tests run in two venvs at the repository root, one per
# end of the supported range (requirements/torch-*.txt, wheels for Python
# 3.11; torch is a CUDA build that runs on the CPU): .venv has the oldest
# releases memplan.torch is tested on and ruff, .venv-newest the newest.
if ((venvs)); then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  py="${MEMPLAN_VENV_PYTHON:-python3.11}"
  # A venv takes about 6 GiB (torch with its CUDA libraries, triton) and pip
  # unpacks wheels beside it: a full disk fails here, before pip starts.
  need_gib=${MEMPLAN_VENV_MIN_FREE_GIB:-7}
  check_space() {  # check_space DIR
    local free_kib
    free_kib=$(df -Pk "$root" | awk 'NR == 2 { print $4 }')
    if ((free_kib < need_gib * 1024 * 1024)); then
      echo "install-deps: making $1 needs about $need_gib GiB free; $root has" \
        "$(awk -v k="$free_kib" 'BEGIN { printf "%.1f", k / 1048576 }') GiB" >&2
      exit 1
    fi
  }
  make_venv() {  # make_venv DIR REQUIREMENTS
    local venv="$root/$1" req="$root/requirements/$2"
    local check="$root/scripts/check_pins.py"
    if ! "$venv/bin/python" "$check" "$req" 2>/dev/null; then
      check_space "$1"
      command -v "$py" >/dev/null || { echo "install-deps: $py not found (the torch wheels are for Python 3.11; set MEMPLAN_VENV_PYTHON)" >&2; exit 1; }
      [[ -x "$venv/bin/pip" ]] || "$py" -m venv "$venv"
      "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" 2>&1 \
        | grep -v "^WARNING: Location" || true
      "$venv/bin/python" "$check" "$req"
    fi
  }
  make_venv .venv torch-oldest.txt
  make_venv .venv-newest torch-newest.txt
fi
