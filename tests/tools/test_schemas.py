#!/usr/bin/python3
"""Self-test of the JSON Schemas in schemas/ and of the example graphs.

Run: /usr/bin/python3 tests/tools/test_schemas.py   (plain unittest; needs python3-jsonschema)
"""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMAS = os.path.join(ROOT, "schemas")
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, HERE)

import graph_lint  # noqa: E402
import validate_json  # noqa: E402


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def validator(name):
    return validate_json.make_validator(load(os.path.join(SCHEMAS, name)))


def example_graphs():
    return sorted(glob.glob(os.path.join(EXAMPLES, "*.graph.json")))


MINI_GRAPH = {
    "format": "memplan.graph/1",
    "symbols": {"batch": 2},
    "tensors": [
        {"id": "x", "shape": ["batch", 4], "dtype": "float32", "kind": "input"},
        {"id": "w", "shape": [3, 4], "dtype": "float32", "kind": "parameter"},
        {"id": "y", "shape": ["batch", 3], "dtype": "float32"},
    ],
    "ops": [{"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["y"]}],
    "outputs": ["y"],
}

BUDGET_FAILURE = {"name": "budget", "condition": "peak_bytes <= budget_bytes",
                  "expected": 100, "actual": 101, "message": "over"}
GOOD_CHECK = {
    "format": "memplan.report/1", "command": "check", "memplan_version": "0.1.0",
    "graph": {"name": "g", "file": "g.json", "style": "forward", "ops": 1, "tensors": 3,
              "joint_ops": 2, "joint_tensors": 5},
    "symbols": {"batch": 2},
    "program": {"source": "baseline", "plan": None, "accumulation": "inplace"},
    "optimizer": "none", "passed": False, "failures": [BUDGET_FAILURE],
    "conditions": [dict(BUDGET_FAILURE, passed=False)], "budget_bytes": 100,
    "peak_bytes": 101, "peak_step": 3, "peak_op": "fc.bw", "baseline": None, "warnings": [],
}

GOOD_PLAN = {
    "format": "memplan.plan/1", "graph": "mini", "graph_sha256": "0" * 64,
    "budget_bytes": 4294967296, "feasible": True,
    "accumulation": {"h3.grad": "inplace"},
    "saved": ["h1"], "recomputed": ["h2"],
    "predicted": {"peak_bytes": 4102030336, "baseline_peak_bytes": 7301234688,
                  "recompute_cost": 1.2e10, "cost_unit": "flops"},
    "steps": [{"run": "conv1"}, {"run": "relu.bw", "inplace": {"h1.grad": "h2.grad"}},
              {"free": ["x"]}],
}

KINDS = ["input", "parameter", "buffer", "activation", "gradient", "optimizer_state", "temporary"]

GOOD_ANALYZE = {
    "format": "memplan.report/1", "command": "analyze", "memplan_version": "0.1.0",
    "graph": {"name": "mlp", "file": "examples/mlp.graph.json", "style": "forward",
              "ops": 6, "tensors": 14, "joint_ops": 12, "joint_tensors": 26},
    "accumulation": "inplace",
    "symbols": {"batch": 64},
    "peak_bytes": 3000000, "lower_bound_bytes": 2500000, "resident_bytes": 2000000,
    "peak_step": 7, "peak_op": "fc3.bw", "peak_phase": "backward", "steps": 20,
    "by_category": {k: 0 for k in KINDS},
    "live_at_peak": [{"tensor": "fc1.weight", "bytes": 1605632, "kind": "parameter",
                      "producer": None, "scope": "fc1"}],
    "live_at_peak_count": 12,
    "warnings": [],
}


class SchemaFiles(unittest.TestCase):
    def test_schemas_are_valid_2020_12(self):
        for name in ("graph.schema.json", "plan.schema.json", "report.schema.json"):
            schema = load(os.path.join(SCHEMAS, name))
            self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
            validate_json.make_validator(schema)  # raises SchemaError if invalid


class GraphSchema(unittest.TestCase):
    def setUp(self):
        self.v = validator("graph.schema.json")

    def assertValid(self, doc):
        err = validate_json.first_error(self.v, doc)
        self.assertIsNone(err, err and validate_json.format_error(err))

    def assertInvalid(self, doc, pointer=None):
        err = validate_json.first_error(self.v, doc)
        self.assertIsNotNone(err)
        if pointer is not None:
            self.assertEqual(validate_json.json_pointer(err.absolute_path), pointer)

    def test_examples_validate(self):
        files = example_graphs()
        self.assertTrue(any(f.endswith("mlp.graph.json") for f in files))
        self.assertTrue(any(f.endswith("gpt_tiny.graph.json") for f in files))
        for path in files:
            with self.subTest(path=os.path.relpath(path, ROOT)):
                self.assertValid(load(path))

    def test_examples_are_consistent(self):
        for path in example_graphs():
            with self.subTest(path=os.path.relpath(path, ROOT)):
                self.assertEqual(graph_lint.lint(load(path)), [])

    def test_minimal_and_unknown_keys(self):
        self.assertValid(MINI_GRAPH)
        self.assertValid({"format": "memplan.graph/1", "tensors": [], "ops": []})
        g = copy.deepcopy(MINI_GRAPH)
        g["x-future"] = {"a": 1}
        g["tensors"][0]["memory_format"] = "nchw"
        g["ops"][0]["attrs"] = {"stride": 2}
        self.assertValid(g)

    def test_tensor_layout(self):
        g = copy.deepcopy(MINI_GRAPH)
        for layout in ("channels_last", "strided"):
            g["tensors"][0]["layout"] = layout
            self.assertValid(g)
        g["tensors"][0]["layout"] = "nchw"
        self.assertInvalid(g, "/tensors/0/layout")

    def test_wrong_format(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["format"] = "memplan.graph/2"
        self.assertInvalid(g, "/format")

    def test_missing_required(self):
        for key in ("format", "tensors", "ops"):
            g = copy.deepcopy(MINI_GRAPH)
            del g[key]
            with self.subTest(key=key):
                self.assertInvalid(g)

    def test_negative_dim(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["tensors"][1]["shape"] = [3, -4]
        self.assertInvalid(g, "/tensors/1/shape/1")

    def test_fractional_dim(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["tensors"][1]["shape"] = [3, 4.5]
        self.assertInvalid(g, "/tensors/1/shape/1")

    def test_bad_dtype(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["tensors"][0]["dtype"] = "float128"
        self.assertInvalid(g, "/tensors/0/dtype")

    def test_bad_kind_and_phase(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["tensors"][0]["kind"] = "weight"
        self.assertInvalid(g, "/tensors/0/kind")
        g = copy.deepcopy(MINI_GRAPH)
        g["ops"][0]["phase"] = "backwards"
        self.assertInvalid(g, "/ops/0/phase")

    def test_negative_symbol_and_costs(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["symbols"]["batch"] = -1
        self.assertInvalid(g, "/symbols/batch")
        for key, val in (("flops", -1), ("time_us", -0.5), ("workspace_bytes", 1.5),
                         ("accumulate", "yes"), ("saves", "x")):
            g = copy.deepcopy(MINI_GRAPH)
            g["ops"][0][key] = val
            with self.subTest(key=key):
                self.assertInvalid(g, "/ops/0/" + key)

    def test_lint_catches_errors(self):
        g = copy.deepcopy(MINI_GRAPH)
        g["ops"][0]["inputs"] = ["x", "w", "nope"]
        self.assertTrue(graph_lint.lint(g))
        g = copy.deepcopy(MINI_GRAPH)
        g["tensors"][2]["shape"] = ["batch", 5]
        self.assertTrue(graph_lint.lint(g))
        g = copy.deepcopy(MINI_GRAPH)
        g["tensors"].append(dict(g["tensors"][0]))
        self.assertTrue(graph_lint.lint(g))


class PlanSchema(unittest.TestCase):
    def setUp(self):
        self.v = validator("plan.schema.json")

    def test_good_plan(self):
        err = validate_json.first_error(self.v, GOOD_PLAN)
        self.assertIsNone(err, err and validate_json.format_error(err))

    def test_bad_steps(self):
        bad_steps = [
            {"run": "a", "free": ["x"]},          # both kinds in one step
            {"run": "a", "extra": 1},             # unknown key
            {"free": "x"},                        # free must be a list
            {"run": 3},                           # op id must be a string
            {"run": "a", "inplace": {"o": 1}},    # inplace maps OUT -> IN (strings)
            {"recompute": "a"},                   # neither run nor free
            {},
        ]
        for step in bad_steps:
            p = copy.deepcopy(GOOD_PLAN)
            p["steps"].append(step)
            with self.subTest(step=step):
                self.assertIsNotNone(validate_json.first_error(self.v, p))

    def test_bad_fields(self):
        for key, val in (("format", "memplan.plan/0"), ("budget_bytes", 1.5),
                         ("feasible", "yes"), ("graph_sha256", "abc"),
                         ("accumulation", {"g": "lazy"})):
            p = copy.deepcopy(GOOD_PLAN)
            p[key] = val
            with self.subTest(key=key):
                self.assertIsNotNone(validate_json.first_error(self.v, p))
        p = copy.deepcopy(GOOD_PLAN)
        p["modules"] = ["model.block0", 3]
        self.assertIsNotNone(validate_json.first_error(self.v, p))
        p["modules"] = ["model.block0"]
        self.assertIsNone(validate_json.first_error(self.v, p))
        p = copy.deepcopy(GOOD_PLAN)
        p["predicted"]["cost_unit"] = "seconds"
        self.assertIsNotNone(validate_json.first_error(self.v, p))


class ReportSchema(unittest.TestCase):
    def setUp(self):
        self.v = validator("report.schema.json")

    def valid(self, doc):
        err = validate_json.first_error(self.v, doc)
        return err is None

    def test_good_analyze(self):
        err = validate_json.first_error(self.v, GOOD_ANALYZE)
        self.assertIsNone(err, err and validate_json.format_error(err))
        r = copy.deepcopy(GOOD_ANALYZE)
        r.update(peak_step=-1, peak_op=None, peak_phase=None, live_at_peak=[])
        self.assertTrue(self.valid(r))

    def test_analyze_missing_peak_bytes(self):
        r = copy.deepcopy(GOOD_ANALYZE)
        del r["peak_bytes"]
        self.assertFalse(self.valid(r))

    def test_analyze_extra_key(self):
        r = copy.deepcopy(GOOD_ANALYZE)
        r["extra"] = 1
        self.assertFalse(self.valid(r))

    def test_analyze_bad_fields(self):
        cases = [
            ("peak_bytes", 1.5), ("peak_step", -2), ("peak_phase", "sideways"),
            ("accumulation", "lazy"), ("by_category", {k: 0 for k in KINDS[:-1]}),
            ("live_at_peak", [{"tensor": "x", "bytes": 1, "kind": "input",
                               "producer": None, "scope": "", "extra": 1}]),
            ("live_at_peak", [{"tensor": "x", "bytes": -1, "kind": "input",
                               "producer": None, "scope": ""}]),
            ("graph", dict(GOOD_ANALYZE["graph"], style="hybrid")),
        ]
        for key, val in cases:
            r = copy.deepcopy(GOOD_ANALYZE)
            r[key] = val
            with self.subTest(key=key, val=val):
                self.assertFalse(self.valid(r))

    def test_common_fields(self):
        base = dict(GOOD_CHECK)
        self.assertTrue(self.valid(base))
        self.assertFalse(self.valid(dict(base, anything="goes")))  # check is closed
        self.assertFalse(self.valid(dict(base, command="explode")))
        self.assertFalse(self.valid(dict(base, format="memplan.report/2")))
        self.assertFalse(self.valid({"format": "memplan.report/1", "command": "verify"}))

    def test_check(self):
        self.assertTrue(self.valid(GOOD_CHECK))
        passed = dict(GOOD_CHECK, passed=True, failures=[],
                      conditions=[dict(BUDGET_FAILURE, passed=True, actual=99)],
                      baseline={"file": "b.json", "command": "plan",
                                "pointer": "/predicted/peak_bytes", "peak_bytes": 98,
                                "tolerance": "2%", "tolerance_fraction": 0.02,
                                "limit_bytes": 99})
        self.assertTrue(self.valid(passed))
        invalid_plan = dict(GOOD_CHECK, peak_bytes=None, peak_step=None, peak_op=None,
                            failures=[{"name": "plan", "condition": "replays",
                                       "expected": "valid", "actual": "step 1: x is not alive",
                                       "message": "m"}])
        self.assertTrue(self.valid(invalid_plan))
        for doc in (dict(GOOD_CHECK, passed=True),      # passed with a failure
                    dict(GOOD_CHECK, failures=[]),      # failed without one
                    dict(GOOD_CHECK, failures=[dict(BUDGET_FAILURE, expected=1.5)]),
                    dict(GOOD_CHECK, failures=[dict(BUDGET_FAILURE, name="vibes")]),
                    dict(GOOD_CHECK, baseline={"file": "b.json"}),
                    dict(GOOD_CHECK, conditions=[])):
            self.assertFalse(self.valid(doc))

    def test_verify(self):
        good = {"format": "memplan.report/1", "command": "verify", "memplan_version": "0.1.0",
                "graph": GOOD_ANALYZE["graph"], "plan": "p.json", "valid": True, "error": None,
                "peak_bytes": 10, "recompute_cost": 0.0, "recomputed_runs": 0,
                "predicted_peak_bytes": 10, "graph_sha256_matches": True, "budget_bytes": 0,
                "within_budget": None}
        self.assertTrue(self.valid(good))
        invalid = dict(good, valid=False, error="step 3 (free): \"x\" is not alive",
                       peak_bytes=None, recompute_cost=None, recomputed_runs=None)
        self.assertTrue(self.valid(invalid))
        for doc in (dict(good, extra=1), dict(good, error="x"), dict(good, peak_bytes=None),
                    dict(invalid, peak_bytes=10), dict(invalid, within_budget=True),
                    dict(good, graph=dict(GOOD_ANALYZE["graph"], style="hybrid"))):
            self.assertFalse(self.valid(doc))
        d = dict(good)
        del d["within_budget"]
        self.assertFalse(self.valid(d))

    def test_other_commands(self):
        base = {"format": "memplan.report/1", "memplan_version": "0.1.0"}
        plan = dict(base, command="plan", predicted=GOOD_PLAN["predicted"],
                    budget_bytes=1024, feasible=False, min_feasible_peak_bytes=2048, steps=3)
        profile = dict(base, command="profile", graph=GOOD_ANALYZE["graph"],
                       program={"source": "baseline", "plan": None, "accumulation": "inplace",
                                "steps": 3},
                       backend="cpu", allocator="host", device="cpu", device_name="x86_64",
                       driver_version=None, cuda_version=None, cupti=False, repeat=1,
                       predicted_peak_bytes=100, predicted_peak_step=1,
                       measured_source="allocator", measured_peak_bytes=100,
                       measured_peak_step=1, allocator_peak_bytes=100, device_peak_bytes=None,
                       relative_error=0.0, exact=True, first_divergence=None,
                       dropped_records=0, records=None, run_time_us=1.5, wall_time_us=2.0,
                       ops=[{"op": "fc", "phase": "forward", "runs": 1, "recompute_runs": 0,
                             "time_us": 1.5}],
                       notes=[], warnings=[])
        check = dict(GOOD_CHECK)
        for doc, drop in ((plan, "min_feasible_peak_bytes"), (profile, "measured_peak_bytes"),
                          (check, "passed")):
            with self.subTest(command=doc["command"]):
                self.assertTrue(self.valid(doc))
                d = dict(doc)
                del d[drop]
                self.assertFalse(self.valid(d))
        # A CUDA report with CUPTI: the records block and its checks.
        records = {"memory": 10, "kernels": 20, "untagged_memory": 0, "correlated_memory": 8,
                   "time_attributed_memory": 0, "outside_memory": 2, "api": 40,
                   "external_correlation": 30,
                   "size_check": {"matched": 5, "disagree": 1, "max_abs_diff_bytes": 512,
                                  "total_diff_bytes": -512, "unmatched_records": 0,
                                  "unmatched_requests": 0},
                   "async": None, "cupti_library": "/usr/local/cuda/lib64/libcupti.so.13",
                   "cupti_version": 130001, "cupti_built_version": 130001}
        cuda = dict(profile, backend="cuda", allocator="default", device="cuda:0",
                    device_name="NVIDIA H200", driver_version="13.0", cuda_version="13.0",
                    cupti=True, measured_source="cupti", device_peak_bytes=2097152,
                    records=records)
        self.assertTrue(self.valid(cuda))
        for key in ("size_check", "cupti_library", "correlated_memory"):
            with self.subTest(missing=key):
                r = dict(records)
                del r[key]
                self.assertFalse(self.valid(dict(cuda, records=r)))
        self.assertFalse(self.valid(dict(cuda, records=dict(records, **{"async": {"expected": 1}}))))
        self.assertFalse(self.valid(dict(cuda, records=None)))


class Tools(unittest.TestCase):
    def run_tool(self, *args):
        p = subprocess.run([sys.executable, os.path.join(HERE, "validate_json.py")] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=120)
        return p.returncode, p.stdout, p.stderr

    def test_validate_json_cli(self):
        schema = os.path.join(SCHEMAS, "graph.schema.json")
        mlp = os.path.join(EXAMPLES, "mlp.graph.json")
        rc, out, _ = self.run_tool(schema, mlp)
        self.assertEqual((rc, out), (0, "ok %s\n" % mlp))
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.json")
            g = copy.deepcopy(MINI_GRAPH)
            g["tensors"][0]["shape"] = ["batch", -1]
            with open(bad, "w") as f:
                json.dump(g, f)
            rc, out, _ = self.run_tool(schema, mlp, bad)
            self.assertEqual(rc, 1)
            self.assertIn("/tensors/0/shape/1", out)
            broken = os.path.join(d, "broken.json")
            with open(broken, "w") as f:
                f.write("{\"format\": ")
            self.assertEqual(self.run_tool(schema, broken)[0], 2)
            self.assertEqual(self.run_tool(schema, os.path.join(d, "missing.json"))[0], 2)
        self.assertEqual(self.run_tool(schema)[0], 2)

    def test_gen_gpt_is_deterministic_and_committed(self):
        committed = os.path.join(EXAMPLES, "gpt_tiny.graph.json")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "gpt.json")
            subprocess.check_call([sys.executable, os.path.join(EXAMPLES, "gen_gpt.py"), out],
                                  timeout=120)
            with open(out, "rb") as f, open(committed, "rb") as g:
                self.assertEqual(f.read(), g.read(),
                                 "examples/gpt_tiny.graph.json is stale: rerun examples/gen_gpt.py")


if __name__ == "__main__":
    unittest.main()
