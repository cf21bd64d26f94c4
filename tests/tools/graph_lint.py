#!/usr/bin/python3
"""Cross-reference and shape sanity checks for memplan.graph/1 example files.

Usage: graph_lint.py GRAPH [GRAPH...]   prints "ok FILE" or one line per problem; exit 1 on problems.

This is a test helper for hand-written/generated examples, not the product importer
(the C++ importer is authoritative). It checks: unique tensor ids, unique op ids,
every op input defined (a resident tensor or produced by an earlier op), one producer
per tensor, outputs declared, alias_of/grad_of/saves/graph outputs name known tensors,
symbols defined, and for the op types whose output shape follows from input shapes
alone, that the declared output shapes agree. Types that need attributes not in the
format (convolution, pooling, sum, mean, ...) are only checked for references.
"""
import json
import sys

RESIDENT = {"input", "parameter", "buffer", "optimizer_state"}
UNARY_SAME = {"relu", "gelu", "silu", "tanh", "sigmoid", "dropout", "softmax",
              "log_softmax", "layer_norm", "batch_norm", "group_norm", "rms_norm"}
BINARY_BCAST = {"add", "sub", "mul", "div"}


def _base_type(t):
    if t.startswith("aten."):
        t = t[5:]
    return t.split(".", 1)[0]


def _broadcast(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(x if y == 1 else y)
    return out[::-1]


def _numel(s):
    n = 1
    for d in s:
        n *= d
    return n


def expected_shapes(otype, ins):
    """List of expected output shapes, or None if this type is not checked.
    Raises ValueError with a message when the inputs themselves are inconsistent."""
    t = _base_type(otype)
    if t in UNARY_SAME:
        return [ins[0]]
    if t in BINARY_BCAST:
        if len(ins) < 2:
            return [ins[0]]
        r = _broadcast(ins[0], ins[1])
        if r is None:
            raise ValueError("shapes %s and %s do not broadcast" % (ins[0], ins[1]))
        return [r]
    if t == "linear":
        x, w = ins[0], ins[1]
        if len(w) != 2 or x[-1] != w[1]:
            raise ValueError("linear: input %s vs weight %s" % (x, w))
        if len(ins) > 2 and ins[2] != [w[0]]:
            raise ValueError("linear: bias %s vs weight %s" % (ins[2], w))
        return [x[:-1] + [w[0]]]
    if t in ("mm", "bmm", "matmul"):
        a, b = ins[0], ins[1]
        if a[-1] != b[-2]:
            raise ValueError("%s: %s @ %s" % (t, a, b))
        return [a[:-1] + [b[-1]]] if len(a) >= len(b) else [b[:-2] + [a[-2], b[-1]]]
    if t == "addmm":
        a, b = ins[1], ins[2]
        if a[-1] != b[0]:
            raise ValueError("addmm: %s @ %s" % (a, b))
        return [[a[0], b[1]]]
    if t == "embedding":
        w, idx = ins[0], ins[1]
        return [idx + [w[1]]]
    if t == "scaled_dot_product_attention":
        q, k, v = ins[0], ins[1], ins[2]
        if q[-1] != k[-1] or k[-2] != v[-2]:
            raise ValueError("sdpa: q %s k %s v %s" % (q, k, v))
        return [q[:-1] + [v[-1]]]
    if t == "cross_entropy":
        return [[]]
    return None


def lint(graph):
    problems = []
    symbols = graph.get("symbols", {})
    tensors = {}
    for t in graph.get("tensors", []):
        if t["id"] in tensors:
            problems.append("duplicate tensor id %r" % t["id"])
        tensors[t["id"]] = t

    def dims(tid):
        out = []
        for d in tensors[tid]["shape"]:
            if isinstance(d, str):
                if d not in symbols:
                    raise KeyError(d)
                d = symbols[d]
            out.append(d)
        return out

    for tid, t in tensors.items():
        for d in t["shape"]:
            if isinstance(d, str) and d not in symbols:
                problems.append("tensor %r: unknown symbol %r" % (tid, d))
        for key in ("alias_of", "grad_of"):
            if key in t and t[key] not in tensors:
                problems.append("tensor %r: %s names unknown tensor %r" % (tid, key, t[key]))
        if "alias_of" in t and t["alias_of"] == tid:
            problems.append("tensor %r is an alias of itself" % tid)

    defined = {tid for tid, t in tensors.items() if t.get("kind") in RESIDENT}
    producer = {}
    op_ids = set()
    for op in graph.get("ops", []):
        oid = op["id"]
        if oid in op_ids:
            problems.append("duplicate op id %r" % oid)
        op_ids.add(oid)
        for i in op["inputs"]:
            if i not in tensors:
                problems.append("op %r: unknown input %r" % (oid, i))
            elif i not in defined:
                problems.append("op %r: input %r used before it is produced" % (oid, i))
        for o in op["outputs"]:
            if o not in tensors:
                problems.append("op %r: unknown output %r" % (oid, o))
                continue
            if o in producer:
                problems.append("tensor %r has two producers: %r and %r" % (o, producer[o], oid))
            elif tensors[o].get("kind") in RESIDENT:
                problems.append("op %r writes resident tensor %r" % (oid, o))
            producer[o] = oid
            defined.add(o)
        for s in op.get("saves", []):
            if s not in tensors:
                problems.append("op %r: saves unknown tensor %r" % (oid, s))
        known = all(x in tensors for x in op["inputs"] + op["outputs"])
        if not known:
            continue
        try:
            ins = [dims(x) for x in op["inputs"]]
            outs = [dims(x) for x in op["outputs"]]
        except KeyError:
            continue
        t = _base_type(op["type"])
        try:
            exp = expected_shapes(op["type"], ins)
        except (ValueError, IndexError) as e:
            problems.append("op %r (%s): %s" % (oid, t, e))
            continue
        if exp is not None:
            if exp != outs[:len(exp)] or len(outs) != len(exp):
                problems.append("op %r (%s): outputs %s, expected %s" % (oid, t, outs, exp))
        elif t in ("view", "reshape", "expand") and len(ins) >= 1 and len(outs) == 1:
            if t != "expand" and _numel(ins[0]) != _numel(outs[0]):
                problems.append("op %r (%s): %s -> %s changes the element count" % (oid, t, ins[0], outs[0]))
        elif t in ("transpose", "permute") and len(outs) == 1:
            if sorted(ins[0]) != sorted(outs[0]):
                problems.append("op %r (%s): %s -> %s is not a permutation" % (oid, t, ins[0], outs[0]))
        elif t in ("split", "cat"):
            whole, parts = (ins[0], outs) if t == "split" else (outs[0], ins)
            ok = any(
                all(len(p) == len(whole) and all(p[j] == whole[j] for j in range(len(whole)) if j != ax)
                    for p in parts) and sum(p[ax] for p in parts) == whole[ax]
                for ax in range(len(whole)))
            if not ok:
                problems.append("op %r (%s): %s vs parts %s" % (oid, t, whole, parts))

    for o in graph.get("outputs", []):
        if o not in tensors:
            problems.append("graph output %r is not a tensor" % o)
        elif o not in defined:
            problems.append("graph output %r is never produced" % o)
    return problems


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: graph_lint.py GRAPH [GRAPH...]\n")
        return 2
    status = 0
    for path in argv[1:]:
        try:
            with open(path, encoding="utf-8") as f:
                g = json.load(f)
        except (OSError, ValueError) as e:
            sys.stderr.write("%s: cannot read: %s\n" % (path, e))
            status = 2
            continue
        problems = lint(g)
        for p in problems:
            print("%s: %s" % (path, p))
        if problems:
            status = max(status, 1)
        else:
            print("ok %s" % path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
