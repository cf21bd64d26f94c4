#!/usr/bin/python3
"""Layer folding (python/memplan/torch/_fold.py): a stack of alike layers
traced at 3, 4 and 5 layers and extrapolated must give the graph that
tracing every layer gives, byte for byte, or be refused and traced whole.

- extrapolate() on a synthetic step whose names carry FX-style counters and
  layer indices (past 10: two digits), and its refusals, word for word;
- export_symbolic on transformers' Llama and GPT-2 with 12 layers (two-digit
  indices), folded against every layer traced: the same graph and stats;
- a model whose alike layers compute differently by their index (refused by
  the check at 5 layers) and one whose layers differ (no stack): both traced
  whole, the same graph as without folding;
- `memplan export` with LoRA under gradient checkpointing, and compiled by
  aot_eager: folded, the same graph;
- cut_stack restores the model and its config.

Usage: fold_test.py (with a Python that has torch and transformers)
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from checks import Checks  # noqa: E402
from memplan.torch import _fold as fold  # noqa: E402
from memplan.torch import _hf  # noqa: E402
from memplan.torch._export import export_symbolic  # noqa: E402


def synthetic(layers, size=1):
    """A step shaped like an export at `size`: counters per op name in
    trace order, forward through the layers, backward back."""
    counters, ops = {}, []

    def name(base):
        n = counters.get(base, 0)
        counters[base] = n + 1
        return base if n == 0 else f"{base}_{n}"
    h = "embedding"
    for i in range(layers):
        for base in ("mm", "mul", "add"):
            out = name(base)
            ops.append({"id": "op." + out, "inputs": [h, f"layers.{i}.w"], "outputs": [out],
                        "scope": f"layers.{i}", "flops": 4096 * size})
            h = out
    g = name("mm")
    ops.append({"id": "op." + g, "inputs": [h], "outputs": [g], "scope": "head", "flops": 64})
    for i in reversed(range(layers)):
        for base in ("mul", "mm"):
            out = name(base)
            ops.append({"id": "op." + out, "inputs": [g], "outputs": [out],
                        "scope": f"layers.{i}", "flops": 8192 * size})
            g = out
    params = [{"id": f"layers.{i}.w", "shape": [64 * size, 64]} for i in range(layers)]
    return {"tensors": params, "ops": ops, "outputs": [h],
            "stats": {"ops": len(ops), "params": 4096 * layers}}


def text(value):
    return json.dumps(value)


def error(fn):
    try:
        fn()
    except fold.FoldError as e:
        return str(e)
    return None


class IndexDependent(nn.Module):
    """Alike layers (the signature ignores layer_idx) that are not alike."""

    def __init__(self, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        y = self.lin(x)
        return torch.relu(y) if self.layer_idx % 2 == 1 else torch.tanh(y)


class Stack(nn.Module):
    def __init__(self, layers, widths=None):
        super().__init__()
        widths = widths or [16] * (layers + 1)
        self.layers = nn.ModuleList(
            IndexDependent(i) if widths[i] == widths[i + 1] == 16
            else nn.Linear(widths[i], widths[i + 1]) for i in range(layers))
        self.head = nn.Linear(widths[-1], 4)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def llama(layers):
    return _hf.build(f"llama:hidden_size=64,intermediate_size=128,num_hidden_layers={layers},"
                     "num_attention_heads=4,num_key_value_heads=2,vocab_size=100,"
                     "max_position_embeddings=64,seq=16", device="meta")


def gpt2(layers):
    return _hf.build(f"gpt2:n_embd=64,n_layer={layers},n_head=4,vocab_size=100,"
                     "n_positions=64,seq=16", device="meta")


def both_ways(model, jobs=1, **kw):
    """(folded graph, its stats, every-layer graph, its stats); jobs: the
    folded export's processes (forked), the other's are 1."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g1, s1 = export_symbolic(model, 2, name="m", jobs=jobs, **kw)
    s1["warnings"] = [str(w.message) for w in caught if "one after another" in str(w.message)]
    kw.pop("fold_layers", None)
    g0, s0 = export_symbolic(model, 2, name="m", fold_layers="never", **kw)
    return g1, s1, g0, s0


def _raises(fn):
    try:
        fn()
    except ValueError as e:
        return str(e)
    return None


def main():
    check = Checks()

    # extrapolate(): exact on the synthetic step, one and two digits.
    for steps in (1, 8, 20):
        got = fold.extrapolate(synthetic(3), synthetic(4), steps)
        check(f"synthetic step: 3 and 4 layers extrapolate to {4 + steps} exactly",
              text(got) == text(synthetic(4 + steps)))
    for steps in (1, 13):
        got = fold.extrapolate(synthetic(3), synthetic(4), steps, like=synthetic(4, size=3))
        check(f"like=: 3 and 4 layers at size 1 move size 3's 4 layers to {4 + steps} exactly",
              text(got) == text(synthetic(4 + steps, size=3)))
    check("steps 0 is the second value",
          fold.extrapolate(synthetic(3), synthetic(4), 0) is not None and
          text(fold.extrapolate(synthetic(3), synthetic(4), 0)) == text(synthetic(4)))
    # Refusals, word for word.
    b = synthetic(4)
    b["ops"][0]["scope"] = "other.0"
    check("a list element that differs beyond its integers is refused, with its JSON pointer",
          error(lambda: fold.extrapolate(synthetic(3), b, 2)) ==
          "/ops: elements 0..1 of the shorter list differ at K + 1",
          error(lambda: fold.extrapolate(synthetic(3), b, 2)))
    check("a text that differs beyond its integers is refused",
          error(lambda: fold.extrapolate({"s": ["a1"]}, {"s": ["b2"]}, 1)) ==
          "/s/0: 'a1' and 'b2' differ beyond their integers",
          error(lambda: fold.extrapolate({"s": ["a1"]}, {"s": ["b2"]}, 1)))
    check("keys that differ are refused",
          error(lambda: fold.extrapolate({"a": 1}, {"b": 1}, 1)) == "/: keys ['a'] and ['b']",
          error(lambda: fold.extrapolate({"a": 1}, {"b": 1}, 1)))
    check("an integer that would go below zero is refused",
          error(lambda: fold.extrapolate({"n": 5}, {"n": 2}, 2)) ==
          "/n: 5 -> 2 extrapolates below zero",
          error(lambda: fold.extrapolate({"n": 5}, {"n": 2}, 2)))
    check("a list that loses elements is refused",
          error(lambda: fold.extrapolate([1, 2, 3], [1, 3], 1)) ==
          "/: elements 2..3 of the shorter list are gone at K + 1",
          error(lambda: fold.extrapolate([1, 2, 3], [1, 3], 1)))
    check("an added element that repeats no neighbour is refused",
          error(lambda: fold.extrapolate(["a"], ["a", "b"], 1)) ==
          "/: elements 1..2 at K + 1 repeat no neighbour",
          error(lambda: fold.extrapolate(["a"], ["a", "b"], 1)))

    # Real models: folded == every layer, byte for byte, at two-digit indices.
    # Llama's folded export forks (2 processes: export's CLI default on 2
    # CPUs), before this process runs a backward (after one, it could not).
    for label, build, jobs in (("Llama", llama, 2), ("GPT-2", gpt2, 1)):
        model = build(12)
        g1, s1, g0, s0 = both_ways(model, jobs)
        check(f"{label}: traced in {jobs} process(es), as asked", s1.pop("warnings") == [])
        how = s1.pop("fold_layers")
        check(f"{label}, 12 layers: folded",
              how.get("folded") and how.get("layers") == 12, how)
        check(f"{label}: fold_layers='never' says so",
              s0.pop("fold_layers") == {"folded": False, "why": "fold_layers=never"})
        check(f"{label}, 12 layers: the folded graph is the every-layer graph, byte for byte",
              text(g1) == text(g0))
        check(f"{label}, 12 layers: the same stats", text(s1) == text(s0))

    # The CLI, on steps users train: LoRA adapters under transformers'
    # gradient checkpointing, and a step compiled by aot_eager.
    spec = ("hf:llama:hidden_size=64,intermediate_size=128,num_hidden_layers=12,"
            "num_attention_heads=4,num_key_value_heads=2,vocab_size=100,"
            "max_position_embeddings=64,seq=16")
    for label, extra in (("LoRA, gradient checkpointing",
                          ["--lora", "r=4,alpha=8,targets=q_proj,v_proj",
                           "--hf-gradient-checkpointing"]),
                         ("compiled (aot_eager)", ["--compile", "aot_eager"])):
        files = {}
        with tempfile.TemporaryDirectory() as tmp:
            for mode in ("auto", "never"):
                out = os.path.join(tmp, mode + ".json")
                p = subprocess.run([sys.executable, "-m", "memplan", "export", spec, "--batch",
                                    "2", "-q", "-o", out, "--fold-layers", mode, *extra],
                                   capture_output=True, text=True, timeout=600,
                                   env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")})
                stats = json.loads(p.stdout) if p.returncode == 0 else {}
                files[mode] = (open(out).read() if p.returncode == 0 else p.stderr[-300:],
                               stats.get("fold_layers"))
        check(f"memplan export, {label}: folded",
              (files["auto"][1] or {}).get("folded") is True, files["auto"][1])
        same = files["auto"][0] == files["never"][0]
        check(f"memplan export, {label}: the every-layer graph, byte for byte", same,
              "" if same else files["auto"][0][-300:] + " | " + files["never"][0][-300:])

    # Alike by signature, not by computation.
    torch.manual_seed(0)
    model = Stack(12)
    g1, s1, g0, _ = both_ways(model, input_shape=(16,))
    check("a model outside transformers: not folded by default",
          s1["fold_layers"] == {"folded": False, "why": "layers is not a transformers model's "
                                "(fold_layers=always folds it; the check at 5 layers sees only "
                                "what repeats every 2)"}, s1["fold_layers"])
    check("... and the every-layer graph", text(g1) == text(g0))
    g1, s1, g0, _ = both_ways(model, input_shape=(16,), fold_layers="always")
    how = s1["fold_layers"]
    check("fold_layers='always', layers that compute by their index (every 2nd): "
          "refused, their lists do not align",
          how == {"stack": "layers", "layers": 12, "folded": False,
                  "why": "/0/tensors: elements 54..55 of the shorter list differ at K + 1"},
          how)
    check("... and traced whole: the every-layer graph", text(g1) == text(g0))
    # A layer that differs at index 4 only: 3 and 4 layers agree, 5 does not.
    model = Stack(12)

    def trace():
        """A synthetic trace of the model as cut: one op per layer, named by
        what the layer computes."""
        kinds = ["relu" if layer.layer_idx == 4 else "tanh" for layer in model.layers]
        return {"ops": [{"id": f"op.{k}_{i}", "scope": f"layers.{i}"}
                        for i, k in enumerate(kinds)]}
    def sequential(fn, count):
        return [fn(i) for i in range(count)]
    got, how = fold.fold_points(model, lambda k: trace(), 1, 0, sequential, any_model=True)
    check("a layer that differs first at 5 layers: refused by the check at 5 layers",
          how == {"stack": "layers", "layers": 12, "folded": False,
                  "why": "3 and 4 layers do not predict 5"}, how)
    check("... and traced whole", text(got) == text([trace()]))
    # Layers that differ: no stack.
    model = Stack(12, widths=[16, 16, 32] + [16] * 10)
    g1, s1, g0, _ = both_ways(model, input_shape=(16,), fold_layers="always")
    check("layers that differ: no stack to fold",
          s1["fold_layers"] == {"folded": False, "why": "no stack of alike layers"},
          s1["fold_layers"])
    check("... and the every-layer graph", text(g1) == text(g0))
    # A transformers config whose per-layer list is not uniform.
    model = llama(12)
    model.lm.config.layer_types = ["full_attention"] * 11 + ["sliding_attention"]
    check("a per-layer config list that differs: not folded",
          fold.find_stack(model) == (None, 0, "config.layer_types differs by layer"),
          fold.find_stack(model))
    check("a bad fold_layers is refused",
          _raises(lambda: export_symbolic(model, 2, fold_layers="yes")) ==
          "fold_layers='yes': expected one of auto, always, never")

    # cut_stack restores the stack and the config.
    model = llama(12)
    config = model.lm.config
    stack = model.lm.model.layers
    with fold.cut_stack(model, "lm.model.layers", 3):
        cut = (len(model.lm.model.layers), config.num_hidden_layers)
    check("cut_stack cuts the stack and num_hidden_layers", cut == (3, 3), cut)
    check("... and restores both",
          model.lm.model.layers is stack and config.num_hidden_layers == 12 and
          len(config.layer_types if hasattr(config, "layer_types") and
              config.layer_types else [0] * 12) == 12)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
