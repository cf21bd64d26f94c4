#!/usr/bin/env bash
# Scale benchmark: parse + lower + analyze time and peak RSS of `memplan analyze` on
# synthetic forward-only graphs (bench/gen_graph.py), plus one `memplan lower` per graph.
#
#   bench/bench_analyze.sh [--quick] [--shapes "chain transformer"] [--sizes "10000 100000"]
#                          [--repeat N] [--build-dir DIR] [--work DIR] [--rss-limit-mib N]
#
#   --quick        10k and 100k ops only (default: 10k, 100k, 1M)
#   --repeat N     timed analyze runs per graph below 1M ops (default 3; median reported,
#                  max RSS over the runs); 1M-op graphs run once
#   --build-dir    Release build of memplan (default: build-bench at the repo root; it is
#                  configured and built here with -DMEMPLAN_BUILD_TESTS=OFF)
#   --work         where graphs and joint files go (default: ${TMPDIR:-/tmp}/memplan-bench);
#                  they are large (1M transformer ops: ~350 MB) and are not kept in the repo
#   --rss-limit-mib  kill a run whose RSS goes over this (default 8192); larger sizes of
#                  the same shape are then skipped
#
# Each timed run is exactly `memplan analyze FILE --json REPORT -q` under GNU time
# (bench/measure.py), REPORT being a small file in the work dir from which the peak
# is read (the report lists only the top live buffers, so writing it costs nothing
# measurable next to /dev/null).
# Writes bench/results/analyze_scale.json and bench/results/analyze_scale.md.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
PY=/usr/bin/python3
BUILD_DIR="$REPO/build-bench"
WORK="${TMPDIR:-/tmp}/memplan-bench"
SIZES="10000 100000 1000000"
SHAPES="chain transformer"
REPEAT=3
RSS_LIMIT_MIB=8192
QUICK=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; SIZES="10000 100000"; shift ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --shapes) SHAPES="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --rss-limit-mib) RSS_LIMIT_MIB="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bench_analyze.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

log() { echo "[bench] $*" >&2; }

[[ -x /usr/bin/time ]] || log "warning: /usr/bin/time (GNU time) missing; install it with 'apt-get install -y time' for exact max RSS (falling back to wait4 rusage)"

# --- build (retry: the tree may be mid-edit) -----------------------------------------
build() {
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMEMPLAN_BUILD_TESTS=OFF >&2 || return 1
  fi
  ninja -C "$BUILD_DIR" -j2 memplan >&2
}
for attempt in 1 2 3; do
  if build; then break; fi
  [[ $attempt == 3 ]] && { log "build failed 3 times"; exit 1; }
  log "build failed (attempt $attempt); retrying in 60 s"; sleep 60
done
MEMPLAN="$BUILD_DIR/cli/memplan"
BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
CXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
CXX_VERSION="$("$CXX" --version | head -1)"
[[ "$BUILD_TYPE" == Release ]] || log "warning: $BUILD_DIR is a $BUILD_TYPE build"

mkdir -p "$WORK" "$BENCH_DIR/results"
RAW="$WORK/runs.jsonl"
: > "$RAW"

measure() { "$PY" "$BENCH_DIR/measure.py" --rss-limit-mib "$RSS_LIMIT_MIB" -- "$@"; }

for shape in $SHAPES; do
  skip=0
  for n in $SIZES; do
    if [[ $skip == 1 ]]; then log "$shape $n: skipped (a smaller size hit the RSS limit)"; continue; fi
    g="$WORK/${shape}_${n}.graph.json"
    log "$shape $n: generating $g"
    t0=$(date +%s.%N)
    counts="$("$PY" "$BENCH_DIR/gen_graph.py" --ops "$n" --shape "$shape" -o "$g" --stats)"
    gen_s=$(LC_ALL=C printf '%.3f' "$(echo "$(date +%s.%N) - $t0" | bc)")
    reps=$REPEAT; [[ $n -ge 1000000 ]] && reps=1
    runs="["
    for ((r = 1; r <= reps; r++)); do
      rep="$WORK/${shape}_${n}.report.json"
      rm -f "$rep"
      m="$(measure "$MEMPLAN" analyze "$g" --json "$rep" -q 2>"$WORK/analyze.err")" || true
      log "$shape $n: analyze run $r: $m"
      [[ $r -gt 1 ]] && runs+=","
      runs+="$m"
      if [[ "$m" == *'"killed": "'* || "$m" != *'"rc": 0'* ]]; then
        log "$shape $n: analyze failed or was killed: $(tail -3 "$WORK/analyze.err")"; break
      fi
    done
    runs+="]"
    report="null"
    [[ -s "$rep" ]] && report="$("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$rep")"
    joint="$WORK/${shape}_${n}.joint.json"
    rm -f "$joint"
    lower="$(measure "$MEMPLAN" lower "$g" -o "$joint" 2>"$WORK/lower.err")" || true
    log "$shape $n: lower: $lower"
    joint_bytes=0; [[ -f "$joint" ]] && joint_bytes=$(stat -c %s "$joint")
    rm -f "$joint"
    printf '{"shape": "%s", "ops_requested": %s, "counts": %s, "file_bytes": %s, "gen_s": %s, "analyze_runs": %s, "report": %s, "lower": %s, "joint_bytes": %s}\n' \
      "$shape" "$n" "$counts" "$(stat -c %s "$g")" "$gen_s" "$runs" "$report" "$lower" "$joint_bytes" >> "$RAW"
    if [[ "$runs" == *'"killed": "'* ]]; then skip=1; fi
    [[ $n -ge 1000000 ]] && rm -f "$g"  # ~100-350 MB each
  done
done

# --- summary -----------------------------------------------------------------------
export RAW QUICK BUILD_TYPE CXX_VERSION REPO RSS_LIMIT_MIB
"$PY" - "$BENCH_DIR/results" <<'PYEOF'
import datetime, json, os, platform, statistics, subprocess, sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(os.environ["RAW"]) if l.strip()]

def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"

def mem_total_gib():
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 ** 2, 1)

def git(*a):
    try:
        return subprocess.run(["git", "-C", os.environ["REPO"], *a], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return None

MIB = 1024 * 1024
cases = []
for r in rows:
    runs = r["analyze_runs"]
    ok = [x for x in runs if x["rc"] == 0 and not x["killed"]]
    rep = r["report"] or {}
    g = rep.get("graph", {})
    low = r["lower"]
    c = {
        "shape": r["shape"],
        "ops": r["counts"]["ops"],
        "tensors": r["counts"]["tensors"],
        "joint_ops": g.get("joint_ops"),
        "joint_tensors": g.get("joint_tensors"),
        "file_mb": round(r["file_bytes"] / 1e6, 2),
        "gen_s": round(float(r["gen_s"]), 2),
        "analyze": {
            "ok": len(ok) == len(runs),
            "runs": len(runs),
            "wall_s": round(statistics.median(x["wall_s"] for x in ok), 3) if ok else None,
            "wall_s_all": [x["wall_s"] for x in runs],
            "max_rss_mib": max(x["max_rss_mib"] for x in runs),
            "killed": next((x["killed"] for x in runs if x["killed"]), None),
        },
        "peak_bytes": rep.get("peak_bytes"),
        "steps": rep.get("steps"),
        "lower": {
            "ok": low["rc"] == 0 and not low["killed"],
            "killed": low["killed"],
            "wall_s": low["wall_s"],
            "max_rss_mib": low["max_rss_mib"],
            "joint_file_mb": round(r["joint_bytes"] / 1e6, 2),
        },
    }
    a = c["analyze"]
    c["analyze"]["us_per_op"] = round(a["wall_s"] * 1e6 / c["ops"], 2) if a["wall_s"] else None
    c["analyze"]["rss_kib_per_op"] = round(a["max_rss_mib"] * 1024 / c["ops"], 2)
    c["analyze"]["rss_per_file_byte"] = round(a["max_rss_mib"] * MIB / r["file_bytes"], 1)
    cases.append(c)

result = {
    "benchmark": "memplan analyze scale (parse + lower + analyze), bench/bench_analyze.sh",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": {
        "nproc": os.cpu_count() if not hasattr(os, "sched_getaffinity") else len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model(),
        "mem_total_gib": mem_total_gib(),
        "kernel": platform.release(),
    },
    "build": {"type": os.environ["BUILD_TYPE"], "compiler": os.environ["CXX_VERSION"]},
    "git": {"commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))},
    "command": "memplan analyze GRAPH --json REPORT -q (median of runs); memplan lower GRAPH -o JOINT (once)",
    "rss_limit_mib": int(os.environ["RSS_LIMIT_MIB"]),
    "target": "100k ops end to end < 1 s; memory linear in graph size",
    "cases": cases,
}
with open(os.path.join(out, "analyze_scale.json"), "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")

def fmt(v, spec):
    return "-" if v is None else format(v, spec)

m = result["machine"]
lines = [
    "# memplan analyze: scale benchmark",
    "",
    "%s, %d CPUs (%s), %.1f GiB RAM, %s build (%s), commit %s%s." % (
        result["date"], m["nproc"], m["cpu_model"], m["mem_total_gib"],
        result["build"]["type"], result["build"]["compiler"],
        (result["git"]["commit"] or "?")[:12], " + local changes" if result["git"]["dirty"] else ""),
    "",
    "`memplan analyze GRAPH --json REPORT -q` (parse + lower + analyze), wall time median, "
    "max RSS from GNU time; `memplan lower GRAPH -o JOINT` once. Generated by "
    "`bench/gen_graph.py` (activations 256 KiB each).",
    "",
    "| shape | ops | tensors | joint ops | file MB | analyze s | µs/op | max RSS MiB | KiB/op | peak bytes | lower s | lower RSS MiB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for c in cases:
    a, l = c["analyze"], c["lower"]
    wall = fmt(a["wall_s"], ".3f") if a["ok"] else "killed (%s)" % a["killed"] if a["killed"] else "failed"
    lines.append("| %s | %d | %d | %s | %.1f | %s | %s | %.1f | %.2f | %s | %s | %.1f |" % (
        c["shape"], c["ops"], c["tensors"], fmt(c["joint_ops"], "d"), c["file_mb"], wall,
        fmt(a["us_per_op"], ".2f"), a["max_rss_mib"], a["rss_kib_per_op"],
        fmt(c["peak_bytes"], "d"), fmt(l["wall_s"], ".3f") if l["ok"] else "killed (%s)" % l["killed"] if l["killed"] else "failed",
        l["max_rss_mib"]))
lines.append("")
lines.append("A killed run was stopped by the watchdog (bench/measure.py) at the RSS limit; its "
             "RSS column is the last value seen, its time the time until then.")
lines.append("")
t100 = [c for c in cases if c["ops"] == 100000 and c["analyze"]["wall_s"] is not None]
if t100:
    worst = max(t100, key=lambda c: c["analyze"]["wall_s"])
    lines.append("Target (100k ops < 1 s): %s (slowest 100k case: %s, %.3f s)." % (
        "met" if worst["analyze"]["wall_s"] < 1.0 else "MISSED", worst["shape"], worst["analyze"]["wall_s"]))
    lines.append("")
with open(os.path.join(out, "analyze_scale.md"), "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
PYEOF
