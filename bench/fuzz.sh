#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) in
# build-fuzz/ and runs each for N seconds (default 60), one after the other,
# niced. The working corpus grows in build-fuzz/corpus/<target>/ (seeded from
# fuzz/corpus/, examples/ and tests/cli/); crashing inputs land in
# build-fuzz/artifacts/<target>/; a run's log is build-fuzz/<target>.log.
# A crash stops the script with exit 1: copy the input to
# tests/fuzz_regressions/<target>/, fix, and ctest replays it from then on.
#
#   bench/fuzz.sh [--seconds N] [--jobs J] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
jobs=2
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(fuzz_graph fuzz_plan fuzz_size fuzz_snapshot fuzz_onnx)
command -v clang++ >/dev/null || {
  echo "fuzz.sh: clang++ not found; on Debian 12: apt-get install clang libclang-rt-14-dev" >&2
  exit 2
}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DMEMPLAN_FUZZ=ON -DMEMPLAN_BUILD_TESTS=OFF \
  -DMEMPLAN_WITH_CUDA=OFF >/dev/null
nice cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus" "build-fuzz/artifacts/$t"
  [[ -d fuzz/corpus/$t ]] && cp -n fuzz/corpus/$t/* "$corpus"/ 2>/dev/null || true
  [[ -d tests/fuzz_regressions/$t ]] && cp -n tests/fuzz_regressions/$t/* "$corpus"/ 2>/dev/null || true
  if [[ $t == fuzz_graph ]]; then
    cp -n examples/*.json tests/cli/*.json tests/cli/bad/*.json "$corpus"/ 2>/dev/null || true
  fi
  dict=()
  [[ -f fuzz/$t.dict ]] && dict=(-dict="fuzz/$t.dict")
  echo "== $t: $seconds s (corpus $corpus: $(ls "$corpus" | wc -l) files)"
  if nice build-fuzz/fuzz/$t "$corpus" "${dict[@]}" -max_total_time="$seconds" \
      -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$t/" >"build-fuzz/$t.log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
      "build-fuzz/$t.log" | sed "s/^/  $t /"
  else
    echo "fuzz.sh: $t failed; the tail of build-fuzz/$t.log:" >&2
    tail -40 "build-fuzz/$t.log" >&2
    status=1
    break
  fi
done
exit $status
