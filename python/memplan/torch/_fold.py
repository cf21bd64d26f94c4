"""Layer folding: a deep model's step from traces of a few of its layers.

A transformer's decoder layers are one block repeated; tracing all of them
(Llama-2-70B: 80) is most of an export's time. Here the step is traced with
the layer stack cut to K and K + 1 layers, the two graphs are aligned, and
the graph of the whole stack is extrapolated from them:

- every list that grows with the stack (ops, tensors) is aligned on its
  elements with the digits masked (difflib); what K + 1 adds is one block
  per place the stack is walked (forward, backward);
- every integer, whether a JSON number or the digits in a name ("mul_73",
  "layers.12.mlp"), is affine in the layer count where both graphs have
  it; an added block's integers continue the progression from the block
  before it (or, at the start of a run, the block after it).

The extrapolation is checked before it is used: K and K + 1 must predict the
trace at K + 2 exactly (every byte of the graph and of the export's stats),
or the whole stack is traced. A symbolic export's other sizes are traced at
K + 1 layers only: their integers move as the checked size's do.

Folding is tried only where the stack is one nn.ModuleList of a
transformers model whose layers are alike (same modules, attributes other
than their index, parameter shapes and dtypes; per-layer config lists
uniform), so a model whose layers differ (sliding-window every sixth layer,
dense-then-MoE) is traced whole; other models' stacks when the caller asks
(fold_layers="always": a layer that computes by its own index, not its
attributes, escapes every check but the one at K + 2).

Cost: three traces of K to K + 2 layers at one size and one of K + 1 at
each other size, instead of L at each; and linear work in the graph's size.
Falls short where a step's numbers are not affine in the layer count (none
seen so far); the check at K + 2 then refuses it.
"""
import contextlib
import difflib
import json
import re
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch.nn as nn

FOLD_FROM = 3  # K: the smallest stack traced
# Stacks shorter than this are traced whole: a trace costs about one layer's
# time plus three (tiny Llama on 2 cores); a symbolic export's five sizes
# then cost 3 + 4 + 5 + 4 x 4 = 28 layers and 7 traces instead of 5 x L
# layers and 5 traces: less from about 10 layers on.
MIN_STACK = 12
INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "idx"})
_DIGITS = re.compile(r"\d+")


class FoldError(ValueError):
    """The two traces do not extrapolate (their lists do not align, or an
    integer is not affine)."""


# --------------------------------------------------------------------------
# The layer stack
# --------------------------------------------------------------------------
def _simple(v: Any) -> bool:
    if isinstance(v, (bool, int, float, str, type(None))):
        return True
    return isinstance(v, (tuple, list)) and all(_simple(x) for x in v)


def layer_signature(layer: nn.Module) -> Tuple:
    """What makes two layers alike: each submodule's type and plain
    attributes (not its index), each parameter's and buffer's shape, dtype
    and requires_grad."""
    mods = []
    for name, m in layer.named_modules():
        attrs = tuple(sorted((k, repr(v)) for k, v in vars(m).items()
                             if not k.startswith("_") and k not in INDEX_ATTRS
                             and k != "training" and _simple(v)))
        mods.append((name, type(m).__qualname__, attrs, m.training))
    params = tuple((n, tuple(p.shape), str(p.dtype), p.requires_grad)
                   for n, p in layer.named_parameters())
    buffers = tuple((n, tuple(b.shape), str(b.dtype)) for n, b in layer.named_buffers())
    return tuple(mods), params, buffers


def find_stack(model: nn.Module, any_model: bool = False) -> Tuple[Optional[str], int, str]:
    """(path, length, "") of the model's one stack of alike layers long
    enough to fold (MIN_STACK layers or more), else (None, 0, why).
    A layer whose computation depends on its index other than through its
    attributes cannot be seen here; transformers' layers set such things
    (sliding windows, dense or MoE) in __init__ from per-layer config lists,
    which must then be uniform. Other models' stacks only with any_model
    (the caller vouches for them; the check at K + 2 still runs)."""
    found = []
    for path, m in model.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) >= MIN_STACK:
            sig = layer_signature(m[0])
            if all(layer_signature(layer) == sig for layer in list(m)[1:]):
                found.append((path, m))
    if len(found) != 1:
        return None, 0, ("no stack of alike layers" if not found else
                         "several stacks of alike layers: " + ", ".join(p for p, _ in found))
    path, stack = found[0]
    if not any_model and not type(stack[0]).__module__.startswith("transformers."):
        return None, 0, (f"{path} is not a transformers model's (fold_layers=always folds "
                         "it; the check at 5 layers sees only what repeats every 2)")
    for c in _configs(model, len(stack)):
        for k, v in vars(c).items():
            if isinstance(v, list) and len(v) == len(stack) and any(x != v[0] for x in v):
                return None, 0, f"config.{k} differs by layer"
    return path, len(stack), ""


def _configs(model: nn.Module, length: int) -> List[Any]:
    """The configs that count the stack's layers (num_hidden_layers)."""
    found = {id(c): c for c in (getattr(m, "config", None) for m in model.modules())
             if c is not None and getattr(c, "num_hidden_layers", None) == length}
    return list(found.values())


@contextlib.contextmanager
def cut_stack(model: nn.Module, path: str, keep: int) -> Iterator[None]:
    """The model with the stack at `path` cut to its first `keep` layers, and
    every config that counts them (num_hidden_layers, and per-layer lists
    such as layer_types) cut to match; all restored on exit."""
    parent_path, _, attr = path.rpartition(".")
    parent = model.get_submodule(parent_path)
    stack = getattr(parent, attr)
    length = len(stack)
    restore: List[Callable[[], None]] = []
    try:
        setattr(parent, attr, nn.ModuleList(list(stack)[:keep]))
        restore.append(lambda: setattr(parent, attr, stack))
        for c in _configs(model, length):
            for k, v in list(vars(c).items()):
                if k == "num_hidden_layers" or (isinstance(v, list) and len(v) == length):
                    restore.append(lambda c=c, k=k, v=v: setattr(c, k, v))
                    setattr(c, k, keep if k == "num_hidden_layers" else v[:keep])
        yield
    finally:
        for undo in reversed(restore):
            undo()


# --------------------------------------------------------------------------
# Extrapolation
# --------------------------------------------------------------------------
def _split(text: str) -> Tuple[List[str], List[str]]:
    """(the text between integers, the integers' digits)."""
    return _DIGITS.split(text), _DIGITS.findall(text)


def _masked(value: Any) -> str:
    return _DIGITS.sub("#", json.dumps(value))


def _affine(a: str, b: str, c: str, steps: int, where: str) -> str:
    """c's integer moved by (b - a) * steps."""
    if a == b:
        return c
    if any(len(x) > 1 and x[0] == "0" for x in (a, b, c)):
        raise FoldError(f"{where}: {a!r} -> {b!r} is not a plain integer")
    v = int(c) + (int(b) - int(a)) * steps
    if v < 0:
        raise FoldError(f"{where}: {a} -> {b} extrapolates below zero")
    return str(v)


def _join(parts: List[str], ints: List[str]) -> str:
    out = [parts[0]]
    for i, p in zip(ints, parts[1:]):
        out += [i, p]
    return "".join(out)


def _fold_text(a: str, b: str, c: str, steps: int, where: str) -> str:
    pa, ia = _split(a)
    pb, ib = _split(b)
    pc, ic = _split(c)
    if pa != pb:
        raise FoldError(f"{where}: {a!r} and {b!r} differ beyond their integers")
    if pc != pb:
        raise FoldError(f"{where}: {b!r} and {c!r} (other sizes) differ beyond their integers")
    return _join(pc, [_affine(x, y, z, steps, where) for x, y, z in zip(ia, ib, ic)])


def _fold_value(a: Any, b: Any, c: Any, steps: int, where: str) -> Any:
    """The value at K + 1 + steps from its values at K (a) and K + 1 (b)
    layers: c (b at other sizes) moved by the change from a to b."""
    if type(a) is not type(b) or type(c) is not type(b):
        raise FoldError(f"{where}: {type(a).__name__} and {type(b).__name__}")
    if isinstance(a, dict):
        if list(a) != list(b) or list(c) != list(b):
            raise FoldError(f"{where}: keys {list(a)} and {list(b)}")
        return {k: _fold_value(a[k], b[k], c[k], steps, f"{where}/{k}") for k in a}
    if isinstance(a, list):
        if len(c) != len(b):
            raise FoldError(f"{where}: {len(b)} elements, {len(c)} at other sizes")
        if len(a) == len(b):
            return [_fold_value(x, y, z, steps, f"{where}/{i}") for i, (x, y, z) in
                    enumerate(zip(a, b, c))]
        return _fold_list(a, b, c, steps, where)
    if isinstance(a, str):
        return _fold_text(a, b, c, steps, where)
    if isinstance(a, int) and not isinstance(a, bool):
        return int(_affine(str(a), str(b), str(c), steps, where))
    if a != b:
        raise FoldError(f"{where}: {a!r} and {b!r}")
    return c


def _fold_element(a: Any, b: Any, c: Any, steps: int, where: str) -> Any:
    """_fold_value of a list element, on its JSON text: one split per
    value instead of one per field (the same integers, in the same order)."""
    ta, tb = json.dumps(a), json.dumps(b)
    if ta == tb:
        return c
    try:
        return json.loads(_fold_text(ta, tb, json.dumps(c), steps, where))
    except FoldError:
        return _fold_value(a, b, c, steps, where)  # refused there, naming the field


def _run_copies(run_b: List[Any], run_c: List[Any], ref_b: List[Any], ref_now: List[Any],
                count: int, after_ref: bool, where: str) -> List[Any]:
    """`count` copies of an added block (run_b at K + 1, run_c the same at
    the sizes wanted), continuing the progression from its neighbour block:
    ref_b at K + 1, ref_now that neighbour extrapolated. after_ref: the
    neighbour comes before the run."""
    parts = []  # per element: (text template, [(c's digits, c's value, neighbour now, step)])
    for xb, xc, rb, rn in zip(run_b, run_c, ref_b, ref_now):
        _, ixb = _split(json.dumps(xb))
        pc, ixc = _split(json.dumps(xc))
        _, ir = _split(json.dumps(rb))
        _, inow = _split(json.dumps(rn))
        fields = [(vc, int(vc), int(vn), int(vb) - int(vr) if after_ref else int(vr) - int(vb))
                  for vb, vc, vr, vn in zip(ixb, ixc, ir, inow)]
        parts.append((pc, fields))
    out = []
    for n in range(count):
        # Copy n sits (n + 1) blocks after the neighbour before it, or
        # (count - n) blocks before the neighbour after it.
        k = n + 1 if after_ref else -(count - n)
        for pc, fields in parts:
            ints = []
            for text, value, now, step in fields:
                v = now + step * k
                if v < 0:
                    raise FoldError(f"{where}: a block's integer extrapolates below zero")
                ints.append(text if v == value else str(v))
            out.append(json.loads(_join(pc, ints)))
    return out


def _fold_list(a: List[Any], b: List[Any], c: List[Any], steps: int, where: str) -> List[Any]:
    ka, kb = [_masked(x) for x in a], [_masked(x) for x in b]
    if c is not b and [_masked(x) for x in c] != kb:
        raise FoldError(f"{where}: the list differs at other sizes beyond its integers")
    matcher = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    folded: List[Any] = [None] * len(b)
    runs = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                folded[j] = _fold_element(a[i], b[j], c[j], steps, f"{where}/{j}")
        elif tag == "insert":
            runs.append((j1, j2))
        else:
            raise FoldError(f"{where}: elements {i1}..{i2} of the shorter list "
                            f"{'differ' if tag == 'replace' else 'are gone'} at K + 1")
    out: List[Any] = []
    pos = 0
    for j1, j2 in runs:
        out += folded[pos:j1]
        size = j2 - j1
        before, after = (j1 - size, j1), (j2, j2 + size)
        if before[0] >= 0 and kb[before[0]:before[1]] == kb[j1:j2] and \
                all(x is not None for x in folded[before[0]:before[1]]):
            ref, after_ref = before, True
        elif after[1] <= len(b) and kb[after[0]:after[1]] == kb[j1:j2] and \
                all(x is not None for x in folded[after[0]:after[1]]):
            ref, after_ref = after, False
        else:
            raise FoldError(f"{where}: elements {j1}..{j2} at K + 1 repeat no neighbour")
        out += _run_copies(b[j1:j2], c[j1:j2], b[ref[0]:ref[1]], folded[ref[0]:ref[1]],
                           steps + 1, after_ref, f"{where}/{j1}")
        pos = j2
    out += folded[pos:]
    return out


def extrapolate(at_k: Any, at_k1: Any, steps: int, like: Any = None) -> Any:
    """The value (a graph, the export's stats) at K + 1 + steps layers from
    its values at K and K + 1 layers; steps >= 0. like: the value at K + 1
    layers at other sizes (the same structure; its sizes are kept, moved
    by what changes from K to K + 1): the result is then at those sizes.
    Raises FoldError, its text led by the JSON pointer of what does not
    extrapolate ("/ops/7/id")."""
    like = at_k1 if like is None else like
    if steps == 0:
        return like
    try:
        return _fold_value(at_k, at_k1, like, steps, "")
    except FoldError as e:
        text = str(e)
        raise FoldError("/" + text if text.startswith(":") else text) from None


def fold_points(model: nn.Module, trace: Callable[[int], Any], count: int, base: int,
                run: Callable[[Callable[[int], Any], int], List[Any]],
                any_model: bool = False) -> Tuple[List[Any], Dict[str, Any]]:
    """[trace(0), ..., trace(count - 1)], each a trace of the model at one
    size (JSON-like: a graph and its stats), folded where it can be; and
    how: {"stack", "layers", "folded", "why"}. run(fn, n) is [fn(0), ...,
    fn(n - 1)], in whatever processes it likes. The stack is traced at K, K
    + 1 and K + 2 layers at size `base`, which checks the fold, and at K + 1
    at the others, whose integers then move as base's do from K to K + 1.
    Where the fold is refused, every size is traced whole. any_model: as
    find_stack's."""
    path, length, why = find_stack(model, any_model)
    if path is None:
        return run(trace, count), {"folded": False, "why": why}
    how: Dict[str, Any] = {"stack": path, "layers": length}
    k = FOLD_FROM
    tasks = [(base, k), (base, k + 1), (base, k + 2)]
    tasks += [(point, k + 1) for point in range(count) if point != base]

    def traced_cut(i: int) -> Any:
        point, keep = tasks[i]
        with cut_stack(model, path, keep):
            return trace(point)
    traced = dict(zip(tasks, run(traced_cut, len(tasks))))
    at_k, at_k1, at_k2 = (traced[(base, k + i)] for i in range(3))

    def extrapolated(point: int) -> Any:
        if point == base:
            return extrapolate(at_k1, at_k2, length - k - 2)
        return extrapolate(at_k, at_k1, length - k - 1, like=traced[(point, k + 1)])
    try:
        if _text(extrapolate(at_k, at_k1, 1)) != _text(at_k2):
            raise FoldError(f"{k} and {k + 1} layers do not predict {k + 2}")
        return run(extrapolated, count), {**how, "folded": True}
    except FoldError as e:
        return run(trace, count), {**how, "folded": False, "why": str(e)}


def _text(value: Any) -> str:
    return json.dumps(value, default=repr)
