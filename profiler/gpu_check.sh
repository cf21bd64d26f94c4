#!/usr/bin/env bash
# The one-shot GPU check: `memplan profile` on the CUDA backend (every bundled
# example, baseline and a plan at 70% of the baseline peak, both allocators,
# two at GPU scale, CUPTI's overhead), then real PyTorch training steps
# (profiler/torch_gpu_check.py), each set against memplan's prediction.
#
# Usage: profiler/gpu_check.sh [--binary PATH] [--headers DIR] [--out DIR]
#                              [--deadline SECONDS] [--torch-python PY] [--no-torch]
#                              [--dry-run]
#   --binary    a memplan built by scripts/build-portable.sh (used when it runs
#               here; else memplan is built from source, with --headers)
#   --headers   nlohmann/, CLI/, fmt/ headers for that fallback build
#   --out       where the results go (default $OUT, else gpu_check_out)
#   --deadline  no command runs past this many seconds (default 360)
#   --dry-run   everything but the GPU: cases on the cpu backend, PyTorch on
#               the CPU at tiny sizes (the CI test of this script)
#
# Leaves in the out folder exactly three files, whatever happens (timeout,
# signal, failed build): gpu_check.json (the summary, rewritten after every
# case, schemas/gpu_check.schema.json), gpu_check.tar.gz (every report and log)
# and gpu_check.stderr.log. Everything else is written to a temporary folder.
# Exit 0 when every case ran; 1 otherwise (the summary says what failed).
# Every case a full run has is in the summary: one that did not run is
# "skipped", with its skip_reason (past the deadline or no plan to profile:
# exit 1; CUPTI unavailable, for its overhead cases only).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
START=$SECONDS
BINARY="" HEADERS="" OUT_DIR=${OUT:-gpu_check_out} DEADLINE_S=360 DRY_RUN=0 TORCH=1
TORCH_PYTHON=${TORCH_PYTHON:-python3}
while (($#)); do
  case "$1" in
    --binary) BINARY=$2; shift 2 ;;
    --headers) HEADERS=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --deadline) DEADLINE_S=$2; shift 2 ;;
    --torch-python) TORCH_PYTHON=$2; shift 2 ;;
    --no-torch) TORCH=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
rm -f "$OUT_DIR/gpu_check.json" "$OUT_DIR/gpu_check.tar.gz" "$OUT_DIR/gpu_check.stderr.log"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
mkdir -p "$WORK/cases" "$WORK/logs"
: >"$WORK/cases.tsv"
STATUS=running
exec 2> >(tee -a "$OUT_DIR/gpu_check.stderr.log" >&2)
log() { echo "[gpu_check $((SECONDS - START))s] $*" >&2; }

summarize() {
  python3 "$ROOT/profiler/gpu_check_summary.py" --work "$WORK" --status "$STATUS" \
    --seconds $((SECONDS - START)) --dry-run "$DRY_RUN" \
    --out "$OUT_DIR/gpu_check.json.tmp" >>"$WORK/logs/summary.txt" 2>&1 &&
    mv -f "$OUT_DIR/gpu_check.json.tmp" "$OUT_DIR/gpu_check.json"
}
finish() {
  local rc=$?
  trap - EXIT TERM INT HUP
  [ "$STATUS" = running ] && STATUS=$([ $rc -eq 0 ] && echo complete || echo "exit $rc")
  summarize || log "the summary failed: $(tail -n 5 "$WORK/logs/summary.txt")"
  tar -czf "$OUT_DIR/gpu_check.tar.gz" -C "$WORK" . 2>/dev/null
  [ -e "$OUT_DIR/gpu_check.json" ] ||
    printf '{"format": "memplan.gpu_check/2", "status": "%s", "error": "no summary"}\n' \
      "$STATUS" >"$OUT_DIR/gpu_check.json"
  log "done ($STATUS) in $((SECONDS - START)) s: $(ls "$OUT_DIR" | tr '\n' ' ')"
  rm -rf "$WORK"
  exit $rc
}
trap finish EXIT
# The command running now (in the background, so that a signal is handled at
# once); a signal stops it too: `timeout` passes the signal on to its command.
CHILD=""
run_child() {
  "$@" &
  CHILD=$!
  wait $CHILD
  local rc=$?
  CHILD=""
  return $rc
}
on_signal() {
  STATUS=signal
  log "stopped by a signal"
  [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null
  exit 124
}
trap on_signal TERM INT HUP

left() { echo $((DEADLINE_S - (SECONDS - START))); }
# timed LIMIT LOG CMD...: runs CMD under `timeout`, never past the deadline
# (10 s kept for the summary); returns 124 when it did not start or ran out.
timed() {
  local limit=$1 out=$2
  shift 2
  local room=$(($(left) - 10))
  ((limit > room)) && limit=$room
  if ((limit < 3)); then
    echo "not started: past the deadline" >"$out"
    return 124
  fi
  run_child timeout -k 5 "$limit" "$@" >"$out" 2>&1
}

# --- environment -------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null)"
  echo "dry_run: $DRY_RUN"
  grep -h PRETTY_NAME /etc/os-release 2>/dev/null
  ldd --version 2>&1 | head -n 1
  command -v nvidia-smi >/dev/null &&
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used \
      --format=csv,noheader 2>&1
  command -v nvcc >/dev/null && nvcc --version 2>&1 | tail -n 1
  timeout 60 "$TORCH_PYTHON" -c 'import torch; print("torch", torch.__version__, torch.version.cuda,
torch.cuda.is_available())' 2>&1 | tail -n 1
} >"$WORK/logs/environment.txt" 2>&1

# CUPTI: the toolkit's libcupti, else the pip package nvidia-cuda-cupti's.
find_cupti() {
  for f in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 \
    /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13; do
    [ -e "$f" ] && { echo "toolkit $f"; return; }
  done
  local pip
  pip=$(timeout 60 "$TORCH_PYTHON" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    for base in nvidia.__path__:
        for f in sorted(glob.glob(os.path.join(base, "**", "libcupti.so.13*"), recursive=True)):
            print(f); break
except ImportError:
    pass
EOF
)
  [ -n "$pip" ] && { echo "pip $(echo "$pip" | head -n 1)"; return; }
  echo "none -"
}
if [ -z "${MEMPLAN_CUPTI_LIBRARY:-}" ]; then
  read -r CUPTI_FROM CUPTI_PATH < <(find_cupti)
  [ "$CUPTI_FROM" != none ] && export MEMPLAN_CUPTI_LIBRARY=$CUPTI_PATH
else
  CUPTI_FROM=environment CUPTI_PATH=$MEMPLAN_CUPTI_LIBRARY
fi
echo "$CUPTI_FROM $CUPTI_PATH" >"$WORK/cupti_source.txt"
log "CUPTI: $CUPTI_FROM $CUPTI_PATH"

# --- the binary --------------------------------------------------------------
MEMPLAN=""
if [ -n "$BINARY" ] && timed 30 "$WORK/logs/binary_check.txt" "$BINARY" doctor --no-device; then
  MEMPLAN=$BINARY
  echo portable >"$WORK/binary_source.txt"
else
  [ -n "$BINARY" ] && log "$BINARY does not run here: $(tail -n 3 "$WORK/logs/binary_check.txt")"
  log "building memplan here"
  hdr=()
  [ -n "$HEADERS" ] && hdr=(-DMEMPLAN_HEADERS_DIR="$(cd "$HEADERS" && pwd)")
  cuda=(-DMEMPLAN_WITH_CUDA=ON)
  ((DRY_RUN)) && cuda=(-DMEMPLAN_WITH_CUDA=AUTO)
  if timed 120 "$WORK/logs/configure.txt" cmake -S "$ROOT" -B "$WORK/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DMEMPLAN_BUILD_TESTS=OFF \
    -DMEMPLAN_WITH_ONNX=OFF "${cuda[@]}" \
    "${hdr[@]}" &&
    timed "${MEMPLAN_BUILD_TIMEOUT:-300}" "$WORK/logs/build.txt" cmake --build "$WORK/build" -j "$(nproc)" --target memplan; then
    MEMPLAN=$WORK/build/cli/memplan
    echo built-here >"$WORK/binary_source.txt"
  else
    STATUS="build failed"
    log "build failed: $(tail -n 5 "$WORK/logs/configure.txt" "$WORK/logs/build.txt" 2>/dev/null)"
    exit 1
  fi
fi
timed 60 "$WORK/logs/doctor.txt" "$MEMPLAN" doctor --json "$WORK/doctor.json"
cat "$WORK/logs/doctor.txt" >&2

# --- memplan profile cases ---------------------------------------------------
BACKEND=cuda
((DRY_RUN)) && BACKEND=cpu
FAILED=0
# record NAME GRAPH PLAN|- ALLOCATOR CUPTI REPEAT EXIT|skipped REASON [extra args]:
# one row of cases.tsv, then the summary is rewritten.
record() {
  local name=$1 graph=$2 plan=$3 allocator=$4 cupti=$5 repeat=$6 rc=$7 reason=$8
  shift 8
  log "$name: $rc${reason:+ ($reason)}"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$graph" "$plan" "$allocator" \
    "$cupti" "$repeat" "$rc" "$*" "$reason" >>"$WORK/cases.tsv"
  summarize
}
# skip_case NAME GRAPH PLAN|- ALLOCATOR CUPTI REPEAT REASON [extra args]: a case
# of the full run that does not run here, recorded as skipped with the reason
# (the check is incomplete: exit 1).
skip_case() {
  local fields=("$1" "$2" "$3" "$4" "$5" "$6") reason=$7
  shift 7
  FAILED=$((FAILED + 1))
  record "${fields[@]}" skipped "$reason" "$@"
}
# run_case NAME GRAPH PLAN|- ALLOCATOR CUPTI(on|off) REPEAT [extra args]
run_case() {
  local name=$1 graph=$2 plan=$3 allocator=$4 cupti=$5 repeat=$6
  shift 6
  local args=(profile "$graph" --backend "$BACKEND" --repeat "$repeat" -q
    --json "$WORK/cases/$name.json")
  [ "$BACKEND" = cuda ] && args+=(--allocator "$allocator")
  [ "$plan" != - ] && args+=(--plan "$plan")
  [ "$cupti" = off ] && [ "$BACKEND" = cuda ] && args+=(--no-cupti)
  args+=("$@")
  local rc=0
  # Tests slow every case down to make a short deadline bite deterministically.
  [ -n "${GPU_CHECK_TEST_CASE_DELAY:-}" ] && sleep "$GPU_CHECK_TEST_CASE_DELAY"
  # `timed` keeps 10 s for the summary and starts nothing with under 3 s.
  local l
  l=$(left)
  if ((l < CASE_RESERVE + 3)); then
    skip_case "$name" "$graph" "$plan" "$allocator" "$cupti" "$repeat" \
      "past the deadline: $l of $DEADLINE_S s left, $CASE_RESERVE kept for what follows" "$@"
    return
  fi
  timed 90 "$WORK/logs/$name.txt" "$MEMPLAN" "${args[@]}" || rc=$?
  [ "$rc" != 0 ] && FAILED=$((FAILED + 1))
  record "$name" "$graph" "$plan" "$allocator" "$cupti" "$repeat" "$rc" "" "$@"
}
# Time kept for the PyTorch phases while profile cases run: the profile
# cases get 30% of the deadline, the allocator traces 25%, the rest goes to
# export + predict + measure.
CASE_RESERVE=10
((TORCH)) && CASE_RESERVE=$((DEADLINE_S * 70 / 100))

CUPTI=on
[ "$BACKEND" = cpu ] && CUPTI=off
timed 60 "$WORK/logs/probe.txt" "$MEMPLAN" profile examples/mlp.graph.json --backend "$BACKEND" \
  --json "$WORK/cases/probe.json" -q
PROBE_RC=$?
echo "$PROBE_RC" >"$WORK/probe_exit.txt"
log "probe (mlp, $BACKEND): exit $PROBE_RC: $(tail -n 2 "$WORK/logs/probe.txt")"
if [ $PROBE_RC -eq 4 ] && grep -q "CUPTI unavailable" "$WORK/logs/probe.txt"; then
  CUPTI=off
  log "CUPTI unavailable: every case runs with --no-cupti"
fi
echo "$CUPTI" >"$WORK/cupti_mode.txt"

# examples plus two at GPU scale (several GiB), each with its own extra args.
cases=()
for graph in examples/*.graph.json; do cases+=("$(basename "$graph" .graph.json)|$graph|"); done
((DRY_RUN)) || cases+=("gpt_tiny_b256|examples/gpt_tiny.graph.json|--set batch=256"
  "densenet_toy_b131072|examples/densenet_toy.graph.json|--set batch=131072")
for entry in "${cases[@]}"; do
  IFS='|' read -r ex graph extra <<<"$entry"
  read -r -a extra_args <<<"$extra"
  # Baseline peak from analyze; a plan at 70% of it (exit 3: the lowest found).
  timed 60 "$WORK/logs/$ex.analyze.txt" "$MEMPLAN" analyze "$graph" -q \
    --json "$WORK/cases/$ex.analyze.json" "${extra_args[@]}"
  arc=$?
  peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_bytes"])' \
    "$WORK/cases/$ex.analyze.json" 2>/dev/null)
  plan=- why="analyze exited $arc"
  ((arc == 124)) && why="analyze exited 124 (out of time: its own limit or the deadline)"
  if [ -n "$peak" ]; then
    timed 120 "$WORK/logs/$ex.plan.txt" "$MEMPLAN" plan "$graph" --budget $((peak * 70 / 100)) \
      -o "$WORK/cases/$ex.plan70.plan.json" -q "${extra_args[@]}"
    prc=$?
    why="plan exited $prc"
    ((prc == 124)) && why="plan exited 124 (out of time: its own limit or the deadline)"
    { [ $prc -eq 0 ] || [ $prc -eq 3 ]; } && plan="$WORK/cases/$ex.plan70.plan.json"
  fi
  [ "$ex" = gpt_tiny ] && GPT_TINY_NO_PLAN=$why
  allocators=(default async)
  [ -n "$extra" ] && allocators=(default)
  [ "$BACKEND" = cpu ] && allocators=(host)
  for allocator in "${allocators[@]}"; do
    run_case "$ex.baseline.$allocator" "$graph" - "$allocator" "$CUPTI" 3 "${extra_args[@]}"
    if [ "$plan" != - ]; then
      run_case "$ex.plan70.$allocator" "$graph" "$plan" "$allocator" "$CUPTI" 3 "${extra_args[@]}"
    else
      skip_case "$ex.plan70.$allocator" "$graph" "(no plan)" "$allocator" "$CUPTI" 3 \
        "no plan at 70% to profile: $why" "${extra_args[@]}"
    fi
  done
done

# CUPTI's overhead: the same programs with and without it, 5 runs each.
# (On the cpu backend there is no CUPTI: not cases of a dry run.)
if [ "$BACKEND" = cuda ]; then
  for ex in gpt_tiny densenet_toy; do
    for on in on off; do
      name=$ex.overhead.$([ $on = on ] && echo cupti || echo nocupti)
      if [ "$CUPTI" = on ]; then
        run_case "$name" "examples/$ex.graph.json" - default $on 5
      else
        # Not a failure: every other case runs with --no-cupti.
        record "$name" "examples/$ex.graph.json" - default $on 5 skipped "CUPTI unavailable"
      fi
    done
  done
fi
# A trace to look at in Perfetto.
plan=$WORK/cases/gpt_tiny.plan70.plan.json
if [ -e "$plan" ]; then
  run_case gpt_tiny.plan70.trace examples/gpt_tiny.graph.json "$plan" default "$CUPTI" 1 \
    --trace "$WORK/cases/trace_gpt_tiny_plan70.json"
else
  skip_case gpt_tiny.plan70.trace examples/gpt_tiny.graph.json "(no plan)" default "$CUPTI" 1 \
    "no plan at 70% of gpt_tiny to trace: ${GPT_TINY_NO_PLAN:-}" --trace "$WORK/cases/trace_gpt_tiny_plan70.json"
fi
[ -n "${GPU_CHECK_TEST_SLEEP:-}" ] && run_child sleep "$GPU_CHECK_TEST_SLEEP"

# --- PyTorch on the device ---------------------------------------------------
if ((TORCH)); then
  device=cuda quick=()
  ((DRY_RUN)) && device=cpu quick=(--quick --models torchvision:resnet18,models:gpt_small)
  # The caching allocator's own event history of real steps (ground truth
  # for analyzer/alloc), under several PYTORCH_CUDA_ALLOC_CONF settings.
  budget=$((DEADLINE_S * 25 / 100))
  log "allocator traces ($device), $budget s"
  mkdir -p "$WORK/alloc"
  timed $((budget + 10)) "$WORK/logs/torch_alloc_trace.txt" "$TORCH_PYTHON" \
    "$ROOT/profiler/torch_alloc_trace.py" --out "$WORK/alloc" --device "$device" \
    --deadline-s "$budget" "${quick[@]}"
  TRACE_RC=$?
  echo "$TRACE_RC" >"$WORK/alloc_trace_exit.txt"
  log "allocator traces: exit $TRACE_RC"
  [ $TRACE_RC -ne 0 ] && FAILED=$((FAILED + 1))
  summarize

  ((DRY_RUN)) && quick=(--quick --models resnet18,models:gpt_small,compile:aot_eager:models:gpt_small)
  budget=$(($(left) - 20))
  log "PyTorch phase ($device), $budget s"
  mkdir -p "$WORK/torch"
  timed $((budget + 5)) "$WORK/logs/torch_gpu_check.txt" "$TORCH_PYTHON" \
    "$ROOT/profiler/torch_gpu_check.py" --memplan "$MEMPLAN" --out "$WORK/torch" \
    --device "$device" --deadline-s "$budget" "${quick[@]}"
  TORCH_RC=$?
  echo "$TORCH_RC" >"$WORK/torch_exit.txt"
  log "PyTorch phase: exit $TORCH_RC"
  [ $TORCH_RC -ne 0 ] && FAILED=$((FAILED + 1))
fi

((FAILED == 0)) && [ "$PROBE_RC" -ne 2 ]
