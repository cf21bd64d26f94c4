#!/usr/bin/env bash
# GPU check of `memplan profile`: builds Release with CUDA, profiles every
# bundled example (baseline, and a plan at 70% of the baseline peak) on the
# cuda backend with both allocators, measures CUPTI's overhead (the same run
# with and without --no-cupti), and writes one JSON of predicted vs measured
# per case.
#
# Usage: profiler/gpu_check.sh [OUT_DIR]     (default: $OUT, else gpu_check_out)
# Env:   BUILD_DIR (default build-gpu), JOBS (default nproc), DEADLINE_S (stop
#        starting cases after this many seconds; default 480), REPEAT (default 3).
#
# Writes OUT_DIR/gpu_check.json (summary), OUT_DIR/cases/*.json (each report),
# OUT_DIR/logs/*.txt (stdout/stderr of every command), OUT_DIR/trace_*.json.
# Exit 0 when the build worked and every case ran; 1 otherwise (the JSON and
# logs say what failed). Runs from any directory; needs cmake, ninja, nvcc,
# and Debian's nlohmann-json3-dev libcli11-dev libfmt-dev.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${1:-${OUT:-gpu_check_out}}
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
DEADLINE_S=${DEADLINE_S:-480}
REPEAT=${REPEAT:-3}
mkdir -p "$OUT_DIR/cases" "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
INDEX="$OUT_DIR/cases.tsv"
: >"$INDEX"
START=$SECONDS
log() { echo "[gpu_check $((SECONDS - START))s] $*" >&2; }

# --- environment -----------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname 2>/dev/null)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1
  command -v nvcc >/dev/null && nvcc --version | tail -n 2
  [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc --version | tail -n 2
  cmake --version | head -n 1
  g++ --version | head -n 1
  git -C "$ROOT" rev-parse HEAD 2>/dev/null
} >"$OUT_DIR/logs/environment.txt" 2>&1
for header in /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp /usr/include/fmt/format.h; do
  [ -e "$header" ] || log "warning: $header is missing (apt-get install nlohmann-json3-dev libcli11-dev libfmt-dev)"
done

# --- build -------------------------------------------------------------------
log "configuring $BUILD_DIR (Release, MEMPLAN_WITH_CUDA=ON)"
CUDA_HINT=()
[ -x /usr/local/cuda/bin/nvcc ] && CUDA_HINT=(-DCUDAToolkit_ROOT=/usr/local/cuda)
if ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMEMPLAN_WITH_CUDA=ON -DMEMPLAN_BUILD_TESTS=OFF "${CUDA_HINT[@]}" \
  >"$OUT_DIR/logs/configure.txt" 2>&1; then
  log "configure failed; see logs/configure.txt"
  tail -n 30 "$OUT_DIR/logs/configure.txt" >&2
  echo '{"format": "memplan.gpu_check/1", "error": "configure failed (logs/configure.txt)"}' \
    >"$OUT_DIR/gpu_check.json"
  exit 1
fi
log "building with $JOBS jobs"
if ! cmake --build "$BUILD_DIR" -j "$JOBS" --target memplan >"$OUT_DIR/logs/build.txt" 2>&1; then
  log "build failed; see logs/build.txt"
  tail -n 30 "$OUT_DIR/logs/build.txt" >&2
  echo '{"format": "memplan.gpu_check/1", "error": "build failed (logs/build.txt)"}' \
    >"$OUT_DIR/gpu_check.json"
  exit 1
fi
MEMPLAN="$ROOT/$BUILD_DIR/cli/memplan"
[ -x "$MEMPLAN" ] || MEMPLAN="$BUILD_DIR/cli/memplan"
log "built $MEMPLAN in $((SECONDS - START)) s"

# --- cases -------------------------------------------------------------------
# run_case NAME GRAPH PLAN|- ALLOCATOR CUPTI(on|off) REPEAT [extra args]
# Appends "name<TAB>graph<TAB>program<TAB>allocator<TAB>cupti<TAB>repeat<TAB>rc" to the index.
FAILED=0
run_case() {
  local name=$1 graph=$2 plan=$3 allocator=$4 cupti=$5 repeat=$6
  shift 6
  if ((SECONDS - START > DEADLINE_S)); then
    log "skipping $name: past the ${DEADLINE_S}s deadline"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$graph" "$plan" "$allocator" "$cupti" \
      "$repeat" "skipped" >>"$INDEX"
    return
  fi
  local args=(profile "$graph" --backend cuda --allocator "$allocator" --repeat "$repeat"
    --json "$OUT_DIR/cases/$name.json")
  [ "$plan" != "-" ] && args+=(--plan "$plan")
  [ "$cupti" = "off" ] && args+=(--no-cupti)
  args+=("$@")
  timeout 120 "$MEMPLAN" "${args[@]}" >"$OUT_DIR/logs/$name.txt" 2>&1
  local rc=$?
  log "$name: exit $rc"
  [ $rc -ne 0 ] && FAILED=$((FAILED + 1))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$graph" "$plan" "$allocator" "$cupti" "$repeat" \
    "$rc" >>"$INDEX"
}

# CUPTI may be unavailable (permissions, driver): then every case runs
# without it and the summary says so.
CUPTI=on
"$MEMPLAN" profile examples/mlp.graph.json --backend cuda --json "$OUT_DIR/cases/probe.json" \
  >"$OUT_DIR/logs/probe.txt" 2>&1
PROBE_RC=$?
log "probe (mlp, cuda, CUPTI): exit $PROBE_RC"
if [ $PROBE_RC -eq 4 ] && grep -q "CUPTI unavailable" "$OUT_DIR/logs/probe.txt"; then
  CUPTI=off
  log "CUPTI unavailable: running every case with --no-cupti"
elif [ $PROBE_RC -eq 4 ]; then
  log "the cuda backend is unavailable:"
  cat "$OUT_DIR/logs/probe.txt" >&2
fi

for graph in examples/*.graph.json; do
  ex=$(basename "$graph" .graph.json)
  # Baseline peak from analyze; plan at 70% of it (exit 3: the lowest peak found).
  "$MEMPLAN" analyze "$graph" -q --json "$OUT_DIR/cases/$ex.analyze.json" \
    >"$OUT_DIR/logs/$ex.analyze.txt" 2>&1
  peak=$(sed -n 's/^  "peak_bytes": \([0-9]*\),$/\1/p' "$OUT_DIR/cases/$ex.analyze.json" | head -n 1)
  plan="-"
  if [ -n "$peak" ]; then
    budget=$((peak * 70 / 100))
    "$MEMPLAN" plan "$graph" --budget "$budget" -o "$OUT_DIR/cases/$ex.plan70.plan.json" -q \
      >"$OUT_DIR/logs/$ex.plan.txt" 2>&1
    prc=$?
    [ $prc -eq 0 ] || [ $prc -eq 3 ] && plan="$OUT_DIR/cases/$ex.plan70.plan.json"
  fi
  for allocator in default async; do
    run_case "$ex.baseline.$allocator" "$graph" - "$allocator" "$CUPTI" "$REPEAT"
    [ "$plan" != "-" ] && run_case "$ex.plan70.$allocator" "$graph" "$plan" "$allocator" \
      "$CUPTI" "$REPEAT"
  done
done

# CUPTI overhead: the same programs with and without CUPTI, 5 runs each.
if [ "$CUPTI" = "on" ]; then
  for graph in examples/gpt_tiny.graph.json examples/densenet_toy.graph.json; do
    ex=$(basename "$graph" .graph.json)
    run_case "$ex.overhead.cupti" "$graph" - default on 5
    run_case "$ex.overhead.nocupti" "$graph" - default off 5
  done
fi

# A trace to look at in Perfetto.
plan=$OUT_DIR/cases/gpt_tiny.plan70.plan.json
[ -e "$plan" ] && run_case "gpt_tiny.plan70.trace" examples/gpt_tiny.graph.json "$plan" default \
  "$CUPTI" 1 --trace "$OUT_DIR/trace_gpt_tiny_plan70.json"

# --- summary -----------------------------------------------------------------
PY=$(command -v python3 || true)
if [ -n "$PY" ]; then
  "$PY" - "$OUT_DIR" "$CUPTI" "$PROBE_RC" "$((SECONDS - START))" <<'EOF'
import json, os, sys
out, cupti, probe_rc, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
keys = ["backend", "allocator", "device_name", "driver_version", "cuda_version", "cupti",
        "repeat", "predicted_peak_bytes", "measured_source", "measured_peak_bytes",
        "allocator_peak_bytes", "device_peak_bytes", "relative_error", "exact",
        "first_divergence", "dropped_records", "records", "run_time_us", "wall_time_us", "notes",
        "warnings"]
cases, device = [], None
for line in open(os.path.join(out, "cases.tsv")):
    name, graph, plan, allocator, cupti_case, repeat, rc = line.rstrip("\n").split("\t")
    case = {"case": name, "graph": graph, "program": "baseline" if plan == "-" else "plan70",
            "allocator": allocator, "cupti": cupti_case == "on", "repeat": int(repeat),
            "exit": rc if rc == "skipped" else int(rc)}
    path = os.path.join(out, "cases", name + ".json")
    if rc != "skipped" and os.path.exists(path):
        try:
            rep = json.load(open(path))
            case.update({k: rep.get(k) for k in keys})
            device = device or rep.get("device_name")
            ops = sorted(rep.get("ops", []), key=lambda o: -o["time_us"] * o["runs"])[:5]
            case["slowest_ops"] = ops
        except ValueError as e:
            case["error"] = "unreadable report: %s" % e
    else:
        log = os.path.join(out, "logs", name + ".txt")
        if os.path.exists(log):
            case["error"] = open(log).read()[-2000:]
    cases.append(case)
overhead = []
for ex in ("gpt_tiny", "densenet_toy"):
    a = next((c for c in cases if c["case"] == ex + ".overhead.cupti"), None)
    b = next((c for c in cases if c["case"] == ex + ".overhead.nocupti"), None)
    if a and b and a.get("wall_time_us") and b.get("wall_time_us"):
        overhead.append({"graph": ex, "wall_us_cupti": a["wall_time_us"],
                         "wall_us_no_cupti": b["wall_time_us"],
                         "op_us_cupti": a["run_time_us"], "op_us_no_cupti": b["run_time_us"],
                         "wall_overhead": a["wall_time_us"] / b["wall_time_us"] - 1.0})
ran = [c for c in cases if isinstance(c["exit"], int)]
summary = {
    "format": "memplan.gpu_check/1", "device": device, "cupti": cupti, "probe_exit": probe_rc,
    "seconds": seconds, "cases_run": len(ran),
    "cases_failed": sum(1 for c in ran if c["exit"] != 0),
    "cases_exact": sum(1 for c in ran if c.get("exact")),
    "max_abs_relative_error": max([abs(c["relative_error"]) for c in ran
                                   if c.get("relative_error") is not None] or [None]),
    "cupti_overhead": overhead, "cases": cases}
with open(os.path.join(out, "gpu_check.json"), "w") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
print("gpu_check: %d cases, %d failed, %d exact, max |relative error| %s; CUPTI overhead %s" % (
    summary["cases_run"], summary["cases_failed"], summary["cases_exact"],
    summary["max_abs_relative_error"],
    ", ".join("%s %+.1f%%" % (o["graph"], 100 * o["wall_overhead"]) for o in overhead) or "n/a"))
EOF
else
  log "no python3: per-case reports are in $OUT_DIR/cases, the index in $INDEX"
fi
log "done in $((SECONDS - START)) s; $FAILED case(s) failed"
[ $FAILED -eq 0 ] && [ $PROBE_RC -ne 2 ]
