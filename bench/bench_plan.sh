#!/usr/bin/env bash
# Planner benchmark: memplan's checkpoint planner against the checkpoint sets users write
# by hand (save-all, sqrt, block depth 1 and 2: analyzer/plan/baselines.h), with
# memplan_plan_bench (bench/plan_bench.cc), on examples/*.graph.json and on synthetic
# chains and transformers from bench/gen_graph.py.
#
#   bench/bench_plan.sh [--sizes "1000 10000 100000"] [--shapes "chain transformer"]
#                       [--timeout-s 300] [--build-dir DIR] [--work DIR]
#
#   --sizes      synthetic graph sizes in forward ops (default 1000 10000 100000)
#   --timeout-s  wall limit per synthetic graph of 100k ops or more (default 300); a run
#                past it is stopped and recorded as a timeout with the rows it finished
#   --build-dir  Release build (default: build-plan-bench at the repo root, configured
#                and built here with -DMEMPLAN_BUILD_TESTS=OFF)
#   --work       where generated graphs and raw results go (default:
#                ${TMPDIR:-/tmp}/memplan-plan-bench)
#
# Budgets: 90%, 70%, 50% of each graph's baseline peak, then the lowest peak any
# hand-written set reaches ("=NAME"). Planner options are the defaults (objective time,
# device h100, accumulation inplace).
# Writes bench/results/plan_compare.json and bench/results/plan_compare.md.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
PY=/usr/bin/python3
BUILD_DIR="$REPO/build-plan-bench"
WORK="${TMPDIR:-/tmp}/memplan-plan-bench"
SIZES="1000 10000 100000"
SHAPES="chain transformer"
TIMEOUT_S=300

while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) SIZES="$2"; shift 2 ;;
    --shapes) SHAPES="$2"; shift 2 ;;
    --timeout-s) TIMEOUT_S="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "bench_plan.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

log() { echo "[bench] $*" >&2; }

# --- build (retry: the tree may be mid-edit) -----------------------------------------
build() {
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMEMPLAN_BUILD_TESTS=OFF >&2 || return 1
  fi
  ninja -C "$BUILD_DIR" -j2 memplan_plan_bench >&2
}
for attempt in 1 2 3; do
  if build; then break; fi
  [[ $attempt == 3 ]] && { log "build failed 3 times"; exit 1; }
  log "build failed (attempt $attempt); retrying in 60 s"; sleep 60
done
BENCH="$BUILD_DIR/bench/memplan_plan_bench"
BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
CXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
CXX_VERSION="$("$CXX" --version | head -1)"
[[ "$BUILD_TYPE" == Release ]] || log "warning: $BUILD_DIR is a $BUILD_TYPE build"
# The commit the binary was built from (the tree may move on while the benchmark runs).
GIT_COMMIT="$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
GIT_DIRTY=0
[[ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]] && GIT_DIRTY=1

mkdir -p "$WORK" "$BENCH_DIR/results"
RUNS="$WORK/runs.jsonl"  # one line per memplan_plan_bench run
: > "$RUNS"

# run NAME TIMEOUT GRAPH...: one memplan_plan_bench run, its JSON and how it ended.
run() {
  local name="$1" limit="$2"; shift 2
  local out="$WORK/$name.json" rc=0 t0 wall
  rm -f "$out"
  log "$name: memplan_plan_bench $*"
  t0=$(date +%s.%N)
  if [[ "$limit" == 0 ]]; then
    "$BENCH" --json "$out" "$@" | tee "$WORK/$name.txt" >&2 || rc=$?
  else
    timeout --signal=TERM "$limit" "$BENCH" --json "$out" "$@" | tee "$WORK/$name.txt" >&2 || rc=$?
  fi
  wall=$(LC_ALL=C printf '%.3f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  [[ $rc == 124 ]] && log "$name: stopped after ${limit} s (timeout)"
  printf '{"name": "%s", "rc": %s, "timeout_s": %s, "wall_s": %s, "json": "%s"}\n' \
    "$name" "$rc" "$limit" "$wall" "$out" >> "$RUNS"
}

# Examples, as given (relative paths, so the results do not name this machine).
(cd "$REPO" && run examples 0 examples/*.graph.json)

for shape in $SHAPES; do
  for n in $SIZES; do
    g="$WORK/${shape}_${n}.graph.json"
    [[ -f "$g" ]] || "$PY" "$BENCH_DIR/gen_graph.py" --ops "$n" --shape "$shape" -o "$g"
    limit=0; [[ $n -ge 100000 ]] && limit=$TIMEOUT_S
    run "${shape}_${n}" "$limit" "$g"
  done
done

# --- summary -----------------------------------------------------------------------
export RUNS BUILD_TYPE CXX_VERSION REPO WORK GIT_COMMIT GIT_DIRTY
"$PY" - "$BENCH_DIR/results" <<'PYEOF'
import datetime, json, os, platform, sys

out = sys.argv[1]
work = os.environ["WORK"]

def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"

graphs, runs = [], []
for line in open(os.environ["RUNS"]):
    if not line.strip():
        continue
    r = json.loads(line)
    doc = {"graphs": []}
    if os.path.exists(r["json"]):
        try:
            doc = json.load(open(r["json"]))
        except ValueError:
            pass  # stopped mid-write
    for g in doc["graphs"]:
        if g["graph"].startswith(work + "/"):
            g["graph"] = "gen:" + os.path.basename(g["graph"])  # bench/gen_graph.py output
        g["timed_out"] = r["rc"] == 124 and not g.get("complete", False)
        graphs.append(g)
    runs.append({"name": r["name"], "rc": r["rc"], "wall_s": float(r["wall_s"]),
                 "timeout_s": int(r["timeout_s"]) or None, "timed_out": r["rc"] == 124,
                 "graphs_reported": len(doc["graphs"])})

result = {
    "benchmark": "memplan plan vs hand-written checkpoint sets, bench/bench_plan.sh",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
    },
    "build": {"type": os.environ["BUILD_TYPE"], "compiler": os.environ["CXX_VERSION"]},
    "git": {"commit": os.environ["GIT_COMMIT"], "dirty": os.environ["GIT_DIRTY"] == "1",
            "note": "HEAD when the benchmark was built; dirty: tracked files differed from it"},
    "planner_options": {"objective": "time", "device": "h100", "accumulation": "inplace",
                        "algorithm": "auto"},
    "never_worse_rule": "at each budget, for every hand-written set that fits, memplan's plan "
                        "must fit and cost no more; worse_than_baseline flags a row that breaks it",
    "runs": runs,
    "graphs": graphs,
}
with open(os.path.join(out, "plan_compare.json"), "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")

MIB = 1024 * 1024

def g3(x):
    return "%.4g" % x

def base(g, name):
    return next((b for b in g["baselines"] if b["name"] == name), None)

def base_cell(g, name, row):
    b = base(g, name)
    if b is None:
        return "n/a"
    if row["baseline_fits"].get(name):
        return g3(b["recompute_cost"])
    return "%s (no fit: %.0f%%)" % (g3(b["recompute_cost"]), b["peak_pct"])

def short(g):
    return os.path.basename(g["graph"]).replace(".graph.json", "").replace("gen:", "")

m = result["machine"]
lines = [
    "# memplan plan vs hand-written checkpoint sets",
    "",
    "%s, %d CPUs (%s), %s build (%s), commit %s%s." % (
        result["date"], m["nproc"], m["cpu_model"], result["build"]["type"],
        result["build"]["compiler"], (result["git"]["commit"] or "?")[:12],
        " + local changes" if result["git"]["dirty"] else ""),
    "",
    "`bench/bench_plan.sh` (`memplan_plan_bench`). Costs are recompute cost in µs "
    "(objective time, device h100, roofline estimates); the budget is a percentage of the "
    "baseline program's peak, or `=NAME`: the lowest peak a hand-written set reaches. "
    "Hand-written sets (`analyzer/plan/baselines.h`): save-all keeps every candidate; sqrt is "
    "Chen et al.'s ceil(sqrt(n)) segments of forward ops, keeping each segment's last "
    "outputs; block1 / block2 keep the tensors that cross a block of ops grouped by the "
    "first 1 / 2 components of their scope (torch.utils.checkpoint per module). A "
    "baseline's cost is shown with `(no fit: P%)` (its peak as % of baseline) when it "
    "does not fit the budget. **worse** marks a row where some baseline fits and memplan "
    "does not fit or costs more.",
    "",
    "| graph | budget % | memplan cost | sqrt cost | block1 cost | block2 cost | save-all fits? | memplan plan time s | worse? |",
    "|---|---:|---:|---:|---:|---:|:---:|---:|:---:|",
]
worse = []
for g in graphs:
    for r in g["rows"]:
        mp = r["memplan"]
        pct = "%d" % r["budget_pct"] if r["budget"].endswith("%") else "%s (%.1f)" % (r["budget"], r["budget_pct"])
        cost = g3(mp["recompute_cost"]) if mp["feasible"] else "no fit (min %.1f%%)" % (100.0 * mp["min_peak_bytes"] / g["baseline_peak_bytes"])
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %.3f | %s |" % (
            short(g), pct, cost, base_cell(g, "sqrt", r), base_cell(g, "block1", r),
            base_cell(g, "block2", r), "yes" if r["baseline_fits"].get("save-all") else "no",
            mp["plan_s"], "**worse** than " + ", ".join(r["worse_than"]) if r["worse_than_baseline"] else ""))
        if r["worse_than_baseline"]:
            worse.append((g, r))
    if g.get("timed_out"):
        lines.append("| %s | (rest) | timeout | | | | | > %s | |" % (short(g), next(
            (x["timeout_s"] for x in runs if x["timed_out"]), "?")))
for r in runs:
    if r["timed_out"] and r["graphs_reported"] == 0:
        lines.append("| %s | all | timeout before the first row | | | | | > %d | |" % (r["name"], r["timeout_s"]))
lines += ["", "## Hand-written sets: peak (% of baseline) and recompute cost", "",
          "| graph | baseline peak MiB | floor MiB | save-all | sqrt | block1 | block2 |",
          "|---|---:|---:|---:|---:|---:|---:|"]
for g in graphs:
    cells = []
    for name in ("save-all", "sqrt", "block1", "block2"):
        b = base(g, name)
        cells.append("n/a" if b is None else "%.1f%%, %s" % (b["peak_pct"], g3(b["recompute_cost"])))
    lines.append("| %s | %.2f | %.2f | %s |" % (short(g), g["baseline_peak_bytes"] / MIB,
                                              g["floor_bytes"] / MIB, " | ".join(cells)))
lines += ["", "## Rows where memplan is worse than a hand-written set", ""]
if not worse:
    lines.append("None.")
for g, r in worse:
    mp = r["memplan"]
    for name in r["worse_than"]:
        b = base(g, name)
        lines.append("- %s at budget %s (%.2f MiB): %s reaches %.2f MiB at cost %s; memplan %s" % (
            short(g), r["budget"], r["budget_bytes"] / MIB, name, b["peak_bytes"] / MIB,
            g3(b["recompute_cost"]),
            ("fits at %.2f MiB but costs %s" % (mp["peak_bytes"] / MIB, g3(mp["recompute_cost"])))
            if mp["feasible"] else ("does not fit: its lowest peak is %.2f MiB (%s, %d programs)" % (
                mp["min_peak_bytes"] / MIB, mp["algorithm"], mp["evaluations"]))))
lines += ["", "## Plan time vs graph size (synthetic graphs)", "",
          "| graph | forward ops | joint ops | candidates | budget | algorithm | programs | plan time s |",
          "|---|---:|---:|---:|---|---|---:|---:|"]
for g in graphs:
    if not g["graph"].startswith("gen:"):
        continue
    for r in g["rows"]:
        mp = r["memplan"]
        lines.append("| %s | %d | %d | %d | %s | %s | %d | %.3f |" % (
            short(g), g["forward_ops"], g["ops"], g["candidates"], r["budget"], mp["algorithm"],
            mp["evaluations"], mp["plan_s"]))
    if g.get("timed_out"):
        lines.append("| %s | %d | %d | %d | (rest) | | | timeout |" % (
            short(g), g["forward_ops"], g["ops"], g["candidates"]))
for r in runs:
    if r["timed_out"] and r["graphs_reported"] == 0:
        lines.append("| %s | | | | all | | | timeout (> %d s, before the first row) |" % (r["name"], r["timeout_s"]))
lines.append("")
with open(os.path.join(out, "plan_compare.md"), "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
PYEOF
