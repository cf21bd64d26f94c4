"""Llama-shaped models at scale (issue 17, "At scale"): Llama-2 7B, 13B and 70B
shapes, exported on the meta device, one rank's training step under FSDP2 on
8 to 512 ranks of 80 GB, with and without memplan's checkpoint plans; beside
them DeepSpeed's ZeRO-3 formula (re-implemented) and accelerate's model-state estimates.

For each model (exported once, cached in --work) and each world size N:
  analyze   memplan analyze, micro-batch 1 x seq 4096, Adam, --parallel fsdp
            --world-size N, FSDP units = the decoder layers (see FSDP_UNITS):
            the per-rank peak without a plan
  plan      memplan plan --budget 80GB at micro-batch 1, twice: op granularity
            (memplan's default: any tensor may be recomputed) and module
            granularity (--granularity module --module-depth 4: whole decoder
            layers wrapped in checkpoint())
  floor     memplan plan --budget 1 --granularity module: the lowest per-rank
            peak whole-layer checkpointing reaches at micro-batch 1 (exit 3,
            the report holds the lowest peak found)
  search    memplan plan --global-batch N*64 --budget 80GB, op and module
            granularity: the largest micro-batch per rank that fits, with the
            baseline program and with checkpointing
Every memplan call is timed (wall seconds, max RSS; target: under 10 s on the
2 cores here). Peers, per rank: DeepSpeed's formula, re-implemented
(estimate_zero3_model_states_mem_needs, no offload; deepspeed is not installed), accelerate estimate-memory's "Training using Adam" figure.

Usage: bench/llama_scale.py [--memplan PATH] [--work DIR] [--models 7b,13b,70b]
       [--worlds 8,16,...] [--per-rank 64] [--timeout S] [--op-search-models 7b]
       [--op-search-timeout S] [--note TEXT] [--json OUT] [--md OUT] [--readme OUT]     (bench/llama_scale.sh sets up accelerate and runs it)
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH")]))  # for `python -m memplan`

GB = 10**9
BUDGET = "80GB"  # memplan parses GB as 10^9 bytes: 80e9 B per rank
BUDGET_BYTES = 80 * GB
SEQ = 4096
WORLDS = [8, 16, 32, 64, 128, 256, 512]
# FSDP2 MixedPrecisionPolicy(param_dtype): fp32 shards and Adam, compute in it.
PARAM_DTYPE = "bfloat16"


def precision():
    return "fp32" if PARAM_DTYPE == "float32" else f"fp32 shards and Adam, {PARAM_DTYPE} compute"
TARGET_S = 10.0

# Llama-2 shapes (the published configs: vocab 32000, 4096 positions, untied
# embeddings). fp32 as the exporter builds them.
MODELS = {
    "7b": dict(name="llama2-7b", label="Llama-2-7B", hidden_size=4096, intermediate_size=11008,
               num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32),
    "13b": dict(name="llama2-13b", label="Llama-2-13B", hidden_size=5120,
                intermediate_size=13824, num_hidden_layers=40, num_attention_heads=40,
                num_key_value_heads=40),
    "70b": dict(name="llama2-70b", label="Llama-2-70B", hidden_size=8192,
                intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                num_key_value_heads=8),
}
CONFIG_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads")


def spec_of(m):
    kv = ",".join(f"{k}={m[k]}" for k in CONFIG_KEYS)
    return f"hf:llama:{kv},vocab_size=32000,max_position_embeddings=4096,seq={SEQ}"


def fsdp_units(m):
    """FSDP2 as the HF/accelerate recipe applies it: fully_shard on every
    decoder layer, then on the root (embeddings, final norm, lm_head). The
    CLI's default depth (that of the first numbered modules) picks the same
    units on these scopes; listing them keeps the bench independent of it."""
    return [f"lm.model.layers.{i}" for i in range(m["num_hidden_layers"])]


def short_cmd(cmd):
    """The command with the --fsdp-modules list written as a brace range."""
    out, i = [], 0
    while i < len(cmd):
        out.append(cmd[i])
        if cmd[i] == "--fsdp-modules":
            j = i + 1
            while j < len(cmd) and cmd[j].startswith("lm.model.layers."):
                j += 1
            out.append(f"lm.model.layers.{{0..{j - i - 2}}}")
            i = j
            continue
        i += 1
    return " ".join(shlex.quote(c) if "{" not in c else c for c in out)


def parse_time_v(path):
    """(wall seconds, max RSS bytes) from GNU time -v output."""
    t = open(path).read()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1)
    secs = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":"))))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) * 1024
    return secs, rss


# --------------------------------------------------------------------------
# Export (cached)
# --------------------------------------------------------------------------
def export(key, work, python, log):
    m = MODELS[key]
    spec = spec_of(m)
    graph = os.path.join(work, m["name"] + ".graph.json")
    timef = os.path.join(work, m["name"] + ".time.txt")
    statsf = os.path.join(work, m["name"] + ".stats.json")
    cmd = [python, "-m", "memplan", "export", spec,
           "--batch", "1", "--device", "meta", "-o", graph + ".tmp", "-q"]
    rec = {"spec": spec, "graph": graph,
           "command": short_cmd(cmd).replace(graph + ".tmp", graph)}
    if os.path.exists(graph):
        rec["cached"] = True
        log(f"{m['name']}: export cached ({graph})")
    else:
        rec["cached"] = False
        log(f"{m['name']}: exporting (may take minutes)")
        with open(statsf, "w") as out, open(os.path.join(work, m["name"] + ".stderr.txt"), "w") as err:
            rc = subprocess.run(["/usr/bin/time", "-v", "-o", timef] + cmd, stdout=out,
                                stderr=err, cwd=ROOT).returncode
        if rc != 0:
            rec["error"] = f"exit {rc}: " + open(os.path.join(work, m["name"] + ".stderr.txt")).read()[-2000:]
            return rec
        os.replace(graph + ".tmp", graph)
    if os.path.exists(timef):
        try:
            rec["wall_seconds"], rec["max_rss_bytes"] = parse_time_v(timef)
        except (AttributeError, ValueError):
            pass
    try:
        s = json.load(open(statsf))
        rec.update({k: s[k] for k in ("ops", "forward_ops", "tensors", "symbols", "symbolic_dims")
                    if k in s})
    except (OSError, ValueError):
        pass
    rec["graph_bytes"] = os.path.getsize(graph)
    return rec


# --------------------------------------------------------------------------
# Peers: DeepSpeed ZeRO-3 and accelerate, from the model built on meta
# --------------------------------------------------------------------------
def model_counts(key):
    """(total params, largest layer params, the meta model) as DeepSpeed's
    model_to_params counts them (deepspeed/runtime/zero/stage3.py), except
    that shared parameters are told apart by identity: on the meta device
    every data_ptr() is 0, and its dict keyed on data_ptr() would keep one."""
    from memplan.torch import _hf as hf_models
    model = hf_models.build(spec_of(MODELS[key]).split(":", 1)[1], device="meta")
    total = sum({id(p): p.numel() for p in model.parameters()}.values())
    largest = 0
    for mod in model.modules():
        largest = max(largest, sum(p.numel() for p in mod.parameters(recurse=False)))
    return total, largest, model


def deepspeed_zero3_estimate(total_params, largest_layer_params, num_gpus_per_node=1,
                             num_nodes=1, cpu_offload=False, cpu_offload_params=False,
                             zero_init=True, additional_buffer_factor=1.5):
    """DeepSpeed's estimate_zero3_model_states_mem_needs
    (deepspeed/runtime/zero/stage3.py), written out because deepspeed is not
    installed here; the same arithmetic (checked against deepspeedai/DeepSpeed
    master). Without offload:
        largest_layer_memory = 4 * largest_layer_params
        gpu = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu = largest_layer_params * 4 * num_gpus_per_node * 1.5   (zero_init)
    The 18 bytes per parameter are DeepSpeed's mixed-precision model states
    (fp16 parameter and gradient, fp32 master copy and Adam moments) plus its
    buffers; the 4 x largest layer is the gathered fp16 layer (parameter and
    gradient). Returns (cpu_mem, gpu_mem, largest_layer_memory) in bytes."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


def accelerate_figures(model):
    """accelerate estimate-memory's figures from its own code (float32 row):
    bench/peers_lib.accelerate_estimate. One device, the whole model: it
    knows nothing of sharding."""
    sys.path.insert(0, BENCH)
    try:
        import peers_lib
        return peers_lib.accelerate_estimate(model)
    except ImportError as e:
        return {"error": f"accelerate not importable: {e}"}


# --------------------------------------------------------------------------
# memplan calls
# --------------------------------------------------------------------------
class Memplan:
    def __init__(self, binary, tmp, timeout, log):
        self.binary, self.tmp, self.timeout, self.log = binary, tmp, timeout, log
        self.n = 0

    def __call__(self, what, args, timeout=None):
        """Run `memplan args --json X -q`, timed with GNU time; returns a
        record: command, rc, wall_seconds, max_rss_bytes, report (the JSON)."""
        self.n += 1
        out = os.path.join(self.tmp, f"r{self.n}.json")
        timef = os.path.join(self.tmp, f"t{self.n}.txt")
        cmd = [self.binary] + args + ["--json", out, "-q"]
        rec = {"what": what, "command": short_cmd(cmd).replace(out, "OUT.json"),
               "argv": cmd[1:-3]}
        t0 = time.perf_counter()
        # its own session, so a timeout ends memplan too (not only GNU time)
        p = subprocess.Popen(["/usr/bin/time", "-f", "%e %M", "-o", timef] + cmd,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            _, err = p.communicate(timeout=timeout or self.timeout)
            rec["rc"] = p.returncode
            if err.strip():
                rec["stderr"] = err.strip()[-2000:]
            try:
                e, kb = open(timef).read().split()[-2:]
                rec["wall_seconds"], rec["max_rss_bytes"] = float(e), int(kb) * 1024
            except (OSError, ValueError):
                rec["wall_seconds"] = round(time.perf_counter() - t0, 2)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            rec["rc"] = None
            rec["timed_out"] = True
            rec["wall_seconds"] = round(time.perf_counter() - t0, 2)
            rec["stderr"] = f"killed after {timeout or self.timeout} s (timeout)"
        if os.path.exists(out):
            rec["report"] = json.load(open(out))
            os.remove(out)
        flag = "" if rec["wall_seconds"] <= TARGET_S else f"  OVER {TARGET_S:.0f} s"
        self.log(f"    {what}: rc={rec['rc']} {rec['wall_seconds']:.2f} s{flag}")
        return rec


def summarize_analyze(r):
    d = r.get("report")
    if not d:
        return None
    par = d["graph"].get("parallel", {})
    return {"peak_bytes": d["peak_bytes"], "peak_op": d["peak_op"], "peak_phase": d["peak_phase"],
            "lower_bound_bytes": d["lower_bound_bytes"], "resident_bytes": d["resident_bytes"],
            "reserved_peak_bytes": d.get("reserved", {}).get("peak_bytes"),
            "by_category_at_peak": d.get("by_category"),
            "parameter_bytes": par.get("parameter_bytes"),
            "optimizer_state_bytes": par.get("optimizer_state_bytes"),
            "units": len(par.get("units", [])), "unit_names": par.get("units")}


def summarize_plan(r):
    d = r.get("report")
    if not d:
        return None
    pred = d.get("predicted", {})
    return {"feasible": d.get("feasible"), "peak_bytes": pred.get("peak_bytes"),
            "baseline_peak_bytes": pred.get("baseline_peak_bytes"),
            "min_feasible_peak_bytes": d.get("min_feasible_peak_bytes"),
            "recompute_overhead": d.get("recompute_overhead"),
            "reserved_peak_bytes": d.get("reserved", {}).get("peak_bytes"),
            "modules": d.get("modules"), "algorithm": d.get("algorithm"),
            "evaluations": d.get("evaluations"), "granularity": d.get("granularity")}


def summarize_search(r, cap):
    d = r.get("report")
    if not d:
        return None
    s = {"global_batch": d.get("global_batch"), "per_rank_batch": cap,
         "feasible": d.get("feasible"), "recommended": d.get("recommended"),
         "parameter_gradient_bytes": d.get("parameter_gradient_bytes"),
         "evaluations": d.get("search", {}).get("evaluations")}
    for k in ("baseline", "checkpointed"):
        c = d.get(k) or {}
        s[k] = {"found": c.get("found"), "micro_batch": c.get("micro_batch") if c.get("found") else None,
                "accumulation_steps": c.get("accumulation_steps"), "peak_bytes": c.get("peak_bytes"),
                "next_peak_bytes": c.get("next_peak_bytes"),
                "recompute_overhead": c.get("recompute_overhead"),
                "lowest_peak_bytes": c.get("lowest_peak_bytes"),
                "at_cap": bool(c.get("found") and c.get("micro_batch") == cap)}
    s["evaluated"] = d.get("evaluated")
    return s


def run_world(mp, key, graph, world, per_rank, skip_op_search, op_timeout):
    m = MODELS[key]
    common = ["--optimizer", "adam", "--parallel", "fsdp", "--world-size", str(world),
              "--fsdp-param-dtype", PARAM_DTYPE, "--fsdp-modules"] + fsdp_units(m)
    b1 = ["--set", "batch=1", "--set", f"seq={SEQ}"]
    module = ["--granularity", "module", "--module-depth", "4"]
    calls = {}
    calls["analyze_b1"] = mp("analyze b1", ["analyze", graph] + b1 + common)
    calls["plan_op_b1"] = mp("plan op b1", ["plan", graph] + b1 + ["--budget", BUDGET] + common)
    calls["plan_module_b1"] = mp("plan module b1",
                                 ["plan", graph] + b1 + ["--budget", BUDGET] + module + common)
    calls["floor_module_b1"] = mp("lowest module b1",
                                  ["plan", graph] + b1 + ["--budget", "1"] + module + common)
    gb = ["--set", f"seq={SEQ}", "--budget", BUDGET, "--global-batch", str(world * per_rank)]
    calls["search_module"] = mp("search module", ["plan", graph] + gb + module + common)
    # --global-batch plans on allocated bytes only: the largest micro-batch
    # whose whole-layer plan fits 80 GB reserved, by bisection below the
    # allocated answer, one micro-batch step each (no accumulation: FSDP's
    # accumulated gradients are sharded, a few GB at most).
    search_module = summarize_search(calls["search_module"], per_rank)
    found = (search_module or {}).get("checkpointed", {})
    lo, hi, probes = 0, found.get("micro_batch") or 0, []
    while lo < hi:
        b = (lo + hi + 1) // 2
        c = mp(f"layers, reserved, batch {b}",
               ["plan", graph, "--set", f"batch={b}", "--set", f"seq={SEQ}", "--budget", BUDGET,
                "--budget-of", "reserved"] + module + common)
        rep = c.pop("report", None) or {}
        c.pop("argv", None)
        probes.append(dict(c, batch=b, reserved_peak_bytes=rep.get("reserved", {}).get(
            "peak_bytes"), fits=c["rc"] == 0))
        lo, hi = (b, hi) if c["rc"] == 0 else (lo, b - 1)
    reserved_fit = {"micro_batch": lo, "probes": probes}
    if skip_op_search:
        calls["search_op"] = {"what": "search op", "skipped": skip_op_search}
    else:
        calls["search_op"] = mp("search op", ["plan", graph] + gb + common, timeout=op_timeout)
    res = {"world_size": world,
           "analyze_b1": summarize_analyze(calls["analyze_b1"]),
           "plan_op_b1": summarize_plan(calls["plan_op_b1"]),
           "plan_module_b1": summarize_plan(calls["plan_module_b1"]),
           "floor_module_b1": summarize_plan(calls["floor_module_b1"]),
           "search_module": search_module,
           "layers_reserved": reserved_fit,
           "search_op": summarize_search(calls["search_op"], per_rank)}
    for c in calls.values():
        c.pop("report", None)
        c.pop("argv", None)
    res["calls"] = calls
    return res


def fsdp_depth_check(mp, key, graph, world):
    """The FSDP units the CLI's depth default makes of these scopes, beside the
    decoder layers listed explicitly (one world size, micro-batch 1)."""
    m = MODELS[key]
    b1 = ["analyze", graph, "--set", "batch=1", "--set", f"seq={SEQ}", "--optimizer", "adam",
          "--parallel", "fsdp", "--world-size", str(world)]
    out = {}
    for label, extra in (("depth2_default", []), ("depth4", ["--fsdp-depth", "4"]),
                         ("decoder_layers", ["--fsdp-modules"] + fsdp_units(m))):
        r = mp(f"fsdp units {label}", b1 + extra)
        a = summarize_analyze(r)
        r.pop("report", None)
        r.pop("argv", None)
        if a:
            names = a.pop("unit_names") or []
            a["unit_names_sample"] = names[:4] + (["..."] if len(names) > 6 else []) + names[-2:] \
                if len(names) > 6 else names
        out[label] = {"result": a, "call": r}
    return out


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def gb(x, nd=1):
    return "-" if x is None else f"{x / GB:.{nd}f}"


def pct(x):
    return f"{100 * x:.1f}%" if x < 0.01 else f"{100 * x:.0f}%"


def mb_cell(s, which):
    if not s:
        return "n/a"
    c = s[which]
    if not c["found"]:
        low = c.get("lowest_peak_bytes")
        return "none fits" + (f" (lowest {gb(low)})" if low else "")
    txt = str(c["micro_batch"]) + ("+" if c["at_cap"] else "")
    if which == "checkpointed" and c.get("recompute_overhead"):
        txt += f" ({pct(c['recompute_overhead'])})"
    return txt


def reserved_cell(r):
    rf = r.get("layers_reserved")
    if not rf:
        return "n/a"
    return str(rf["micro_batch"]) if rf["micro_batch"] else "none fits"


def reserved_secs(r):
    probes = (r.get("layers_reserved") or {}).get("probes", [])
    return f"{sum(p['wall_seconds'] for p in probes):.1f} ({len(probes)} plans)" if probes else "-"


def op_mb_cell(r):
    so, c = r["search_op"], r["calls"]["search_op"]
    if so:
        return mb_cell(so, "checkpointed")
    if c.get("timed_out"):
        return f"killed at {c['wall_seconds']:.0f} s"
    return "not run"


def plan_cell(p):
    if not p:
        return "n/a"
    if p["feasible"]:
        rc = p.get("recompute_overhead") or 0
        return gb(p["peak_bytes"]) + (f" ({pct(rc)})" if rc else "")
    return f"no fit (lowest {gb(p['min_feasible_peak_bytes'])})"


def secs(call):
    if not call or call.get("skipped"):
        return "skipped"
    w = call.get("wall_seconds")
    t = f"{w:.1f}" if w is not None else "?"
    if call.get("timed_out"):
        t = f">{w:.0f} (killed)"
    return f"**{t}**" if w is not None and w > TARGET_S else t


def write_md(doc, path):
    L = []
    w = L.append
    w("# Llama-shaped models at scale: FSDP on 8 to 512 ranks of 80 GB")
    w("")
    w(f"Generated by `bench/llama_scale.sh` on {doc['date']} — machine: {doc['machine']}; "
      f"memplan commit {doc['commit']} (binary `{doc['memplan']}`, sha256 {doc['memplan_sha256'][:12]}); "
      f"torch {doc['versions']['torch']}, transformers {doc['versions']['transformers']}, "
      f"accelerate {doc['versions'].get('accelerate', 'n/a')}.")
    w("")
    w("## Method")
    w("")
    for line in doc["method"]:
        w(f"- {line}")
    w("")
    w("## Exports (`memplan export ... --batch 1 --device meta`, symbolic batch and seq)")
    w("")
    w("| model | parameters | ops | tensors | graph file | export wall | export max RSS |")
    w("|---|---:|---:|---:|---:|---:|---:|")
    for key, mr in doc["models"].items():
        e = mr["export"]
        ws = f"{e['wall_seconds']:.0f} s" if "wall_seconds" in e else "?"
        rss = f"{e['max_rss_bytes'] / 2**30:.2f} GiB" if "max_rss_bytes" in e else "?"
        w(f"| {mr['label']} | {mr['params'] / 1e9:.2f} B | {e.get('ops', '?')} | {e.get('tensors', '?')} | "
          f"{e.get('graph_bytes', 0) / 2**20:.1f} MiB | {ws} | {rss} |")
    w("")
    for key, mr in doc["models"].items():
        w(f"## {mr['label']} ({mr['params'] / 1e9:.2f} B parameters, {precision()}, seq {SEQ}, Adam)")
        w("")
        if "error" in mr:
            w(f"Not run: {mr['error']}")
            w("")
            continue
        w("Per rank, GB = 10^9 B. Peaks at micro-batch 1; the plan columns at `--budget 80GB` "
          "(recompute overhead in brackets, as a share of one step's time); micro-batch = the "
          f"largest per rank that fits 80 GB, searched up to {doc['per_rank']} (`+`: the search's cap).")
        w("")
        w("| ranks | peak, no plan | plan (op) | plan (layers) | lowest (layers) | micro-batch, no plan | "
          "micro-batch, plan (op) | micro-batch, plan (layers) | micro-batch, plan (layers), "
          "80 GB reserved | memplan model states | "
          "DeepSpeed ZeRO-3 (its formula, re-implemented) | accelerate (1 device) |")
        w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in mr["worlds"]:
            a = r["analyze_b1"]
            states = (a["parameter_bytes"] + a["optimizer_state_bytes"]) if a else None
            # gradients: sharded like the parameters (same bytes)
            states = states + a["parameter_bytes"] if a else None
            fl = r["floor_module_b1"]
            low = gb(fl["min_feasible_peak_bytes"]) if fl else "n/a"
            sm, so = r["search_module"], r["search_op"]
            w(f"| {r['world_size']} | {gb(a['peak_bytes']) if a else 'n/a'} | {plan_cell(r['plan_op_b1'])} | "
              f"{plan_cell(r['plan_module_b1'])} | {low} | {mb_cell(sm or so, 'baseline')} | "
              f"{op_mb_cell(r)} | {mb_cell(sm, 'checkpointed')} | "
              f"{reserved_cell(r)} | "
              f"{gb(states)} | {gb(r['peers']['deepspeed_zero3_gpu_bytes'])} | "
              f"{gb(mr['accelerate'].get('training_adam_bytes'))} |")
        w("")
        w("Wall seconds of each memplan call (bold: over the 10 s target):")
        w("")
        w("| ranks | analyze | plan op | plan layers | lowest layers | search layers | "
          "search layers, reserved | search op |")
        w("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in mr["worlds"]:
            c = r["calls"]
            w(f"| {r['world_size']} | {secs(c['analyze_b1'])} | {secs(c['plan_op_b1'])} | "
              f"{secs(c['plan_module_b1'])} | {secs(c['floor_module_b1'])} | "
              f"{secs(c['search_module'])} | {reserved_secs(r)} | "
              f"{secs(c['search_op'])} |")
        w("")
    if doc.get("fsdp_units_check"):
        w("## FSDP units: the CLI's `--fsdp-depth` on these scopes")
        w("")
        chk = doc["fsdp_units_check"]
        w(f"{chk['model']} on {chk['world_size']} ranks, micro-batch 1 (the exporter's scopes are "
          "`lm.model.layers.K...`: the `lm.` of its CausalLM wrapper comes first).")
        w("")
        w("| FSDP units | units | per-rank peak | peak op |")
        w("|---|---:|---:|---|")
        for label, v in chk["runs"].items():
            a = v["result"]
            if a:
                w(f"| {label}: {', '.join(a['unit_names_sample'])} | {a['units']} | "
                  f"{gb(a['peak_bytes'], 2)} | `{a['peak_op']}` |")
        w("")
    w("## Misses and problems")
    w("")
    for p in doc["problems"] or ["none"]:
        w(f"- {p}")
    w("")
    w("## Commands")
    w("")
    w("Exact commands (with the output file as OUT.json and the --fsdp-modules list as a brace "
      "range) are in `bench/results/llama_scale.json` under each call; the shapes, e.g. for "
      f"{doc['models'][next(iter(doc['models']))]['label']}:")
    w("")
    first = doc["models"][next(iter(doc["models"]))]
    w("```")
    w(first["export"]["command"])
    if first.get("worlds"):
        for c in first["worlds"][0]["calls"].values():
            if "command" in c:
                w(c["command"])
    w("```")
    open(path, "w").write("\n".join(L) + "\n")


def write_readme(doc, path):
    L = []
    w = L.append
    w("### At scale: Llama-2 shapes under FSDP, 80 GB per rank")
    w("")
    w(f"One rank's step ({precision()}, Adam, seq {SEQ}) of Llama-2-shaped models exported with "
      "`--device meta`, under FSDP2 (`fully_shard` per decoder layer, then the root) on 8 to 512 "
      "ranks, against an 80 GB (80e9 B) budget per rank. *Peak* is at micro-batch 1; "
      "*micro-batch* is the largest per rank that fits (`memplan plan --global-batch`), without "
      "a plan, with memplan's op-level plan and with whole-layer `checkpoint()` "
      "(`--granularity module`; recompute overhead in brackets, as memplan costs it), and with "
      "whole layers against 80 GB of what PyTorch's caching allocator would reserve (`plan "
      "--set batch=B --budget-of reserved`, bisected below the allocated answer, one micro-batch "
      "step: `--global-batch` plans on allocated bytes, as the other columns do); *lowest* is "
      "the micro-batch-1 peak with every layer checkpointed. *Model states* are memplan's sharded "
      "parameters, gradients and Adam state per rank (16 B per parameter / ranks). DeepSpeed: "
      "DeepSpeed's formula, re-implemented (its function is not run: deepspeed is not "
      "installed), `estimate_zero3_model_states_mem_needs` per GPU (no offload); accelerate: "
      "`estimate-memory`'s fp32 *Training using Adam* (one device, not sharded). GB = 10^9 B.")
    w("")
    w("| model | ranks | peak, no plan | reserved, no plan | lowest, layers checkpointed | "
      "micro-batch: no plan / op plan / layers / layers, reserved | memplan model states | "
      "DeepSpeed ZeRO-3 (its formula, re-implemented) | "
      "accelerate |")
    w("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for key, mr in doc["models"].items():
        for r in mr.get("worlds", []):
            a = r["analyze_b1"]
            sm, so = r["search_module"], r["search_op"]
            mbs = " / ".join([mb_cell(sm or so, "baseline"),
                              op_mb_cell(r),
                              mb_cell(sm, "checkpointed"),
                              reserved_cell(r)])
            fl = r["floor_module_b1"]
            states = 2 * a["parameter_bytes"] + a["optimizer_state_bytes"] if a else None
            w(f"| {mr['label']} | {r['world_size']} | {gb(a['peak_bytes']) if a else 'n/a'} | "
              f"{gb(a['reserved_peak_bytes']) if a else 'n/a'} | "
              f"{gb(fl['min_feasible_peak_bytes']) if fl else 'n/a'} | {mbs} | {gb(states)} | "
              f"{gb(r['peers']['deepspeed_zero3_gpu_bytes'])} | "
              f"{gb(mr['accelerate'].get('training_adam_bytes'))} |")
    w("")
    times = [c["wall_seconds"] for mr in doc["models"].values() for r in mr.get("worlds", [])
             for c in r["calls"].values() if c.get("wall_seconds") is not None]
    over = [t for t in times if t > TARGET_S]
    if times:
        w(f"Time on 2 cores: {len(times)} memplan calls, median "
          f"{sorted(times)[len(times) // 2]:.2f} s, slowest {max(times):.1f} s; "
          f"{len(over)} over the 10 s target" +
          (" (listed in `bench/results/llama_scale.md`)." if over else "."))
    w("")
    for line in doc["readme_notes"]:
        w(line)
    open(path, "w").write("\n".join(L) + "\n")


def call_problems(doc):
    """Calls over the 10 s target, killed, or with an unexpected exit (exit 3,
    no plan or micro-batch fits, is an answer, not an error)."""
    out = []
    for mr in doc["models"].values():
        for r in mr.get("worlds", []):
            for name, c in r["calls"].items():
                if c.get("skipped"):
                    continue
                where = f"{mr['label']}, {r['world_size']} ranks, {c['what']}"
                if c.get("timed_out"):
                    out.append(f"{where}: killed after {c['wall_seconds']:.0f} s (timeout)")
                    continue
                if c["wall_seconds"] > TARGET_S:
                    out.append(f"{where}: {c['wall_seconds']:.1f} s (target 10 s)")
                ok = {0} if name.startswith("analyze") else {0, 3}
                if c.get("rc") not in ok:
                    out.append(f"{where}: exit {c.get('rc')}: {c.get('stderr', '')[:300]}")
    return out


def monotone_problems(doc):
    """Micro-batch answers that fall as the world size grows: more ranks shard
    the same model states thinner and leave each rank's activations as they
    are, so the model says no answer may fall (a fall is a search's miss)."""
    columns = (("micro-batch, no plan",  # as the table's cell: the op search's where no module one
                lambda r: (r.get("search_module") or r.get("search_op") or {}).get("baseline")),
               ("micro-batch, plan (op)", lambda r: (r.get("search_op") or {}).get("checkpointed")),
               ("micro-batch, plan (layers)",
                lambda r: (r.get("search_module") or {}).get("checkpointed")),
               ("micro-batch, plan (layers), 80 GB reserved", lambda r: r.get("layers_reserved")))
    out = []
    for mr in doc["models"].values():
        worlds = sorted(mr.get("worlds", []), key=lambda r: r["world_size"])
        for label, cell in columns:
            last = None  # (world, micro-batch) of the last world with an answer
            for r in worlds:
                c = cell(r)
                if not c:  # not run
                    continue
                mb = (c.get("micro_batch") or 0) if c.get("found", True) else 0
                if last and mb < last[1]:
                    out.append(f"{mr['label']}, {label}: {mb} on {r['world_size']} ranks, "
                               f"below {last[1]} on {last[0]} (not monotone in the world size)")
                last = (r["world_size"], mb)
    return out


def machine():
    cpu, mem = "", ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
        mem = next(f"{int(l.split()[1]) / 2**20:.1f} GiB RAM" for l in open("/proc/meminfo")
                   if l.startswith("MemTotal"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, {mem}, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--work", default="/tmp/llama_scale", help="exported graphs are cached here")
    ap.add_argument("--models", default="7b,13b,70b")
    ap.add_argument("--fsdp-param-dtype", default="bfloat16",
                    help="FSDP2 MixedPrecisionPolicy param_dtype (float32: none)")
    ap.add_argument("--worlds", default=",".join(map(str, WORLDS)))
    ap.add_argument("--per-rank", type=int, default=64,
                    help="--global-batch is world x this: the micro-batch search's cap per rank")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per memplan call")
    ap.add_argument("--op-search-models", default="7b",
                    help="model keys whose op-granularity micro-batch search runs (it plans at "
                         "op level at every batch it tries: minutes per world size; the others "
                         "get the whole-layer search only)")
    ap.add_argument("--op-search-timeout", type=float, default=180,
                    help="seconds for one op-granularity micro-batch search")
    ap.add_argument("--note", action="append", default=[],
                    help="a line for the report's misses and problems (e.g. a probe's figure)")
    ap.add_argument("--json", default=os.path.join(BENCH, "results", "llama_scale.json"))
    ap.add_argument("--md", default=os.path.join(BENCH, "results", "llama_scale.md"))
    ap.add_argument("--readme", default="/tmp/llama_scale_readme.md")
    ap.add_argument("--from-json", action="store_true",
                    help="only write the md and README section again from --json")
    args = ap.parse_args()
    globals()["PARAM_DTYPE"] = args.fsdp_param_dtype
    if args.from_json:
        doc = json.load(open(args.json))
        doc["problems"] = [p for p in doc["problems"] if ", " not in p.split(":")[0]
                           and p not in doc.get("notes", [])]
        doc["notes"] = args.note or doc.get("notes", [])
        doc["problems"] += call_problems(doc) + monotone_problems(doc) + doc["notes"]
        doc["method"], doc["readme_notes"] = METHOD, README_NOTES
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        write_md(doc, args.md)
        write_readme(doc, args.readme)
        return 0
    os.makedirs(args.work, exist_ok=True)
    keys = [k for k in args.models.split(",") if k]
    worlds = [int(x) for x in args.worlds.split(",") if x]
    op_models = set(filter(None, args.op_search_models.split(",")))
    python = sys.executable

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    import torch
    import transformers
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "python": platform.python_version()}
    try:
        import accelerate
        versions["accelerate"] = accelerate.__version__
    except ImportError:
        pass
    doc = {"format": "memplan.bench.llama_scale/1",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": machine(), "cores": os.cpu_count(), "commit": provenance.commit(),
           "memplan": args.memplan,
           "memplan_sha256": hashlib.sha256(open(args.memplan, "rb").read()).hexdigest(),
           "versions": versions, "seq": SEQ, "budget": BUDGET, "budget_bytes": BUDGET_BYTES,
           "per_rank": args.per_rank, "target_seconds": TARGET_S, "models": {}, "problems": []}
    with tempfile.TemporaryDirectory() as tmp:
        mp = Memplan(args.memplan, tmp, args.timeout, log)
        for key in keys:
            m = MODELS[key]
            mr = {"label": m["label"], "config": {k: m[k] for k in CONFIG_KEYS}}
            doc["models"][key] = mr
            mr["export"] = e = export(key, args.work, python, log)
            if "error" in e:
                mr["error"] = "export failed: " + e["error"]
                doc["problems"].append(f"{m['label']}: export failed: {e['error'][-300:]}")
                continue
            total, largest, model = model_counts(key)
            mr["params"], mr["largest_layer_params"] = total, largest
            mr["accelerate"] = accelerate_figures(model)
            del model
            if "error" in mr["accelerate"]:
                doc["problems"].append(f"{m['label']}: {mr['accelerate']['error']}")
            mr["worlds"] = []
            for world in worlds:
                log(f"{m['name']} on {world} ranks")
                skip = "" if key in op_models else "skipped (not in --op-search-models)"
                r = run_world(mp, key, e["graph"], world, args.per_rank, skip,
                              args.op_search_timeout)
                _, ds_gpu, ds_largest = deepspeed_zero3_estimate(total, largest, num_gpus_per_node=world)
                r["peers"] = {"deepspeed_zero3_gpu_bytes": ds_gpu,
                              "deepspeed_zero3_largest_layer_bytes": ds_largest,
                              "accelerate_training_adam_bytes": mr["accelerate"].get("training_adam_bytes")}
                mr["worlds"].append(r)
                with open(args.json, "w") as f:  # partial results as we go
                    json.dump(doc, f, indent=1)
            if key == keys[0]:
                log(f"{m['name']}: FSDP units by --fsdp-depth")
                doc["fsdp_units_check"] = {"model": m["label"], "world_size": worlds[0],
                                           "runs": fsdp_depth_check(mp, key, e["graph"], worlds[0])}
    doc["notes"] = args.note
    doc["problems"] = doc["problems"] + call_problems(doc) + monotone_problems(doc) + args.note
    doc["method"] = METHOD
    doc["readme_notes"] = README_NOTES
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    write_md(doc, args.md)
    write_readme(doc, args.readme)
    log(f"wrote {args.json}, {args.md}, {args.readme}")
    return 0


METHOD = [
    "Models: Llama-2 7B (hidden 4096, MLP 11008, 32 layers, 32 heads), 13B (5120, 13824, 40, 40), "
    "70B (8192, 28672, 80 layers, 64 heads, 8 KV heads: GQA); vocab 32000, untied embeddings. Built "
    "from transformers' LlamaConfig by `memplan export \"hf:llama:...\" "
    "--batch 1 --device meta` (no weights allocated; batch and seq symbolic, set to 1 x 4096 or "
    "searched over batch), in fp32. FSDP2 mixed precision, `MixedPrecisionPolicy(param_dtype="
    "torch.bfloat16)`, as Llama is trained: `--fsdp-param-dtype bfloat16` (fp32 shards, "
    "gradients and Adam state; parameters gathered, activations and gradients computed and "
    "reduced in bf16; `bench/llama_scale.sh --fsdp-param-dtype float32` reruns it without). "
    "The meta export's "
    "workspace rules are the CPU's (`--device meta`), as the issue asks; SDPA's scratch on a GPU "
    "may differ.",
    "One rank's step: `--optimizer adam` (two fp32 moments), `--parallel fsdp --world-size N`, "
    "FSDP units `--fsdp-modules lm.model.layers.0 ... lm.model.layers.L-1` (fully_shard per decoder "
    "layer, then the root: embed_tokens, final norm, lm_head, not resharded after forward), "
    "reshard after forward on. The CLI's default `--fsdp-depth` (the depth of the first "
    "numbered modules) picks the same units here (see the FSDP units section, whose "
    "`depth2_default` row is the CLI without `--fsdp-depth`).",
    "Budget: `--budget 80GB` = 80e9 B per rank, bounding the allocation-level peak "
    "(`--budget-of allocated`, the plan default without `--device`); the caching allocator's "
    "reserved peak is in the JSON (`reserved_peak_bytes`). An H100 80GB has 79.6 GiB (85.5e9 B) "
    "usable, before the CUDA context and NCCL buffers.",
    "Plans: op granularity (memplan's default: any tensor may be recomputed, greedy search for "
    "these sizes) and module granularity `--granularity module --module-depth 4` (whole decoder "
    "layers, or embed_tokens/lm_head, wrapped in `checkpoint()`), both with the time objective on "
    "the h100 preset. 'lowest (layers)' is the plan at `--budget 1` (exit 3): the lowest peak the "
    "whole-layer search reaches at micro-batch 1.",
    "Micro-batch: `memplan plan --global-batch N*64` splits a global batch of 64 per rank and "
    "finds the largest micro-batch per rank that fits, with the baseline program and with "
    "checkpointing (gradient accumulation: the sharded gradients stay alive across micro-batches, "
    "so the micro-batch-1 peak there is a little above the analyze figure).",
    "memplan model states = sharded parameters + sharded gradients + Adam state per rank "
    "(16 B/parameter / N, fp32), from the report's `parallel` figures.",
    "DeepSpeed: DeepSpeed's formula, re-implemented in bench/llama_scale.py (deepspeed is not "
    "installed, its function is not run): `estimate_zero3_model_states_mem_needs` "
    "(deepspeed/runtime/zero/stage3.py), "
    "cpu_offload=False, per GPU = 4 x largest_layer_params + int(18 x total_params / total_gpus): "
    "DeepSpeed's mixed-precision model states (fp16 weights and grads, fp32 master and Adam) and "
    "the gathered largest layer (here the embedding or lm_head); no activations. Counted as its "
    "model_to_params does, except shared parameters are told apart by identity (on meta every "
    "data_ptr() is 0).",
    "accelerate: `accelerate estimate-memory`'s 'Training using Adam' for float32, from its own "
    "code (`calculate_maximum_sizes`, `estimate_training_usage`): 4 x the model's bytes (weights, "
    "gradients, two Adam moments), for ONE device; it has no notion of sharding, so the figure is "
    "the same for every world size.",
    "Timing: wall seconds of each memplan call (GNU time), one call at a time on the 2 cores here; "
    "target 10 s per analysis.",
]

README_NOTES = [
    "Modelled: the FSDP2 all-gather and reduce-scatter buffers per unit (unsharded parameters "
    "and gradients, the backward prefetch of one unit), sharded Adam state, the step's "
    "activations and temporaries as eager PyTorch allocates them, gradient accumulation across "
    "micro-batches, and FSDP2 mixed precision (bf16 compute, fp32 shards and Adam). Not modelled "
    "yet: NCCL's "
    "internal buffers, the CUDA context, tensor/pipeline/sequence parallelism, and collective "
    "time (the recompute overheads are from op costs alone). The peaks and the micro-batch "
    "searches are allocation-level (`--budget-of allocated`); *reserved* is what PyTorch's "
    "caching allocator would hold for the same step (memplan's allocator model, steady state). "
    "A micro-batch that fits 80 GB of allocations may not fit 80 GB reserved: plan with "
    "`--budget-of reserved` (or `--device h100`) for that. Reproduce with "
    "`bench/llama_scale.sh` (exports cached in /tmp/llama_scale).",
]

if __name__ == "__main__":
    sys.exit(main())
