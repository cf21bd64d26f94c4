#!/usr/bin/env bash
# Installs the dependencies, builds memplan's wheel, installs it into a venv
# (build/quickstart-venv) and runs the installed `memplan` command on the
# bundled DenseNet-like example under each gradient accumulation mode (extra
# arguments go to every `memplan analyze`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build-wheel.sh build/wheelhouse >/dev/null
venv=build/quickstart-venv
[[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall build/wheelhouse/memplan-*.whl \
  2>&1 | grep -v "^WARNING: Location" || true
for mode in inplace out_of_place deferred; do
  "$venv/bin/memplan" analyze examples/densenet_toy.graph.json --accumulation "$mode" --top 5 "$@"
  echo
done
echo "memplan is installed in $venv (source $venv/bin/activate); for the PyTorch side:"
echo "  pip install \"$(ls build/wheelhouse/memplan-*.whl)[torch]\""
