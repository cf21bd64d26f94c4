#!/usr/bin/env bash
# memplan's planner against an exact optimum: a Checkmate-style MILP (bench/checkmate_milp.py,
# HiGHS) over the repository's small example graphs and generated ones, at 90/70/50% of the
# baseline peak and at the least peak memplan reaches (tight). Each budget is solved twice:
# cold (no start, HiGHS defaults: what HiGHS finds on its own) and warm-started with
# memplan's own program; only proven optima and proven (dual) bounds count as references.
# Writes bench/results/checkmate.json (raw) and bench/results/checkmate.md (tables and the
# model's assumptions).
#
#   bench/checkmate.sh [--memplan PATH] [--export-tool PATH] [--time-limit S] [--substages N]
#                      [--out DIR] [--work DIR] [--note TEXT]
#
# --work DIR keeps the per-graph results, exports, plans and verify reports there (default:
# a temporary folder, removed at the end); --note adds a line to the report's header.
#
# Needs: memplan and memplan_milp_export built (cmake --build BUILD --target memplan
# memplan_milp_export), a Python with highspy (PYTHON, else .venv/bin/python, else python3;
# .venv/bin/pip install -r requirements/bench.txt).
# Deterministic but for the HiGHS time limit (rows that hit it depend on the machine and
# its load, recorded in the header). About 35-40 minutes on 2 cores with the defaults
# (25 solves of each kind, most of the larger ones stopped by the 60 s limit).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MEMPLAN="$ROOT/build/cli/memplan"
EXPORT=""
TIME_LIMIT=60
SUBSTAGES=auto
OUT="$ROOT/bench/results"
KEEP=""
NOTE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --memplan) MEMPLAN="$2"; shift 2 ;;
    --export-tool) EXPORT="$2"; shift 2 ;;
    --time-limit) TIME_LIMIT="$2"; shift 2 ;;
    --substages) SUBSTAGES="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --work) KEEP="$2"; shift 2 ;;
    --note) NOTE="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "checkmate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
MEMPLAN=$(cd "$(dirname "$MEMPLAN")" && pwd)/$(basename "$MEMPLAN")
if [[ -z "$EXPORT" ]]; then
  EXPORT="$(dirname "$(dirname "$MEMPLAN")")/bench/memplan_milp_export"
fi
for exe in "$MEMPLAN" "$EXPORT"; do
  if [[ ! -x "$exe" ]]; then
    echo "checkmate.sh: not built: $exe (cmake --build BUILD --target memplan memplan_milp_export)" >&2
    exit 2
  fi
done
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]] && "$ROOT/.venv/bin/python" -c 'import highspy' 2>/dev/null; then
    PY="$ROOT/.venv/bin/python"
  else
    PY=python3
  fi
fi
if ! "$PY" -c 'import highspy' 2>/dev/null; then
  echo "checkmate.sh: $PY has no highspy (pip install -r requirements/bench.txt)" >&2
  exit 2
fi

if [[ -n "$KEEP" ]]; then
  mkdir -p "$KEEP"
  WORK=$(cd "$KEEP" && pwd)
else
  WORK=$(mktemp -d /tmp/memplan_checkmate.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$OUT" "$WORK/graphs"

# The examples that have something to plan (densenet_toy and the MLPs peak at the end of
# the backward, where recomputation cannot help), then generated graphs of sizes whose
# MILP HiGHS handles in about a minute.
GRAPHS=("$ROOT/examples/cnn_small.joint.graph.json" "$ROOT/examples/gpt_tiny.graph.json")
for spec in chain:50 resnet:50 transformer:50; do
  shape=${spec%%:*}
  n=${spec##*:}
  python3 "$ROOT/bench/gen_graph.py" --ops "$n" --shape "$shape" -o "$WORK/graphs/${shape}${n}.graph.json"
  GRAPHS+=("$WORK/graphs/${shape}${n}.graph.json")
done

start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
results=()
for g in "${GRAPHS[@]}"; do
  name=$(basename "$g" .json)
  name=${name%.graph}
  mkdir -p "$WORK/$name"
  "$PY" "$ROOT/bench/checkmate_milp.py" "$g" --memplan "$MEMPLAN" --export-tool "$EXPORT" \
    --time-limit "$TIME_LIMIT" --substages "$SUBSTAGES" --budget-pct 90,70,50,tight \
    --workdir "$WORK/$name" --json "$WORK/$name.result.json"
  results+=("$WORK/$name.result.json")
done
total=$(( $(date +%s) - start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)

commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="$commit (with uncommitted changes)"
fi
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
machine="$(uname -sm), ${cpu:-unknown cpu}, $(nproc) cores"
meta=$("$PY" - "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$machine" "$commit" "$MEMPLAN" \
  "$("$MEMPLAN" --version 2>/dev/null || echo unknown)" "$TIME_LIMIT" "$SUBSTAGES" "$total" \
  "load average (1/5/15 min) $load_start at the start, $load_end at the end" "$NOTE" <<'EOF'
import json, sys
d, m, c, exe, ver, tl, sub, tot, load, note = sys.argv[1:]
meta = {"date": d, "machine": m, "commit": c, "memplan": exe, "memplan_version": ver,
        "time_limit_s": float(tl), "substages": sub, "objective": "time (roofline, h100)",
        "solves": "cold (no start, HiGHS defaults) and warm (memplan's program as the start)",
        "total_s": int(tot), "load": load}
if note:
    meta["note"] = note
print(json.dumps(meta))
EOF
)
"$PY" "$ROOT/bench/checkmate_milp.py" render "${results[@]}" --meta "$meta" \
  --out-json "$OUT/checkmate.json" --out-md "$OUT/checkmate.md"
echo "wrote $OUT/checkmate.json and $OUT/checkmate.md (${total} s)"
