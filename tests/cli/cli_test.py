#!/usr/bin/python3
"""End-to-end tests of the memplan command line (stdlib only).

Usage: cli_test.py --memplan PATH/TO/memplan [--update]

Runs memplan from the repository root (found from this file's path) and checks
golden summaries, JSON reports against schemas/, `memplan lower`, Chrome
traces, determinism, exit codes and diagnostics. --update rewrites the golden
files in tests/cli/golden/ instead of comparing against them (review the diff!).

Prints one line per failure and a closing line "N passed, M failed"; exits 1
when anything failed.
"""
import argparse
import difflib
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from harness import Runner, describe, load, read_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(HERE, "golden")
BAD = os.path.join(HERE, "bad")
VALIDATE = os.path.join(ROOT, "tests", "tools", "validate_json.py")
REPORT_SCHEMA = os.path.join("schemas", "report.schema.json")
GRAPH_SCHEMA = os.path.join("schemas", "graph.schema.json")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Golden summaries: name -> (graph, extra args). `--top 8` is added to all.
GOLDENS = [
    ("mlp", "examples/mlp.graph.json", []),
    ("gpt_tiny", "examples/gpt_tiny.graph.json", []),
    ("densenet_toy.inplace", "examples/densenet_toy.graph.json", ["--accumulation", "inplace"]),
    ("densenet_toy.out_of_place", "examples/densenet_toy.graph.json",
     ["--accumulation", "out_of_place"]),
    ("densenet_toy.deferred", "examples/densenet_toy.graph.json", ["--accumulation", "deferred"]),
    ("cnn_small.joint", "examples/cnn_small.joint.graph.json", []),
    ("mlp_torch.joint", "examples/mlp_torch.joint.graph.json", []),
]
FORWARD_EXAMPLES = ["examples/mlp.graph.json", "examples/gpt_tiny.graph.json",
                    "examples/densenet_toy.graph.json"]
JOINT_EXAMPLES = ["examples/cnn_small.joint.graph.json", "examples/mlp_torch.joint.graph.json"]

# tests/cli/bad/<name>.json -> the JSON pointer its error must name.
BAD_FIXTURES = {
    "alias_cycle": "/tensors/0/alias_of",
    "bad_phase": "/ops/0/phase",
    "dangling_input": "/ops/1/inputs/0",
    "duplicate_tensor": "/tensors/2/id",
    "negative_dim": "/tensors/0/shape/1",
    "unknown_dtype": "/tensors/1/dtype",
    "use_before_def": "/ops/1/inputs/0",
    "wrong_format": "/format",
    "output_never_produced": "/outputs/0",
}




# ---------------------------------------------------------------------------


def test_goldens(r, update):
    for name, graph, extra in GOLDENS:
        args = ["analyze", graph, "--top", "8"] + extra
        rc, out, err = r.run(*args)
        label = "golden %s (memplan %s)" % (name, " ".join(args))
        if not r.check(label + ": exit 0", rc == 0, describe(rc, out, err)):
            continue
        golden = os.path.join(GOLDEN, name + ".txt")
        if update:
            os.makedirs(GOLDEN, exist_ok=True)
            with open(golden, "w", encoding="utf-8") as f:
                f.write(out)
            print("updated %s" % os.path.relpath(golden, ROOT))
            continue
        if not os.path.exists(golden):
            r.check(label + ": golden exists", False, "missing %s; run with --update" % golden)
            continue
        with open(golden, encoding="utf-8") as f:
            want = f.read()
        diff = "".join(difflib.unified_diff(want.splitlines(True), out.splitlines(True),
                                            "golden/" + name + ".txt", "actual"))
        r.check(label + ": stdout matches golden", out == want, diff)
        r.check(label + ": nothing on stderr", err == "", err)

    # The default accumulation is inplace.
    rc, out, _ = r.run("analyze", "examples/densenet_toy.graph.json", "--top", "8")
    rc2, out2, _ = r.run("analyze", "examples/densenet_toy.graph.json", "--top", "8",
                         "--accumulation", "inplace")
    r.check("default --accumulation is inplace", rc == 0 and rc2 == 0 and out == out2)


def analyze_json(r, graph, name, *extra):
    """Runs analyze --json; returns (report or None, rc, out, err)."""
    path = r.path(name)
    rc, out, err = r.run("analyze", graph, "-q", "--json", path, *extra)
    if rc != 0 or not os.path.exists(path):
        return None, rc, out, err
    return load(path), rc, out, err


def test_json_reports(r):
    files = []
    for graph in FORWARD_EXAMPLES + JOINT_EXAMPLES:
        for mode in ("inplace", "out_of_place", "deferred"):
            name = "%s.%s.report.json" % (os.path.basename(graph), mode)
            rep, rc, out, err = analyze_json(r, graph, name, "--accumulation", mode)
            if not r.check("analyze --json %s --accumulation %s: exit 0" % (graph, mode),
                           rep is not None, describe(rc, out, err)):
                continue
            files.append(r.path(name))
            r.check("%s %s: -q prints nothing on stdout" % (graph, mode), out == "", out)
            # Internal consistency of the report.
            cats = rep.get("by_category", {})
            r.check("%s %s: by_category sums to peak_bytes" % (graph, mode),
                    sum(cats.values()) == rep.get("peak_bytes"),
                    "by_category %s, peak %s" % (cats, rep.get("peak_bytes")))
            r.check("%s %s: lower_bound <= peak, resident <= lower bound" % (graph, mode),
                    rep["resident_bytes"] <= rep["lower_bound_bytes"] <= rep["peak_bytes"],
                    "resident %d, floor %d, peak %d" % (rep["resident_bytes"],
                                                        rep["lower_bound_bytes"],
                                                        rep["peak_bytes"]))
            live = rep.get("live_at_peak", [])
            sizes = [e["bytes"] for e in live]
            r.check("%s %s: live_at_peak is largest first" % (graph, mode),
                    sizes == sorted(sizes, reverse=True), sizes)
            r.check("%s %s: accumulation recorded" % (graph, mode),
                    rep.get("accumulation") == mode, rep.get("accumulation"))
            style = "joint" if graph in JOINT_EXAMPLES else "forward"
            r.check("%s %s: graph.style is %s" % (graph, mode, style),
                    rep.get("graph", {}).get("style") == style, rep.get("graph"))
    if files:
        rc, out = r.validate(REPORT_SCHEMA, files)
        r.check("analyze --json reports validate against %s" % REPORT_SCHEMA, rc == 0, out)

    # All live buffers: with --top large enough, live_at_peak sums to the peak.
    rep, rc, out, err = analyze_json(r, "examples/mlp.graph.json", "mlp.all.json", "--top",
                                     "1000")
    if r.check("analyze --top 1000: exit 0", rep is not None, describe(rc, out, err)):
        r.check("--top 1000 lists every live buffer",
                len(rep["live_at_peak"]) == rep["live_at_peak_count"],
                "%d listed of %d" % (len(rep["live_at_peak"]), rep["live_at_peak_count"]))
        r.check("live_at_peak sums to peak_bytes when complete",
                sum(e["bytes"] for e in rep["live_at_peak"]) == rep["peak_bytes"],
                "%d vs %d" % (sum(e["bytes"] for e in rep["live_at_peak"]), rep["peak_bytes"]))
    rep, rc, out, err = analyze_json(r, "examples/mlp.graph.json", "mlp.top2.json", "--top", "2")
    if r.check("analyze --top 2: exit 0", rep is not None, describe(rc, out, err)):
        r.check("--top 2 caps live_at_peak at 2", len(rep["live_at_peak"]) == 2,
                rep["live_at_peak"])


def test_lower(r):
    lowered = []
    for graph in FORWARD_EXAMPLES + JOINT_EXAMPLES:
        base = os.path.basename(graph)
        out_path = r.path(base + ".lowered.json")
        rc, out, err = r.run("lower", graph, "-o", out_path)
        if not r.check("lower %s: exit 0" % graph, rc == 0 and os.path.exists(out_path),
                       describe(rc, out, err)):
            continue
        lowered.append(out_path)
        r.check("lower %s: stdout names the output file" % graph, out_path in out, out)
        direct, rc1, o1, e1 = analyze_json(r, graph, base + ".direct.json")
        via, rc2, o2, e2 = analyze_json(r, out_path, base + ".via_lower.json")
        if not r.check("analyze of lowered %s: exit 0" % graph,
                       direct is not None and via is not None,
                       describe(rc1, o1, e1) + "\n" + describe(rc2, o2, e2)):
            continue
        r.check("lower %s: analyze of the lowered graph has the same peak_bytes" % graph,
                direct["peak_bytes"] == via["peak_bytes"],
                "direct %d, via lower %d" % (direct["peak_bytes"], via["peak_bytes"]))
        r.check("lower %s: same by_category" % graph,
                direct["by_category"] == via["by_category"],
                "direct %s\nvia lower %s" % (direct["by_category"], via["by_category"]))
        r.check("lower %s: same peak_op" % graph, direct["peak_op"] == via["peak_op"],
                "direct %s, via lower %s" % (direct["peak_op"], via["peak_op"]))
        r.check("lower %s: lowered graph is joint" % graph,
                via["graph"]["style"] == "joint", via["graph"])
        if graph in FORWARD_EXAMPLES:
            r.check("lower %s: op counts agree" % graph,
                    via["graph"]["ops"] == direct["graph"]["joint_ops"]
                    and via["graph"]["tensors"] == direct["graph"]["joint_tensors"],
                    "direct %s\nvia lower %s" % (direct["graph"], via["graph"]))
        # Lowering is idempotent: lowering a joint graph writes it unchanged.
        again = r.path(base + ".lowered2.json")
        rc, out, err = r.run("lower", out_path, "-o", again)
        if r.check("lower of lowered %s: exit 0" % graph, rc == 0, describe(rc, out, err)):
            r.check("lower of lowered %s: identical bytes" % graph,
                    read_bytes(out_path) == read_bytes(again))
    if lowered:
        rc, out = r.validate(GRAPH_SCHEMA, lowered)
        r.check("lower output validates against %s" % GRAPH_SCHEMA, rc == 0, out)

    # Unknown tensor/op keys are kept by lower (SPEC section 1).
    # Regression: memplan lower once crashed (SIGSEGV) on any graph with unknown
    # tensor or op keys (GraphToJson iterated items() of a destroyed temporary).
    src = os.path.join("tests", "cli", "extra_keys.graph.json")
    out_path = r.path("extra_keys.lowered.json")
    rc, out, err = r.run("lower", src, "-o", out_path)
    if r.check("lower of a graph with unknown tensor/op keys: exit 0", rc == 0,
               describe(rc, out, err)):
        doc = load(out_path)
        t = {x["id"]: x for x in doc["tensors"]}
        o = {x["id"]: x for x in doc["ops"]}
        r.check("lower keeps unknown tensor keys",
                t["x"].get("device") == "cuda:0" and t["w"].get("stride") == [8, 1], t)
        r.check("lower keeps unknown op keys", o["fc"].get("stack") == ["model.py:12"], o)
    rep, rc, out, err = analyze_json(r, src, "extra_keys.report.json")
    r.check("analyze of a graph with unknown keys: exit 0", rep is not None,
            describe(rc, out, err))


def test_trace(r):
    for graph in ["examples/mlp.graph.json", "examples/cnn_small.joint.graph.json"]:
        path = r.path(os.path.basename(graph) + ".trace.json")
        rc, out, err = r.run("analyze", graph, "-q", "--trace", path)
        if not r.check("analyze --trace %s: exit 0" % graph, rc == 0, describe(rc, out, err)):
            continue
        try:
            doc = load(path)
        except ValueError as e:
            r.check("trace %s is valid JSON" % graph, False, e)
            continue
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not r.check("trace %s has a traceEvents array" % graph, isinstance(events, list)):
            continue
        phs = {e.get("ph") for e in events}
        for ph in ("X", "C", "M"):
            r.check("trace %s has %s events" % (graph, ph), ph in phs, sorted(phs))
        names = {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "thread_name":
                names[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name")
        x_tracks = {names.get((e.get("pid"), e.get("tid"))) for e in events
                    if e.get("ph") == "X"}
        for track in ("forward", "backward"):
            r.check("trace %s: X events on a track named %s" % (graph, track),
                    track in x_tracks, "X events on tracks %s" % sorted(map(str, x_tracks)))
        r.check("trace %s: every X event is on a named track" % graph,
                None not in x_tracks, sorted(map(str, x_tracks)))
        bad = [e for e in events if e.get("ph") == "X"
               and not (isinstance(e.get("ts"), (int, float)) and
                        isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0)]
        r.check("trace %s: X events have ts and dur >= 0" % graph, not bad, bad[:3])
        counters = [e for e in events if e.get("ph") == "C"]
        rep, _, _, _ = analyze_json(r, graph, os.path.basename(graph) + ".for_trace.json")
        if rep is not None and counters:
            top = max(max(v for v in e.get("args", {}).values()) for e in counters)
            r.check("trace %s: the live-bytes counter peaks at peak_bytes" % graph,
                    top == rep["peak_bytes"], "counter max %s, peak %s" % (top,
                                                                           rep["peak_bytes"]))


def test_determinism(r):
    for graph in FORWARD_EXAMPLES + JOINT_EXAMPLES:
        base = os.path.basename(graph)
        outs = []
        for i in (1, 2):
            j, t = r.path("%s.det%d.json" % (base, i)), r.path("%s.det%d.trace.json" % (base, i))
            rc, out, err = r.run("analyze", graph, "--json", j, "--trace", t)
            r.check("determinism %s run %d: exit 0" % (graph, i), rc == 0,
                    describe(rc, out, err))
            outs.append((out, j, t))
        if len(outs) == 2 and all(os.path.exists(p) for _, j, t in outs for p in (j, t)):
            r.check("determinism %s: identical --json" % graph,
                    read_bytes(outs[0][1]) == read_bytes(outs[1][1]))
            r.check("determinism %s: identical --trace" % graph,
                    read_bytes(outs[0][2]) == read_bytes(outs[1][2]))
            r.check("determinism %s: identical stdout" % graph, outs[0][0] == outs[1][0])


def test_stdin(r):
    """A graph piped in (/dev/stdin) gives the report of the same file read by name."""
    graph = "examples/gpt_tiny.graph.json"
    rc, by_name, err = r.run("analyze", graph)
    r.check("stdin: analyze by name: exit 0", rc == 0, describe(rc, by_name, err))
    p = subprocess.run([r.memplan, "analyze", "/dev/stdin"], cwd=ROOT,
                       input=read_bytes(os.path.join(ROOT, graph)), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    r.check("stdin: analyze /dev/stdin from a pipe: exit 0", p.returncode == 0,
            describe(p.returncode, out, err))
    # The summary's first line names the file; the rest is the same.
    r.check("stdin: the same summary", out.split("\n")[1:] == by_name.split("\n")[1:],
            out + "\n---\n" + by_name)


def test_exit_codes(r):
    # Missing file.
    rc, out, err = r.run("analyze", "no/such/graph.json")
    r.check("missing file: exit 2", rc == 2, describe(rc, out, err))
    r.check("missing file: stderr names the file", "no/such/graph.json" in err, err)
    r.check("missing file: nothing on stdout", out == "", out)

    # Invalid JSON.
    inv = r.path("invalid.json")
    with open(inv, "w") as f:
        f.write('{"format": "memplan.graph/1",\n "tensors": [,]}\n')
    rc, out, err = r.run("analyze", inv)
    r.check("invalid JSON: exit 2", rc == 2, describe(rc, out, err))
    r.check("invalid JSON: stderr names the file and the position",
            inv in err and "invalid JSON" in err and "line 2" in err, err)

    # Nesting bombs are refused, not crashed on.
    deep = r.path("deep.json")
    with open(deep, "w") as f:
        f.write('{"format": "memplan.graph/1", "source": ' + "[" * 200000 + "]" * 200000 +
                ', "tensors": [], "ops": []}')
    rc, out, err = r.run("analyze", deep)
    r.check("deeply nested JSON: exit 2 with a message", rc == 2 and deep in err and
            "nesting deeper than" in err, describe(rc, out, err))

    # Bad graphs.
    fixtures = sorted(glob.glob(os.path.join(BAD, "*.json")))
    r.check("tests/cli/bad has fixtures", len(fixtures) >= 6, fixtures)
    for path in fixtures:
        name = os.path.splitext(os.path.basename(path))[0]
        rel = os.path.relpath(path, ROOT)
        pointer = BAD_FIXTURES.get(name)
        if not r.check("bad/%s.json has an expected pointer in BAD_FIXTURES" % name,
                       pointer is not None):
            continue
        for cmd in (["analyze", rel], ["lower", rel, "-o", r.path(name + ".out.json")]):
            rc, out, err = r.run(*cmd)
            label = "%s bad/%s.json" % (cmd[0], name)
            r.check(label + ": exit 2", rc == 2, describe(rc, out, err))
            r.check(label + ": stderr names the file and %s" % pointer,
                    ("%s: %s: " % (rel, pointer)) in err, err)
            r.check(label + ": stderr is one error line",
                    err.startswith("memplan: error: ") and err.count("error") == 1, err)

    # Usage errors.
    cases = [
        ("unknown subcommand", ["frobnicate", "examples/mlp.graph.json"]),
        ("no subcommand", []),
        ("bad --accumulation", ["analyze", "examples/mlp.graph.json", "--accumulation",
                                "lazy"]),
        ("--set without =", ["analyze", "examples/mlp.graph.json", "--set", "batch"]),
        ("--set negative", ["analyze", "examples/mlp.graph.json", "--set", "batch=-3"]),
        ("--set not a number", ["analyze", "examples/mlp.graph.json", "--set", "batch=abc"]),
        ("--set empty name", ["analyze", "examples/mlp.graph.json", "--set", "=3"]),
        ("--set too large", ["analyze", "examples/mlp.graph.json", "--set",
                             "batch=99999999999999999999"]),
        ("--set overflowing a shape", ["analyze", "examples/mlp.graph.json", "--set",
                                       "batch=999999999999999999"]),
        ("--set unknown symbol", ["analyze", "examples/mlp.graph.json", "--set", "bacth=3"]),
        ("unknown option", ["analyze", "examples/mlp.graph.json", "--frobnicate"]),
        ("analyze without a graph", ["analyze"]),
        ("lower without -o", ["lower", "examples/mlp.graph.json"]),
        ("negative --top", ["analyze", "examples/mlp.graph.json", "--top", "-1"]),
    ]
    for label, args in cases:
        rc, out, err = r.run(*args)
        r.check("%s: exit 2" % label, rc == 2, describe(rc, out, err))
        r.check("%s: a message on stderr" % label, err.strip() != "", describe(rc, out, err))
    rc, out, err = r.run("analyze", "examples/mlp.graph.json", "--set", "batch")
    r.check("malformed --set: message quotes the flag and says NAME=VALUE",
            "--set batch" in err and "NAME=VALUE" in err, err)
    rc, out, err = r.run("analyze", "examples/mlp.graph.json", "--set", "bacth=3")
    r.check("--set unknown symbol: message names the symbol, the file and the known symbols",
            '"bacth"' in err and "examples/mlp.graph.json" in err and "batch" in err, err)
    rc, out, err = r.run("analyze", "examples/mlp.graph.json", "--accumulation", "lazy")
    r.check("bad --accumulation: message names the value and the choices",
            "lazy" in err and "out_of_place" in err, err)
    rc, out, err = r.run("frobnicate", "examples/mlp.graph.json")
    r.check("unknown subcommand: message names it and the subcommands",
            "frobnicate" in err and all(c in err for c in ("analyze", "lower", "plan", "verify")),
            err)
    for args in (["analyze", "examples"], ["plan", "examples", "--budget", "1MB"],
                 ["lower", "examples", "-o", r.path("d.json")],
                 ["snapshot", "examples", "-o", r.path("d.pickle")],
                 ["verify", "examples/mlp.graph.json", "examples"]):
        rc, out, err = r.run(*args)
        r.check("a directory for a file (%s): exit 2, 'Is a directory'" % args[0],
                rc == 2 and "cannot read examples: Is a directory" in err, describe(rc, out, err))
    rc, out, err = r.run("analyze", "examples/mlp.graph.json", "--json",
                         "/nonexistent-dir/r.json")
    r.check("unwritable --json: exit 2 naming the path",
            rc == 2 and "/nonexistent-dir/r.json" in err, describe(rc, out, err))

    # Help and version.
    for args in (["--help"], ["analyze", "--help"], ["lower", "--help"]):
        rc, out, err = r.run(*args)
        r.check("memplan %s: exit 0 with usage on stdout" % " ".join(args),
                rc == 0 and "Usage" in out, describe(rc, out, err))
    rc, out, err = r.run("--version")
    r.check("memplan --version: exit 0, prints the version",
            rc == 0 and re.match(r"^memplan \d+\.\d+\.\d+\s*$", out) is not None,
            describe(rc, out, err))
    rep, _, _, _ = analyze_json(r, "examples/mlp.graph.json", "mlp.version.json")
    if rep is not None:
        r.check("--version matches memplan_version in reports",
                out.strip() == "memplan " + rep["memplan_version"], out)

    # Ok.
    rc, out, err = r.run("analyze", "examples/mlp.graph.json")
    r.check("analyze mlp: exit 0, summary on stdout, nothing on stderr",
            rc == 0 and "peak" in out and err == "", describe(rc, out, err))


def shape_bytes(tensor, symbols):
    size = {"float32": 4, "int64": 8, "float16": 2, "bfloat16": 2, "float64": 8}[tensor["dtype"]]
    n = 1
    for d in tensor["shape"]:
        n *= symbols[d] if isinstance(d, str) else d
    return n * size


def test_set_batch(r):
    graph = "examples/mlp.graph.json"
    doc = load(os.path.join(ROOT, graph))
    tensors = {t["id"]: t for t in doc["tensors"]}
    default_batch = doc["symbols"]["batch"]
    r.check("mlp declares batch=64", default_batch == 64, doc["symbols"])
    reports = {}
    for batch in (None, 2, 64):
        extra = [] if batch is None else ["--set", "batch=%d" % batch]
        rep, rc, out, err = analyze_json(r, graph, "mlp.batch%s.json" % batch, "--top", "1000",
                                         *extra)
        if r.check("analyze %s %s: exit 0" % (graph, " ".join(extra)), rep is not None,
                   describe(rc, out, err)):
            reports[batch] = rep
    if len(reports) != 3:
        return
    r.check("--set batch=64 equals the default", reports[None] == reports[64])
    r.check("--set batch=2 is recorded in the report's symbols",
            reports[2]["symbols"] == {"batch": 2}, reports[2]["symbols"])
    p2, p64 = reports[2]["peak_bytes"], reports[64]["peak_bytes"]
    r.check("--set batch=2 lowers the peak", p2 < p64, "batch=2 %d, batch=64 %d" % (p2, p64))
    r.check("parameters do not depend on the batch",
            reports[2]["by_category"]["parameter"] == reports[64]["by_category"]["parameter"],
            (reports[2]["by_category"], reports[64]["by_category"]))
    r.check("resident bytes follow the inputs' shapes",
            reports[64]["resident_bytes"] - reports[2]["resident_bytes"] ==
            shape_bytes(tensors["x"], {"batch": 62}) + shape_bytes(tensors["y"], {"batch": 62}),
            (reports[2]["resident_bytes"], reports[64]["resident_bytes"]))
    # Both peaks are at fc1.bw, where x, y and fc1.out.grad are the buffers
    # whose size depends on the batch: the peaks differ by exactly those.
    same_op = reports[2]["peak_op"] == reports[64]["peak_op"] == "fc1.bw"
    r.check("peak at fc1.bw for batch 2 and 64", same_op,
            (reports[2]["peak_op"], reports[64]["peak_op"]))
    if same_op:
        per_row = sum(shape_bytes(tensors[t], {"batch": 1}) for t in ("x", "y", "fc1.out"))
        r.check("peak(64) - peak(2) = 62 * (x + y + fc1.out.grad per batch row)",
                p64 - p2 == 62 * per_row, "%d - %d != 62 * %d" % (p64, p2, per_row))
    live2 = {e["tensor"]: e["bytes"] for e in reports[2]["live_at_peak"]}
    r.check("batch=2: x is 2*784*4 bytes", live2.get("x") == 2 * 784 * 4, live2)


def test_warnings(r):
    src = os.path.join("tests", "cli", "unknown_op.graph.json")
    rep, rc, out, err = analyze_json(r, src, "unknown_op.report.json")
    if not r.check("analyze graph with an unknown op type: exit 0", rep is not None,
                   describe(rc, out, err)):
        return
    r.check("unknown op type: warning on stderr naming the op and its type",
            "warning" in err and '"mystery"' in err and "my_custom_kernel" in err, err)
    r.check("unknown op type: one warning line", err.count("\n") == 1, err)
    warnings = rep.get("warnings", [])
    r.check("unknown op type: JSON warnings list it",
            len(warnings) == 1 and '"mystery"' in warnings[0], warnings)
    rc, out, err = r.run("analyze", "examples/mlp.graph.json")
    r.check("known op types: no warnings", rc == 0 and err == "", err)
    rep, _, _, _ = analyze_json(r, "examples/mlp.graph.json", "mlp.warn.json")
    r.check("known op types: empty warnings in JSON", rep is not None and
            rep["warnings"] == [], rep and rep["warnings"])
    rc, out, err = r.run("lower", src, "-o", r.path("unknown_op.lowered.json"))
    r.check("lower also warns about the unknown op", rc == 0 and '"mystery"' in err,
            describe(rc, out, err))


HELD_LINES = {
    True: "  loop      output held through the backward (source.outputs_held)",
    False: "  loop      output freed once the loss is computed (source.outputs_held false)",
}


def with_outputs_held(r, value, name):
    """examples/mlp.graph.json with source.outputs_held set to `value`."""
    doc = load(os.path.join(ROOT, "examples", "mlp.graph.json"))
    doc["source"] = dict(doc.get("source", {}), outputs_held=value)
    path = r.path("mlp.held_%s.graph.json" % name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def test_outputs_held(r):
    """source.outputs_held: one summary line and graph.outputs_held in the JSON reports."""
    reports = []
    for held in (True, False):
        path = with_outputs_held(r, held, str(held).lower())
        rc, out = r.validate(GRAPH_SCHEMA, [path])
        r.check("graph schema accepts outputs_held %s" % held, rc == 0, out)
        for cmd, extra in (("analyze", []), ("plan", ["--budget", "16MiB", "--top", "0"])):
            label = "%s, outputs_held %s" % (cmd, str(held).lower())
            report = r.path("held.%s.%s.json" % (cmd, str(held).lower()))
            rc, out, err = r.run(cmd, path, *extra, "--json", report)
            if not r.check(label + ": exit 0", rc == 0, describe(rc, out, err)):
                continue
            lines = out.splitlines()
            # analyze: after the graph line; plan: right after the header.
            at = 2 if cmd == "analyze" else 1
            r.check(label + ": the summary line, word for word",
                    len(lines) > at and lines[at] == HELD_LINES[held], out)
            r.check(label + ": one loop line",
                    sum(line.startswith("  loop ") for line in lines) == 1, out)
            graph = load(report)["graph"]
            r.check(label + ": graph.outputs_held is %s" % str(held).lower(),
                    graph.get("outputs_held") is held, graph)
            reports.append(report)
        rc, out, err = r.run("check", path, "--budget", "1GiB")
        r.check("check, outputs_held %s: the loop line" % held,
                rc == 0 and out.splitlines()[1:2] == [HELD_LINES[held]], describe(rc, out, err))
        lowered = r.path("mlp.held.lowered.json")
        rc, out, err = r.run("lower", path, "-o", lowered, "-q")
        r.check("lower keeps outputs_held %s" % held,
                rc == 0 and load(lowered)["source"]["outputs_held"] is held,
                describe(rc, out, err))
    # Not stated: no line, and null.
    for cmd, extra in (("analyze", []), ("plan", ["--budget", "16MiB", "--top", "0"])):
        report = r.path("held.%s.absent.json" % cmd)
        rc, out, err = r.run(cmd, "examples/mlp.graph.json", *extra, "--json", report)
        if r.check("%s, no outputs_held: exit 0" % cmd, rc == 0, describe(rc, out, err)):
            r.check("%s, no outputs_held: no loop line" % cmd, "\n  loop " not in out, out)
            graph = load(report)["graph"]
            r.check("%s, no outputs_held: graph.outputs_held is null" % cmd,
                    "outputs_held" in graph and graph["outputs_held"] is None, graph)
            reports.append(report)
    rc, out = r.validate(REPORT_SCHEMA, reports)
    r.check("reports with graph.outputs_held validate", rc == 0, out)
    # Anything but a boolean exits 2, naming the pointer and what was expected.
    for value, shown in (("yes", '"yes"'), (1, "1"), (None, "null")):
        path = with_outputs_held(r, value, "bad_%s" % shown.strip('"'))
        rc, out = r.validate(GRAPH_SCHEMA, [path])
        r.check("graph schema refuses outputs_held %s" % shown, rc != 0, out)
        want = ("memplan: error: %s: /source/outputs_held: expected true or false, found %s\n" %
                (path, shown))
        for args in (("analyze", path), ("plan", path, "--budget", "16MiB"),
                     ("check", path, "--budget", "1GiB")):
            rc, out, err = r.run(*args)
            r.check("%s outputs_held %s: exit 2 and exact message" % (args[0], shown),
                    rc == 2 and err == want and out == "", describe(rc, out, err))


# The accumulation table of the DenseNet-like toy (examples/gen_densenet_toy.py N,
# `analyze --accumulation MODE`): blocks N -> resident, then the inplace,
# out_of_place and deferred peaks, in bytes (MiB as the table shows them).
DENSENET_TABLE = {
    4: (3932160, 13631492, 13893636, 15204356),        # 3.75; 13.00, 13.25, 14.50 MiB
    8: (10747904, 30408708, 31195140, 43778052),       # 10.25; 29.00, 29.75, 41.75 MiB
    16: (36962304, 83099652, 83886084, 149159940),     # 35.25; 79.25, 80.00, 142.25 MiB
    32: (139722752, 288620548, 289406980, 549453828),  # 133.25; 275.25, 276.00, 524.00 MiB
}
DENSENET_MIB = {4: ("3.75", "13.00", "13.25", "14.50"), 8: ("10.25", "29.00", "29.75", "41.75"),
                16: ("35.25", "79.25", "80.00", "142.25"),
                32: ("133.25", "275.25", "276.00", "524.00")}


def test_densenet_accumulation(r):
    """Every row of the DenseNet accumulation table, not only the N = 8 example: the
    generator's graph for N blocks, analyzed under each accumulation mode."""
    ratios = []
    for n, want in DENSENET_TABLE.items():
        graph = r.path("densenet_%d.graph.json" % n)
        p = subprocess.run([PYTHON, os.path.join(ROOT, "examples", "gen_densenet_toy.py"),
                            str(n), "-o", graph], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
        if not r.check("gen_densenet_toy.py %d: exit 0" % n, p.returncode == 0, p.stdout):
            continue
        if n == 8:
            r.check("gen_densenet_toy.py 8 writes examples/densenet_toy.graph.json",
                    read_bytes(graph) == read_bytes(os.path.join(ROOT, "examples",
                                                                 "densenet_toy.graph.json")))
        got = []
        for mode in ("inplace", "out_of_place", "deferred"):
            rep, rc, out, err = analyze_json(r, graph, "densenet_%d.%s.json" % (n, mode),
                                             "--accumulation", mode)
            if not r.check("densenet N=%d --accumulation %s: exit 0" % (n, mode), rep is not None,
                           describe(rc, out, err)):
                break
            if not got:
                got.append(rep["resident_bytes"])
            got.append(rep["peak_bytes"])
        else:
            got = tuple(got)
            r.check("densenet N=%d: resident and the inplace, out_of_place, deferred peaks"
                    % n, got == want, "%s, expected %s" % (got, want))
            r.check("densenet N=%d: the table's MiB" % n, tuple(
                "%.2f" % (b / 2**20) for b in got) == DENSENET_MIB[n], got)
            r.check("densenet N=%d: inplace < out_of_place < deferred" % n,
                    got[1] < got[2] < got[3], got)
            ratios.append(got[3] / got[1])
    # deferred / inplace: 1.12, 1.44, 1.79, 1.90 (the contributions alive grow with N^2/2).
    r.check("densenet: deferred / inplace rises with N", len(ratios) == len(DENSENET_TABLE)
            and ratios == sorted(ratios) and len(set(ratios)) == len(ratios),
            ["%.3f" % x for x in ratios])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memplan", required=True, help="path to the memplan binary")
    ap.add_argument("--update", action="store_true", help="rewrite tests/cli/golden/*.txt")
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    if not os.access(memplan, os.X_OK):
        print("cli_test.py: %s is not an executable" % memplan)
        print("0 passed, 1 failed")
        return 1
    with tempfile.TemporaryDirectory(prefix="memplan_cli_") as tmp:
        r = Runner(memplan, tmp)
        test_goldens(r, args.update)
        if not args.update:
            test_json_reports(r)
            test_lower(r)
            test_trace(r)
            test_determinism(r)
            test_stdin(r)
            test_exit_codes(r)
            test_set_batch(r)
            test_warnings(r)
            test_outputs_held(r)
            test_densenet_accumulation(r)
    print("%d passed, %d failed" % (r.passed, len(r.failed)))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
