#!/usr/bin/python3
"""Tests of python/memplan/symbolic.py (no torch needed): multilinear
sizes are solved exactly, anything else is reported, or left constant or
dropped and named in the graph's source.warnings."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from memplan import symbolic  # noqa: E402
from checks import Checks  # noqa: E402


def graph(b, s, square=False, ws=None, reorder=False):
    t = [{"id": "x", "shape": [b, s], "dtype": "int64", "kind": "input"},
         {"id": "h", "shape": [b * s - 1, 16], "dtype": "float32"},
         {"id": "a", "shape": [b * 4, s, s * s if square else s], "dtype": "float32"},
         {"id": "w", "shape": [16, 16], "dtype": "float32", "kind": "parameter"}]
    ops = [{"id": "op1", "type": "f", "inputs": ["x"], "outputs": ["h"], "phase": "forward",
            "flops": 2 * b * s * 16, "workspace_bytes": ws(b, s) if ws else 1024},
           {"id": "op2", "type": "g", "inputs": ["h", "w"], "outputs": ["a"], "phase": "forward",
            "flops": 7 * b * s * s}]
    if reorder:
        ops.reverse()
    return {"format": "memplan.graph/1", "name": "m", "symbols": {}, "tensors": t, "ops": ops,
            "outputs": ["a"]}


def main():
    checks = Checks()

    def check(name, ok, detail=""):
        checks(name, ok, detail if isinstance(detail, str) else repr(detail))
    calls = []

    def at(point, **kw):
        calls.append(point)
        return graph(*point, **kw)

    g, st = symbolic.make_symbolic(at, ["batch", "seq"], (2, 8), (1, -1))
    shapes = {t["id"]: t["shape"] for t in g["tensors"]}
    check("symbols hold the export sizes", g["symbols"] == {"batch": 2, "seq": 8}, g["symbols"])
    check("2^N + 1 exports, the check at base + 2*step",
          sorted(calls) == sorted([(2, 8), (2, 7), (3, 8), (3, 7), (4, 6)]), calls)
    check("batch*seq-1 solved", shapes["h"] == ["batch*seq-1", 16], shapes["h"])
    check("4*batch, seq solved", shapes["a"] == ["4*batch", "seq", "seq"], shapes["a"])
    check("symbol-free shapes stay integers", shapes["w"] == [16, 16])
    ops = {o["id"]: o for o in g["ops"]}
    check("flops multilinear -> expression", ops["op1"]["flops"] == "32*batch*seq", ops["op1"])
    check("flops quadratic in seq -> dropped, not a wrong formula", "flops" not in ops["op2"],
          ops["op2"])
    check("constant workspace stays an integer", ops["op1"]["workspace_bytes"] == 1024)
    check("stats", st["symbolic_dims"] == 6 and st["flops_dropped"] == 1, st)
    check("dropped flops named in source.warnings, with the symbols they vary with",
          g["source"]["warnings"] == [
              {"kind": "dropped", "op": "op2", "field": "flops", "symbols": ["batch", "seq"],
               "exported_at": {"batch": 2, "seq": 8}}], g.get("source"))

    g, st = symbolic.make_symbolic(lambda p: graph(*p, ws=lambda b, s: 100 * b + 3),
                                   ["batch", "seq"], (2, 8), (1, -1))
    check("workspace affine in batch -> expression",
          g["ops"][0]["workspace_bytes"] == "100*batch+3", g["ops"][0])
    check("an expressed workspace is no warning",
          [w["op"] for w in g["source"]["warnings"]] == ["op2"], g["source"])
    g, st = symbolic.make_symbolic(lambda p: graph(*p, ws=lambda b, s: b * b * 10),
                                   ["batch", "seq"], (2, 8), (1, -1))
    check("workspace not multilinear -> the largest value seen, counted",
          g["ops"][0]["workspace_bytes"] == 160 and st["workspace_constant"] == 1, g["ops"][0])
    frozen = {"kind": "frozen", "op": "op1", "field": "workspace_bytes", "value": 160,
              "symbols": ["batch"], "exported_at": {"batch": 2, "seq": 8}}
    check("a frozen workspace is written into the graph as a source.warnings entry",
          g["source"]["warnings"][0] == frozen, g["source"]["warnings"])
    g, st = symbolic.make_symbolic(lambda p: graph(*p, ws=lambda b, s: 292 - 40 * b),
                                   ["batch", "seq"], (2, 8), (1, -1))
    check("workspace shrinking with the batch -> the largest value seen",
          g["ops"][0]["workspace_bytes"] == 212 and st["workspace_constant"] == 1, g["ops"][0])
    check("... and a warning naming batch", g["source"]["warnings"][0]["value"] == 212
          and g["source"]["warnings"][0]["symbols"] == ["batch"], g["source"]["warnings"])

    def with_source(p):
        out = graph(*p, ws=lambda b, s: 7 if p == (4, 6) else 5)
        out["source"] = {"framework": "pytorch", "warnings": [{"kind": "x"}]}
        return out
    g, st = symbolic.make_symbolic(with_source, ["batch", "seq"], (2, 8), (1, -1))
    check("a workspace off only at the check point: frozen, varying with every symbol; the "
          "source kept, its warnings extended",
          g["source"]["framework"] == "pytorch" and g["source"]["warnings"][0] == {"kind": "x"}
          and g["source"]["warnings"][1]["symbols"] == ["batch", "seq"]
          and g["source"]["warnings"][1]["value"] == 7, g["source"])

    try:
        symbolic.make_symbolic(lambda p: graph(*p, square=True), ["batch", "seq"], (2, 8), (1, -1))
        check("a shape quadratic in seq is an error", False)
    except symbolic.SymbolicError as e:
        check("a shape quadratic in seq is an error naming the tensor",
              str(e).startswith("tensor a dimension 2: ") and "not multilinear in batch, seq"
              in str(e), str(e))
    try:
        symbolic.make_symbolic(lambda p: graph(p[0], 8, reorder=p[0] == 3), ["batch"], (2,), (1,))
        check("ops that change with the size are an error", False)
    except symbolic.SymbolicError as e:
        check("ops that change with the size are an error", "the ops of the graph change with "
              "the size" in str(e), str(e))
    check("format_poly", symbolic.format_poly({(0,): 1}, ["batch"]) == "batch"
          and symbolic.format_poly({(0, 1): 2, (): -3}, ["b", "s"]) == "2*b*s-3"
          and symbolic.format_poly({(): 5}, ["b"]) == 5)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
