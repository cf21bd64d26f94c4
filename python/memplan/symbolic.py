"""Symbolic sizes for exported graphs: the same step exported at a few sizes,
every number that changes solved as a polynomial in the size symbols.

Recipe: for symbols s1..sN with export values v_i, export at every corner of
{v_i, w_i}^N with w_i = v_i +- 1, so the graph's numbers are known on a cube
of side one; a dimension, a workspace or a flop count that is multilinear in
the symbols (a*batch*seq + b*batch + c*seq + d) is then fixed exactly and in
integers by finite differences. One more export, at u_i = v_i +- 2 for every
i, checks the fit: a number that is not multilinear (seq*seq in a flattened
attention matrix, a size picked by a heuristic) disagrees there and is
reported, never written as a wrong formula. Cost: 2^N + 1 exports.

Falls short on: sizes that are not multilinear in the symbols (an error for
shapes; a workspace that is not, or that shrinks as a size grows (measured
scratch is noisy), becomes the largest value seen, constant; such flops are
dropped, and memplan estimates them from the op type and shapes); graphs whose
ops change with the size (an error). Each frozen workspace and dropped flop
count is written into the graph as a source.warnings entry (see
export_warning), which `memplan analyze` and `plan` print whenever the symbols
in use differ from the export's, since the frozen value may then be too small.
"""
import itertools


class SymbolicError(Exception):
    pass


def _fit(values, deltas):
    """values: {corner (tuple of 0/1): int}; returns {subset (tuple of symbol
    indexes): coefficient} of f(x) = sum_S c_S prod_{i in S} x_i, where
    x_i = base_i + delta_i * bit_i ... solved in the shifted variables, then
    expanded. Exact in integers because |delta_i| == 1."""
    n = len(deltas)
    # Coefficients in t_i = (x_i - base_i) / delta_i, t_i in {0, 1}: Moebius
    # inversion on the cube.
    coef_t = {}
    for s in itertools.product((0, 1), repeat=n):
        c = 0
        for sub in itertools.product((0, 1), repeat=n):
            if all(sub[i] <= s[i] for i in range(n)):
                sign = (-1) ** (sum(s) - sum(sub))
                c += sign * values[sub]
        coef_t[s] = c
    return coef_t


def _expand(coef_t, bases, deltas):
    """Coefficients in t (t_i = (x_i - b_i) * d_i, d_i = +-1) -> in x."""
    n = len(bases)
    out = {}
    for s, c in coef_t.items():
        if c == 0:
            continue
        # prod_{i in s} (d_i x_i - d_i b_i)
        idx = [i for i in range(n) if s[i]]
        for pick in itertools.product((0, 1), repeat=len(idx)):
            term = c
            mono = []
            for i, p in zip(idx, pick):
                if p:
                    term *= deltas[i]
                    mono.append(i)
                else:
                    term *= -deltas[i] * bases[i]
            key = tuple(mono)
            out[key] = out.get(key, 0) + term
    return {k: v for k, v in out.items() if v != 0}


def _evaluate(poly, point):
    total = 0
    for mono, c in poly.items():
        v = c
        for i in mono:
            v *= point[i]
        total += v
    return total


def format_poly(poly, names):
    """{(0,): 64, (): 1} -> "64*batch+1"; constants alone -> int."""
    if all(m == () for m in poly):
        return poly.get((), 0)
    terms = sorted(poly.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    pos = [(m, c) for m, c in terms if c > 0]
    neg = [(m, -c) for m, c in terms if c < 0]

    def text(m, c):
        parts = [names[i] for i in m]
        if c != 1 or not parts:
            parts.insert(0, str(c))
        return "*".join(parts)

    out = "+".join(text(m, c) for m, c in pos)
    for m, c in neg:
        out += "-" + text(m, c)
    return out


def _structure(g):
    """What must not change with the sizes."""
    return ([(t["id"], t["dtype"], t.get("kind"), len(t["shape"]), t.get("alias_of"),
              t.get("grad_of")) for t in g["tensors"]],
            [(o["id"], o["type"], tuple(o["inputs"]), tuple(o["outputs"]), o["phase"])
             for o in g["ops"]])


def _first_difference(a, b):
    for x, y in zip(a, b):
        if x != y:
            return f"{x} vs {y}"
    return f"{len(a)} vs {len(b)} entries"


def _varies_with(vals, n):
    """Indexes of the symbols along which the corner values change; all of
    them when only the check point disagrees."""
    dep = [i for i in range(n)
           if any(vals[c] != vals[c[:i] + (1 - c[i],) + c[i + 1:]] for c in vals)]
    return dep or list(range(n))


def export_warning(kind, op, field, names, dep, base, value=None):
    """A source.warnings entry of memplan.graph/1: op `op`'s `field` could not
    be written as an expression in the symbols. kind "frozen": the field holds
    `value` (the largest seen) at every size; "dropped": it was left out.
    symbols: what it varied with; exported_at: the sizes the graph was
    exported at (`memplan` warns when the sizes in use differ)."""
    w = {"kind": kind, "op": op, "field": field}
    if value is not None:
        w["value"] = value
    w["symbols"] = [names[i] for i in dep]
    w["exported_at"] = dict(zip(names, base))
    return w


def export_points(base, step):
    """The sizes make_symbolic exports at, in the order it asks for them:
    the 2^n corners base + step * {0, 1}^n, then the check point base + 2 * step."""
    n = len(base)
    corners = [tuple(base[i] + step[i] * c[i] for i in range(n))
               for c in itertools.product((0, 1), repeat=n)]
    return corners + [tuple(base[i] + 2 * step[i] for i in range(n))]


def make_symbolic(export_at, names, base, step):
    """export_at(point) -> memplan.graph/1 dict at sizes `point` (a tuple, one
    value per name). base: the export sizes; step: +1 or -1 per symbol (the
    direction a second size may go: -1 where the model has a maximum, such as
    a sequence length). Returns (graph at base with symbolic numbers, stats).
    What cannot be expressed is an error for a shape; a workspace or a flop
    count becomes a source.warnings entry (export_warning), counted in stats.
    Raises SymbolicError naming the tensor or op that cannot be expressed."""
    n = len(names)
    points = export_points(base, step)
    *corner_points, check_point = points
    graphs = {corner: export_at(point)
              for corner, point in zip(itertools.product((0, 1), repeat=n), corner_points)}
    check = export_at(check_point)
    g0 = graphs[(0,) * n]
    s0 = _structure(g0)
    for corner, g in list(graphs.items()) + [("check", check)]:
        s = _structure(g)
        if s != s0:
            what = "tensors" if s[0] != s0[0] else "ops"
            k = 0 if what == "tensors" else 1
            at = corner if corner == "check" else tuple(
                base[i] + step[i] * corner[i] for i in range(n))
            raise SymbolicError(
                f"the {what} of the graph change with the size ({dict(zip(names, base))} vs "
                f"{at}): {_first_difference(s0[k], s[k])}; symbols cannot express it")

    def solve(get, where, exact, grows=False):
        vals = {c: get(g) for c, g in graphs.items()}
        v_check = get(check)
        if any(v is None for v in vals.values()) or v_check is None:
            return None
        if not all(isinstance(v, int) for v in list(vals.values()) + [v_check]):
            return None
        if len(set(vals.values())) == 1 and v_check == vals[(0,) * n]:
            return vals[(0,) * n]
        poly = _expand(_fit(vals, step), base, step)
        shrinks = grows and any(c < 0 for m, c in poly.items() if m)
        if shrinks or _evaluate(poly, check_point) != v_check:
            if exact:
                raise SymbolicError(
                    f"{where}: {[vals[c] for c in sorted(vals)]} at "
                    f"{[tuple(base[i] + step[i] * c[i] for i in range(n)) for c in sorted(vals)]} "
                    f"and {v_check} at {check_point} are not multilinear in "
                    f"{', '.join(names)}")
            return None
        return format_poly(poly, names)

    stats = {"symbolic_dims": 0, "workspace_symbolic": 0, "workspace_constant": 0,
             "flops_symbolic": 0, "flops_dropped": 0}
    warnings = []

    def varies(get):
        return _varies_with({c: get(g) for c, g in graphs.items()}, n)
    out = dict(g0)
    out["symbols"] = {**g0.get("symbols", {}), **dict(zip(names, base))}
    tensors = []
    for k, t in enumerate(g0["tensors"]):
        t = dict(t)
        shape = []
        for d in range(len(t["shape"])):
            v = solve(lambda g, k=k, d=d: g["tensors"][k]["shape"][d],
                      f"tensor {t['id']} dimension {d}", exact=True)
            if isinstance(v, str):
                stats["symbolic_dims"] += 1
            shape.append(v)
        t["shape"] = shape
        tensors.append(t)
    ops = []
    for k, o in enumerate(g0["ops"]):
        o = dict(o)
        ws = solve(lambda g, k=k: g["ops"][k].get("workspace_bytes", 0),
                   f"op {o['id']} workspace_bytes", exact=False, grows=True)
        if ws is None:  # not multilinear, or shrinking with a size: the largest seen
            stats["workspace_constant"] += 1
            seen = [g["ops"][k].get("workspace_bytes", 0) for g in list(graphs.values()) + [check]]
            o["workspace_bytes"] = max(seen)
            warnings.append(export_warning(
                "frozen", o["id"], "workspace_bytes", names,
                varies(lambda g, k=k: g["ops"][k].get("workspace_bytes", 0)), base, max(seen)))
        elif isinstance(ws, str):
            o["workspace_bytes"] = ws
            stats["workspace_symbolic"] += 1
        elif ws:
            o["workspace_bytes"] = ws
        else:
            o.pop("workspace_bytes", None)
        if "flops" in o:
            fl = solve(lambda g, k=k: g["ops"][k].get("flops"), f"op {o['id']} flops", exact=False)
            if isinstance(fl, str):
                o["flops"] = fl
                stats["flops_symbolic"] += 1
            elif fl is None:
                del o["flops"]  # memplan estimates it from the type and shapes
                stats["flops_dropped"] += 1
                warnings.append(export_warning(
                    "dropped", o["id"], "flops", names,
                    varies(lambda g, k=k: g["ops"][k].get("flops")), base))
        ops.append(o)
    out["tensors"], out["ops"] = tensors, ops
    if warnings:
        source = dict(out.get("source", {}))
        source["warnings"] = list(source.get("warnings", [])) + warnings
        out["source"] = source
    return out, stats
