"""The graph document: byte sizes, the self-check (SPEC section 1) and deterministic JSON."""
import json
from typing import Any, Dict, List

from ._common import DTYPE_SIZE, RESIDENT


def nbytes(t: Dict[str, Any]) -> int:
    n = DTYPE_SIZE[t["dtype"]]
    for s in t["shape"]:
        n *= s
    return n


def validate(g: Dict[str, Any]) -> List[str]:
    """A list of problems (empty when the graph is well formed)."""
    errs = []
    tensors = {}
    for t in g["tensors"]:
        if t["id"] in tensors:
            errs.append(f"duplicate tensor id {t['id']}")
        tensors[t["id"]] = t
        if t["dtype"] not in DTYPE_SIZE:
            errs.append(f"{t['id']}: bad dtype {t['dtype']}")
        if not all((isinstance(s, int) and s >= 0) or (isinstance(s, str) and s)
                   for s in t["shape"]):
            errs.append(f"{t['id']}: bad shape {t['shape']}")
    for t in tensors.values():
        base = tensors.get(t.get("alias_of"))
        if "alias_of" in t and (base is None or "alias_of" in base):
            errs.append(f"{t['id']}: alias_of {t.get('alias_of')} is not a base tensor")
        if "grad_of" in t and tensors.get(t["grad_of"], {}).get("kind") != "parameter":
            errs.append(f"{t['id']}: grad_of {t['grad_of']} is not a parameter")
    op_ids, defined = set(), {i for i, t in tensors.items() if t["kind"] in RESIDENT}
    produced, seen_bw = set(), False
    for op in g["ops"]:
        if op["id"] in op_ids or op["id"] in tensors:
            errs.append(f"duplicate op id {op['id']}")
        op_ids.add(op["id"])
        if op["phase"] == "backward":
            seen_bw = True
        elif seen_bw:
            errs.append(f"{op['id']}: forward op after the backward started")
        for i in op["inputs"]:
            if i not in defined:
                errs.append(f"{op['id']}: reads {i} before it is produced")
        for o in op["outputs"]:
            if o not in tensors:
                errs.append(f"{op['id']}: dangling output {o}")
            if o in produced or tensors.get(o, {}).get("kind") in RESIDENT:
                errs.append(f"{o}: produced twice")
            produced.add(o)
            defined.add(o)
    for t in tensors:
        if t not in defined:
            errs.append(f"{t}: never produced")
    for o in g["outputs"]:
        if o not in defined:
            errs.append(f"output {o} is never produced")
    return errs


def dumps(g: Dict[str, Any]) -> str:
    """Deterministic JSON, one tensor / op per line (diff-friendly)."""

    def enc(v):
        return json.dumps(v, separators=(", ", ": "))

    parts = []
    for k, v in g.items():
        if k in ("tensors", "ops"):
            body = ",\n".join("  " + enc(x) for x in v)
            parts.append(f"{json.dumps(k)}: [\n{body}\n]")
        else:
            parts.append(f"{json.dumps(k)}: {enc(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
