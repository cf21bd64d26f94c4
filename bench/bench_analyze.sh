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
#   --before BIN   also time BIN (a memplan built from an earlier commit) on every graph,
#                  its runs alternated with this build's, for the before/after columns
#   --before-label TEXT  what BIN is, for the tables (default: its path)
#
# Each timed run is exactly `memplan analyze FILE --json REPORT -q --timings` under GNU time
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
BEFORE=""
BEFORE_LABEL=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; SIZES="10000 100000"; shift ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --shapes) SHAPES="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --rss-limit-mib) RSS_LIMIT_MIB="$2"; shift 2 ;;
    --before) BEFORE="$(realpath "$2")"; shift 2 ;;
    --before-label) BEFORE_LABEL="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
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

# One timed analyze of graph $2 by binary $1: measure.py's JSON plus the phases that
# --timings prints ("phases": null when the run printed none).
analyze_run() {
  local m phases
  m="$(measure "$1" analyze "$2" --json "$3" -q --timings 2>"$WORK/analyze.err")" || true
  phases="$(sed -n 's/.*timings: parse \([0-9.]*\) s, lower \([0-9.]*\) s, analyze \([0-9.]*\) s, reserved \([0-9.]*\) s.*/{"parse": \1, "lower": \2, "analyze": \3, "reserved": \4}/p' "$WORK/analyze.err" | head -1)"
  echo "${m%\}}, \"phases\": ${phases:-null}}"
}

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
    before_runs="["
    for ((r = 1; r <= reps; r++)); do
      rep="$WORK/${shape}_${n}.report.json"
      if [[ -n "$BEFORE" && $((r % 2)) == 1 ]]; then  # alternate which binary goes first
        b="$(analyze_run "$BEFORE" "$g" "$WORK/before.report.json")"
        log "$shape $n: before run $r: $b"
        [[ $r -gt 1 ]] && before_runs+=","
        before_runs+="$b"
      fi
      rm -f "$rep"
      m="$(analyze_run "$MEMPLAN" "$g" "$rep")"
      log "$shape $n: analyze run $r: $m"
      if [[ -n "$BEFORE" && $((r % 2)) == 0 ]]; then
        b="$(analyze_run "$BEFORE" "$g" "$WORK/before.report.json")"
        log "$shape $n: before run $r: $b"
        before_runs+=",$b"
      fi
      [[ $r -gt 1 ]] && runs+=","
      runs+="$m"
      if [[ "$m" == *'"killed": "'* || "$m" != *'"rc": 0'* ]]; then
        log "$shape $n: analyze failed or was killed: $(tail -3 "$WORK/analyze.err")"; break
      fi
    done
    runs+="]"
    before_runs+="]"
    report="null"
    [[ -s "$rep" ]] && report="$("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$rep")"
    joint="$WORK/${shape}_${n}.joint.json"
    rm -f "$joint"
    lower="$(measure "$MEMPLAN" lower "$g" -o "$joint" 2>"$WORK/lower.err")" || true
    log "$shape $n: lower: $lower"
    joint_bytes=0; [[ -f "$joint" ]] && joint_bytes=$(stat -c %s "$joint")
    rm -f "$joint"
    printf '{"shape": "%s", "ops_requested": %s, "counts": %s, "file_bytes": %s, "gen_s": %s, "analyze_runs": %s, "before_runs": %s, "report": %s, "lower": %s, "joint_bytes": %s}\n' \
      "$shape" "$n" "$counts" "$(stat -c %s "$g")" "$gen_s" "$runs" "$before_runs" "$report" "$lower" "$joint_bytes" >> "$RAW"
    if [[ "$runs" == *'"killed": "'* ]]; then skip=1; fi
    [[ $n -ge 1000000 ]] && rm -f "$g"  # ~100-350 MB each
  done
done

# --- summary -----------------------------------------------------------------------
BEFORE_LABEL="${BEFORE_LABEL:-$BEFORE}"
export RAW QUICK BUILD_TYPE CXX_VERSION REPO RSS_LIMIT_MIB BEFORE_LABEL
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

def median_phases(runs):
    """Median seconds of each --timings phase over the runs that printed them."""
    with_phases = [x["phases"] for x in runs if x.get("phases")]
    if not with_phases:
        return None
    return {k: round(statistics.median(p[k] for p in with_phases), 3) for k in with_phases[0]}

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
    c["analyze"]["phases_s"] = median_phases(ok)
    before = [x for x in r.get("before_runs", []) if x["rc"] == 0 and not x["killed"]]
    if r.get("before_runs"):
        c["before"] = {
            "runs": len(r["before_runs"]),
            "wall_s": round(statistics.median(x["wall_s"] for x in before), 3) if before else None,
            "wall_s_all": [x["wall_s"] for x in r["before_runs"]],
            "max_rss_mib": max(x["max_rss_mib"] for x in r["before_runs"]),
            "phases_s": median_phases(before),
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
    "target": "issue 34: 100k ops < 0.5 s; 1M ops < 5 s in < 600 MB peak RSS",
    "before": os.environ["BEFORE_LABEL"] or None,
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
    "| shape | ops | tensors | joint ops | file MB | before s | analyze s | parse / lower / analyze / reserved s | µs/op | before RSS MiB | max RSS MiB | KiB/op | peak bytes | lower s | lower RSS MiB |",
    "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
]
def phases(p):
    return "-" if not p else " / ".join("%.2f" % p[k] for k in ("parse", "lower", "analyze", "reserved"))
for c in cases:
    a, l, b = c["analyze"], c["lower"], c.get("before", {})
    wall = fmt(a["wall_s"], ".3f") if a["ok"] else "killed (%s)" % a["killed"] if a["killed"] else "failed"
    lines.append("| %s | %d | %d | %s | %.1f | %s | %s | %s | %s | %s | %.1f | %.2f | %s | %s | %.1f |" % (
        c["shape"], c["ops"], c["tensors"], fmt(c["joint_ops"], "d"), c["file_mb"],
        fmt(b.get("wall_s"), ".3f"), wall, phases(a["phases_s"]),
        fmt(a["us_per_op"], ".2f"), fmt(b.get("max_rss_mib"), ".1f"), a["max_rss_mib"], a["rss_kib_per_op"],
        fmt(c["peak_bytes"], "d"), fmt(l["wall_s"], ".3f") if l["ok"] else "killed (%s)" % l["killed"] if l["killed"] else "failed",
        l["max_rss_mib"]))
lines.append("")
lines.append("A killed run was stopped by the watchdog (bench/measure.py) at the RSS limit; its "
             "RSS column is the last value seen, its time the time until then.")
lines.append("")
if result["before"]:
    lines.append("before: %s, its runs alternated with this build's." % result["before"])
    lines.append("")
t100 = [c for c in cases if c["ops"] == 100000 and c["analyze"]["wall_s"] is not None]
if t100:
    worst = max(t100, key=lambda c: c["analyze"]["wall_s"])
    lines.append("Target (100k ops < 0.5 s): %s (slowest 100k case: %s, %.3f s)." % (
        "met" if worst["analyze"]["wall_s"] < 0.5 else "MISSED", worst["shape"], worst["analyze"]["wall_s"]))
    lines.append("")
t1m = [c for c in cases if c["ops"] >= 1000000]
if t1m:
    slow = max(t1m, key=lambda c: c["analyze"]["wall_s"] or float("inf"))
    big = max(t1m, key=lambda c: c["analyze"]["max_rss_mib"])
    ok = all(c["analyze"]["wall_s"] is not None and c["analyze"]["wall_s"] < 5 and
             c["analyze"]["max_rss_mib"] * MIB < 600e6 for c in t1m)
    lines.append("Target (1M ops < 5 s in < 600 MB): %s (slowest: %s, %s s; largest: %s, %.0f MiB)." % (
        "met" if ok else "MISSED", slow["shape"], fmt(slow["analyze"]["wall_s"], ".3f"),
        big["shape"], big["analyze"]["max_rss_mib"]))
    lines.append("")
with open(os.path.join(out, "analyze_scale.md"), "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
PYEOF
