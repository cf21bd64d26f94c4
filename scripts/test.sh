#!/usr/bin/env bash
# Installs the build and test dependencies, builds everything and runs every
# test through CTest. The optional parts (the CUDA profiler, the ONNX
# importer) are required here: a machine without them fails instead of
# testing less. Ends with the ten slowest tests and each stage's wall time
# (also when a stage fails).
#
# MEMPLAN_BUILD_DIR (default build) and MEMPLAN_ASAN_BUILD_DIR (default
# build-asan): the build folders. MEMPLAN_SANITIZERS=0 skips the ASan stage.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MEMPLAN_BUILD_DIR:-build}
asan=${MEMPLAN_ASAN_BUILD_DIR:-build-asan}
logs=$(mktemp -d)
start=$SECONDS stage_name="" stage_start=0
stages=()
declare -A jobs=()  # background jobs: name -> pid (= process group)

summary() {
  local rc=$?
  set +e
  for pid in "${jobs[@]}"; do kill -- "-$pid" 2>/dev/null; done
  [[ -n $stage_name ]] && stages+=("$(printf '%-12s %5d s  (failed)' "$stage_name" $((SECONDS - stage_start)))")
  echo
  echo "Slowest tests:"
  awk '/ Test +#[0-9]+: / { tag = FILENAME ~ /asan/ ? " (asan)" : ""; t = $(NF - 1)
                            sub(/^.*#[0-9]+: /, ""); sub(/ \.+.*$|  .*$/, "")
                            printf "%10.2f s  %s%s\n", t, $0, tag }' \
    "$logs"/ctest-*.log 2>/dev/null | sort -rn | head -n 10
  echo "Stages:"
  printf '  %s\n' "${stages[@]}"
  printf '  %-12s %5d s%s\n' total $((SECONDS - start)) "$( ((rc)) && echo "  (exit $rc)")"
  rm -rf "$logs"
}
trap summary EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# stage NAME COMMAND...: runs COMMAND, records its wall time (a failure
# stops the script: set -e).
stage() {
  stage_name=$1 stage_start=$SECONDS
  shift
  "$@"
  stages+=("$(printf '%-12s %5d s' "$stage_name" $((SECONDS - stage_start)))")
  stage_name=""
}

# The main, portable and fallback builds are unity builds (half the compile
# time); the ASan build compiles file by file, which keeps each file's own
# includes checked.
build_main() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
    -DMEMPLAN_BUILD_TESTS=ON -DMEMPLAN_WITH_CUDA=ON -DMEMPLAN_WITH_ONNX=ON >/dev/null
  cmake --build "$build" -j2
}
# The wheel (pyproject.toml) from the same build folder and options: only the
# link runs. tests/wheel installs it into a fresh venv (ctest -L wheel).
build_wheel() {
  MEMPLAN_WHEEL_BUILD_DIR="$build" MEMPLAN_WHEEL_TOOLS="$build/wheel-tools" \
    MEMPLAN_WHEEL_CMAKE_ARGS="CMAKE_UNITY_BUILD=ON MEMPLAN_BUILD_TESTS=ON MEMPLAN_WITH_CUDA=ON MEMPLAN_WITH_ONNX=ON" \
    scripts/build-wheel.sh "$build/wheelhouse"
}
run_ctest() {
  (cd "$build" && ctest --output-on-failure -j2) | tee "$logs/ctest-main.log"
}
run_asan_ctest() {  # the asan test preset, in $asan
  (cd "$asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest -L unit --output-on-failure -j2) |
    tee "$logs/ctest-asan.log"
}

# Background jobs, each in its own process group (setsid) so that a failure
# stops all of it. start_job NAME COMMAND...; finish_job NAME waits for it,
# prints its log and fails when it failed.
start_job() {
  local name=$1
  shift
  setsid "$@" >"$logs/$name.log" 2>&1 &
  jobs[$name]=$!
}
finish_job() {
  local rc=0
  wait "${jobs[$1]}" || rc=$?
  unset "jobs[$1]"
  cat "$logs/$1.log"
  return "$rc"
}

stage install scripts/install-deps.sh --test --no-venvs
# The torch venvs (two pip installs from wheels, minutes in a fresh clone)
# are made while the C++ build runs; ctest needs them, the build does not.
start_job venvs scripts/install-deps.sh --venvs
# Sanitizer build: the doctest suite and the fuzz regression replays (ctest -L
# unit) with ASan + UBSan at -O1 (CMakePresets.json "asan"), only the targets
# they run. It needs nothing built before it, so it runs from here on at the
# lowest priority, on what the main build and tests leave idle. setsid gives
# the job a scheduler autogroup of its own, whose nice is what counts against
# the others: set it to 19 too (Linux with autogroups; elsewhere a no-op).
if [[ "${MEMPLAN_SANITIZERS:-1}" != 0 ]]; then
  start_job asan-build nice -n 19 bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null
    cmake --preset asan -B "$1" >/dev/null &&
    cmake --build "$1" -j2 --target memplan_tests fuzz_replays' _ "$asan"
fi
stage build build_main
stage venvs finish_job venvs
stage wheel build_wheel
echo "Optional parts built:"
"$build/cli/memplan" doctor --no-device
stage ctest run_ctest
if [[ "${MEMPLAN_SANITIZERS:-1}" != 0 ]]; then
  stage asan-build finish_job asan-build  # the part left when the main tests are done
  stage asan-ctest run_asan_ctest
fi
