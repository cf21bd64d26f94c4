#!/usr/bin/env bash
# Scale check (issue 7): a 200k-op chain (bench/gen_graph.py --shape chain:
# alternating linear/gelu, 256 KiB activations) analyzed, then planned under a
# budget of 70% of its baseline peak (which forces recomputation), then the
# plan verified; each on one core (taskset -c 0) under GNU time for wall time
# and max RSS. Targets: analyze < 10 s, plan < 60 s, each < 4 GiB.
#
#   bench/bench_scale.sh [--ops N] [--fraction 0.7] [--build-dir DIR] [--work DIR]
#                        [--wide N]
#
# --wide N: also analyze a graph of N tensors (N-1003 unused [1] parameters
# beside a 1000-op chain: every per-tensor structure at that size), reported
# with its time and RSS but no target (10000000: the 10M-tensor check).
# --build-dir: a Release build (default build-rel/, configured here when absent).
# Writes bench/results/scale.md and bench/results/scale.json; exit 1 when a
# target is missed or a command fails.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
OPS=200000
FRACTION=0.7
BUILD_DIR="$REPO/build-rel"
WORK="${TMPDIR:-/tmp}/memplan-scale"
WIDE=0
while (($#)); do
  case "$1" in
    --ops) OPS="$2"; shift 2 ;;
    --fraction) FRACTION="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --wide) WIDE="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "bench_scale.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
ANALYZE_S=10 PLAN_S=60 RSS_MIB=4096
mkdir -p "$WORK"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMEMPLAN_BUILD_TESTS=OFF -DMEMPLAN_WITH_CUDA=OFF >&2
fi
cmake --build "$BUILD_DIR" -j2 --target memplan >&2
MEMPLAN="$BUILD_DIR/cli/memplan"
G="$WORK/chain_$OPS.graph.json"
/usr/bin/python3 "$BENCH_DIR/gen_graph.py" --ops "$OPS" --shape chain -o "$G"

# measure NAME CMD...: runs CMD on core 0; sets RC, WALL, RSS (MiB).
measure() {
  local name=$1
  shift
  local tf="$WORK/$name.time"
  set +e
  taskset -c 0 /usr/bin/time -o "$tf" -f "%e %M" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RC=$?
  set -e
  read -r WALL rss_kib < <(tail -1 "$tf")
  RSS=$(awk -v k="$rss_kib" 'BEGIN{printf "%.1f", k/1024}')
  echo "[scale] $name: rc $RC, $WALL s, $RSS MiB" >&2
}

measure analyze "$MEMPLAN" analyze "$G" --json "$WORK/analyze.json" -q
A_RC=$RC A_WALL=$WALL A_RSS=$RSS
PEAK=$(/usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['peak_bytes'])" "$WORK/analyze.json")
FLOOR=$(/usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['lower_bound_bytes'])" "$WORK/analyze.json")
BUDGET=$(/usr/bin/python3 -c "import sys;print(int(int(sys.argv[1])*float(sys.argv[2])))" "$PEAK" "$FRACTION")
measure plan "$MEMPLAN" plan "$G" --budget "$BUDGET" -o "$WORK/plan.json" --json "$WORK/plan.report.json" -q
P_RC=$RC P_WALL=$WALL P_RSS=$RSS
measure verify "$MEMPLAN" verify "$G" "$WORK/plan.json" --json "$WORK/verify.json" -q
V_RC=$RC V_WALL=$WALL V_RSS=$RSS

W_RC=-1 W_WALL=0 W_RSS=0
if ((WIDE > 0)); then
  W="$WORK/wide_$WIDE.graph.json"
  /usr/bin/python3 - "$WIDE" "$W" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
chain = 1000
with open(path, "w") as f:
    f.write('{"format": "memplan.graph/1", "name": "wide_%d", "tensors": [\n' % n)
    f.write('{"id": "x", "shape": [1024], "dtype": "float32", "kind": "input"},\n')
    f.write('{"id": "w", "shape": [1024], "dtype": "float32", "kind": "parameter"}')
    for i in range(chain):
        f.write(',\n{"id": "h%d", "shape": [1024], "dtype": "float32"}' % i)
    f.write(',\n{"id": "loss", "shape": [], "dtype": "float32"}')
    buf = []
    for i in range(n - chain - 3):
        buf.append(',\n{"id": "p%d", "shape": [1], "dtype": "float32", "kind": "parameter"}' % i)
        if len(buf) == 100000:
            f.write("".join(buf))
            buf = []
    f.write("".join(buf))
    f.write('],\n"ops": [\n{"id": "op0", "type": "mul", "inputs": ["x", "w"], "outputs": ["h0"]}')
    for i in range(1, chain):
        f.write(',\n{"id": "op%d", "type": "gelu", "inputs": ["h%d"], "outputs": ["h%d"]}'
                % (i, i - 1, i))
    f.write(',\n{"id": "loss_fn", "type": "mean", "inputs": ["h%d"], "outputs": ["loss"]}'
            % (chain - 1))
    f.write('],\n"outputs": ["loss"]}\n')
PY
  measure wide "$MEMPLAN" analyze "$W" --json "$WORK/wide.json" -q
  W_RC=$RC W_WALL=$WALL W_RSS=$RSS
  rm -f "$W"
fi

/usr/bin/python3 - "$WORK" "$REPO" "$OPS" "$FRACTION" "$PEAK" "$FLOOR" "$BUDGET" \
  "$A_RC" "$A_WALL" "$A_RSS" "$P_RC" "$P_WALL" "$P_RSS" "$V_RC" "$V_WALL" "$V_RSS" \
  "$ANALYZE_S" "$PLAN_S" "$RSS_MIB" "$WIDE" "$W_RC" "$W_WALL" "$W_RSS" <<'PY'
import json, os, platform, subprocess, sys, time
(work, repo, ops, fraction, peak, floor, budget, a_rc, a_wall, a_rss, p_rc, p_wall, p_rss,
 v_rc, v_wall, v_rss, analyze_s, plan_s, rss_mib, wide, w_rc, w_wall, w_rss) = sys.argv[1:]
ops, peak, floor, budget = int(ops), int(peak), int(floor), int(budget)
analyze_s, plan_s, rss_mib = float(analyze_s), float(plan_s), float(rss_mib)
plan = json.load(open(os.path.join(work, "plan.report.json")))
verify = json.load(open(os.path.join(work, "verify.json")))
def commit():
    try:
        c = subprocess.run(["git", "-C", repo, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + (" + local changes" if dirty else "")
    except OSError:
        return "unknown"
cpu = "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
def row(name, rc, wall, rss, target_s, ok_rcs):
    wall, rss, rc = float(wall), float(rss), int(rc)
    ok = rc in ok_rcs and wall < target_s and rss < rss_mib
    return {"command": name, "rc": rc, "wall_s": wall, "max_rss_mib": rss,
            "target_wall_s": target_s, "target_rss_mib": rss_mib, "met": ok}
rows = [row("analyze", a_rc, a_wall, a_rss, analyze_s, (0,)),
        row("plan", p_rc, p_wall, p_rss, plan_s, (0, 3)),
        row("verify", v_rc, v_wall, v_rss, analyze_s, (0,))]
pred = plan.get("predicted", {})
VERIFY_KIND = ("consistency check: memplan verify replays memplan's own plan in memplan's "
               "simulator; not a measurement")
doc = {
    "benchmark": "bench/bench_scale.sh",
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"cpu": cpu, "cpus_used": 1, "pinned": "taskset -c 0"},
    "commit": commit(),
    "graph": {"generator": "bench/gen_graph.py --shape chain", "ops": ops,
              "baseline_peak_bytes": peak, "lower_bound_bytes": floor},
    "budget_bytes": budget, "budget_fraction_of_peak": float(fraction),
    "plan": {"feasible": plan.get("feasible"), "peak_bytes": pred.get("peak_bytes"),
             "recompute_cost": pred.get("recompute_cost"), "cost_unit": pred.get("cost_unit"),
             "recomputed_tensors": len(plan.get("recomputed", [])) if isinstance(plan.get("recomputed"), list) else plan.get("recomputed"),
             "verified_peak_bytes": verify.get("peak_bytes"), "verify_valid": verify.get("valid"),
             "verify_kind": VERIFY_KIND},
    "runs": rows,
    "all_met": all(r["met"] for r in rows),
}
if int(wide) > 0:
    doc["wide"] = {"tensors": int(wide), "command": "analyze", "rc": int(w_rc),
                   "wall_s": float(w_wall), "max_rss_mib": float(w_rss)}
with open(os.path.join(repo, "bench", "results", "scale.json"), "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
MiB = 1 << 20
md = ["# memplan scale check (issue 7)", "",
      "%s, %s, one core (`taskset -c 0`), Release build, commit %s." % (doc["date"], cpu, doc["commit"]),
      "",
      "Graph: `bench/gen_graph.py --ops %d --shape chain` (alternating linear/gelu, 256 KiB "
      "activations); baseline peak %.1f MiB, floor %.1f MiB; plan budget %.0f%% of the peak = "
      "%.1f MiB. Wall time and max RSS from `/usr/bin/time -f \"%%e %%M\"`." %
      (ops, peak / MiB, floor / MiB, 100 * float(fraction), budget / MiB),
      "",
      "| command | exit | wall s | target s | max RSS MiB | target MiB | met |",
      "|---|---:|---:|---:|---:|---:|---|"]
for r in rows:
    md.append("| `memplan %s` | %d | %.2f | %.0f | %.1f | %.0f | %s |" %
              (r["command"], r["rc"], r["wall_s"], r["target_wall_s"], r["max_rss_mib"],
               r["target_rss_mib"], "yes" if r["met"] else "**no**"))
p = doc["plan"]
md += ["",
       "Plan: feasible %s, planned peak %s bytes, recompute cost %s %s. Consistency check, not "
       "a measurement: `memplan verify` (memplan's own simulator) replays the plan at %s bytes, "
       "valid %s." % (p["feasible"], p["peak_bytes"], p["recompute_cost"], p["cost_unit"],
                      p["verified_peak_bytes"], p["verify_valid"]),
       "", "All targets met: %s." % ("yes" if doc["all_met"] else "**no**"), ""]
if "wide" in doc:
    w = doc["wide"]
    md += ["Wide graph (`--wide %d`: %d tensors, all but 1003 of them unused [1] parameters, "
           "beside a 1000-op chain): `memplan analyze` exit %d, %.2f s, %.1f MiB max RSS." %
           (w["tensors"], w["tensors"], w["rc"], w["wall_s"], w["max_rss_mib"]), ""]
with open(os.path.join(repo, "bench", "results", "scale.md"), "w") as f:
    f.write("\n".join(md))
print("\n".join(md))
sys.exit(0 if doc["all_met"] else 1)
PY
