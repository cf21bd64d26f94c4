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
or the whole stack is traced. Folding is tried only where the stack is one
nn.ModuleList of a transformers model whose layers are alike (same modules,
attributes other than their index, parameter shapes and dtypes; per-layer
config lists uniform), so a model whose layers differ (sliding-window every
sixth layer, dense-then-MoE) is traced whole; other models' stacks when the
caller asks (fold_layers=True: a layer that computes by its own index, not
its attributes, escapes every check but the one at K + 2).

Cost: three traces of K to K + 2 layers instead of one of L, and linear
work in the graph's size. Falls short where a step's numbers are not affine
in the layer count (none seen so far); the check at K + 2 then refuses it.
"""
import contextlib
import difflib
import json
import re
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch.nn as nn

FOLD_FROM = 3  # K: the smallest stack traced
# Stacks shorter than this are traced whole: a trace costs about one layer's
# time plus three (tiny Llama on 2 cores), so three traces of 3-5 layers
# (12 layers' time at the size the fold is checked, 7 at the other four)
# save time from about 11 layers on.
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


def _affine(a: str, b: str, steps: int, where: str) -> str:
    if a == b:
        return a
    va, vb = int(a), int(b)
    if (len(a) > 1 and a[0] == "0") or (len(b) > 1 and b[0] == "0"):
        raise FoldError(f"{where}: {a!r} -> {b!r} is not a plain integer")
    v = vb + (vb - va) * steps
    if v < 0:
        raise FoldError(f"{where}: {a} -> {b} extrapolates below zero")
    return str(v)


def _join(parts: List[str], ints: List[str]) -> str:
    out = [parts[0]]
    for i, p in zip(ints, parts[1:]):
        out += [i, p]
    return "".join(out)


def _fold_text(a: str, b: str, steps: int, where: str) -> str:
    pa, ia = _split(a)
    pb, ib = _split(b)
    if pa != pb:
        raise FoldError(f"{where}: {a!r} and {b!r} differ beyond their integers")
    return _join(pb, [_affine(x, y, steps, where) for x, y in zip(ia, ib)])


def _fold_value(a: Any, b: Any, steps: int, where: str) -> Any:
    """The value at K + 1 + steps from its values at K (a) and K + 1 (b)."""
    if type(a) is not type(b):
        raise FoldError(f"{where}: {type(a).__name__} and {type(b).__name__}")
    if isinstance(a, dict):
        if list(a) != list(b):
            raise FoldError(f"{where}: keys {list(a)} and {list(b)}")
        return {k: _fold_value(a[k], b[k], steps, f"{where}/{k}") for k in a}
    if isinstance(a, list):
        if len(a) == len(b):
            return [_fold_value(x, y, steps, f"{where}/{i}") for i, (x, y) in
                    enumerate(zip(a, b))]
        return _fold_list(a, b, steps, where)
    if isinstance(a, str):
        return _fold_text(a, b, steps, where)
    if isinstance(a, int) and not isinstance(a, bool):
        return int(_affine(str(a), str(b), steps, where))
    if a != b:
        raise FoldError(f"{where}: {a!r} and {b!r}")
    return a


def _run_copies(run: List[Any], ref_b: List[Any], ref_now: List[Any], count: int,
                after_ref: bool, where: str) -> List[Any]:
    """`count` copies of an added block (`run`, as at K + 1), continuing
    the progression from its neighbour block: ref_b at K + 1, ref_now that
    neighbour extrapolated. after_ref: the neighbour comes before the run."""
    out = []
    for c in range(count):
        # Copy c sits (c + 1) blocks after the neighbour before it, or
        # (count - c) blocks before the neighbour after it.
        k = c + 1 if after_ref else -(count - c)
        for x, rb, rn in zip(run, ref_b, ref_now):
            tx, tr, tn = json.dumps(x), json.dumps(rb), json.dumps(rn)
            px, ix = _split(tx)
            _, ir = _split(tr)
            _, inow = _split(tn)
            ints = []
            for vx, vr, vn in zip(ix, ir, inow):
                step = int(vx) - int(vr) if after_ref else int(vr) - int(vx)
                v = int(vn) + step * k
                if v < 0:
                    raise FoldError(f"{where}: a block's integer extrapolates below zero")
                ints.append(vx if step == 0 and vn == vx else str(v))
            out.append(json.loads(_join(px, ints)))
    return out


def _fold_list(a: List[Any], b: List[Any], steps: int, where: str) -> List[Any]:
    ka, kb = [_masked(x) for x in a], [_masked(x) for x in b]
    matcher = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    folded: List[Any] = [None] * len(b)
    runs = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                folded[j] = _fold_value(a[i], b[j], steps, f"{where}/{j}")
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
        out += _run_copies(b[j1:j2], b[ref[0]:ref[1]], folded[ref[0]:ref[1]], steps + 1,
                           after_ref, f"{where}/{j1}")
        pos = j2
    out += folded[pos:]
    return out


def extrapolate(at_k: Any, at_k1: Any, steps: int) -> Any:
    """The value (a graph, the export's stats) at K + 1 + steps layers from
    its values at K and K + 1 layers; steps >= 0. Raises FoldError, its
    text led by the JSON pointer of what does not extrapolate ("/ops/7/id")."""
    if steps == 0:
        return at_k1
    try:
        return _fold_value(at_k, at_k1, steps, "")
    except FoldError as e:
        text = str(e)
        raise FoldError("/" + text if text.startswith(":") else text) from None


def fold_trace(model: nn.Module, trace: Callable[[], Any], check: bool = True,
               any_model: bool = False) -> Tuple[Any, Dict[str, Any]]:
    """trace() of `model`, folded where it can be: (the result, how:
    {"stack", "layers", "folded", "checked", "why"}). trace() returns
    JSON-like data (a graph and its stats) of the model as it is when
    called. check=False skips the trace at K + 2 (the caller checked the
    same model at other sizes); a result that does not extrapolate is then
    still traced whole. any_model: as find_stack's."""
    path, length, why = find_stack(model, any_model)
    if path is None:
        return trace(), {"folded": False, "why": why}
    how: Dict[str, Any] = {"stack": path, "layers": length}
    k = FOLD_FROM
    traced = []
    for keep in (k, k + 1, k + 2) if check else (k, k + 1):
        with cut_stack(model, path, keep):
            traced.append(trace())
    try:
        if check:
            predicted = extrapolate(traced[0], traced[1], 1)
            if _text(predicted) != _text(traced[2]):
                raise FoldError(f"{k} and {k + 1} layers do not predict {k + 2}")
        result = extrapolate(traced[-2], traced[-1], length - len(traced) - k + 1)
    except FoldError as e:
        return trace(), {**how, "folded": False, "why": str(e)}
    return result, {**how, "folded": True, "checked": check}


def _text(value: Any) -> str:
    return json.dumps(value, default=repr)
