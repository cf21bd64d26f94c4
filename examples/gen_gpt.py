#!/usr/bin/python3
"""Generate examples/gpt_tiny.graph.json: a small GPT-2-style decoder (forward only).

    /usr/bin/python3 examples/gen_gpt.py [OUT]     (default: gpt_tiny.graph.json next to this file)

Deterministic: the same bytes on every run (no dicts sorted, no randomness, insertion
order everywhere). Model: vocab 4096, d_model 256, 4 heads of 64, 2 layers, MLP 4x,
fp32, symbols batch=8 and seq=256. Tensor and op names follow GPT-2 (Hugging Face)
module paths: "wte", "wpe", "h.0.ln_1", "h.0.attn.c_attn", "h.0.mlp.c_fc", "ln_f", ...

Views: view and transpose outputs are aliases of their input ("alias_of"), as in
PyTorch. The reshape after the attention's transpose back gets no alias_of: reshaping
a non-contiguous tensor copies. torch.split returns views of its input, so the q/k/v
split outputs alias the fused qkv tensor (set SPLIT_OUTPUTS_ALIAS = False to model
them as fresh allocations instead).
"""
import json
import os
import sys

NAME = "gpt_tiny"
VOCAB = 4096
D = 256
HEADS = 4
HEAD_DIM = D // HEADS
LAYERS = 2
MLP = 4 * D
DTYPE = "float32"
SYMBOLS = {"batch": 8, "seq": 256}
SPLIT_OUTPUTS_ALIAS = True

B, S = "batch", "seq"


class Graph:
    def __init__(self):
        self.tensors = []
        self.ops = []
        self._tensor_ids = set()
        self._op_ids = set()

    def tensor(self, tid, shape, dtype=DTYPE, kind=None, alias_of=None):
        assert tid not in self._tensor_ids and tid not in self._op_ids, tid
        self._tensor_ids.add(tid)
        t = {"id": tid, "shape": list(shape), "dtype": dtype}
        if kind is not None:
            t["kind"] = kind
        if alias_of is not None:
            t["alias_of"] = alias_of
        self.tensors.append(t)
        return tid

    def param(self, tid, shape):
        return self.tensor(tid, shape, kind="parameter")

    def op(self, oid, otype, inputs, outputs, scope):
        assert oid not in self._op_ids and oid not in self._tensor_ids, oid
        self._op_ids.add(oid)
        self.ops.append({"id": oid, "type": otype, "inputs": list(inputs),
                         "outputs": list(outputs), "scope": scope})


def linear(g, scope, x, in_f, out_f, lead_shape, bias=True, out=None, weight=None):
    """nn.Linear: weight [out, in], bias [out]; ATen linear(input, weight, bias)."""
    w = g.param(weight or scope + ".weight", [out_f, in_f])
    inputs = [x, w]
    if bias:
        inputs.append(g.param(scope + ".bias", [out_f]))
    y = g.tensor(out or scope + ".out", list(lead_shape) + [out_f])
    g.op(scope, "linear", inputs, [y], scope)
    return y


def layer_norm(g, scope, x):
    w = g.param(scope + ".weight", [D])
    b = g.param(scope + ".bias", [D])
    y = g.tensor(scope + ".out", [B, S, D])
    g.op(scope, "layer_norm", [x, w, b], [y], scope)
    return y


def attention(g, p, x):
    """GPT-2 causal self-attention with a fused qkv projection and SDPA."""
    sc = p + ".attn"
    qkv = linear(g, sc + ".c_attn", x, D, 3 * D, [B, S], out=sc + ".qkv")
    parts = []
    for n in ("q", "k", "v"):
        parts.append(g.tensor("%s.%s" % (sc, n), [B, S, D],
                              alias_of=qkv if SPLIT_OUTPUTS_ALIAS else None))
    g.op(sc + ".split", "split", [qkv], parts, sc)
    heads = []
    for n, t in zip(("q", "k", "v"), parts):
        v = g.tensor("%s.%s.view" % (sc, n), [B, S, HEADS, HEAD_DIM], alias_of=t)
        g.op("%s.%s.view_op" % (sc, n), "view", [t], [v], sc)
        tr = g.tensor("%s.%s.heads" % (sc, n), [B, HEADS, S, HEAD_DIM], alias_of=v)
        g.op("%s.%s.transpose" % (sc, n), "transpose", [v], [tr], sc)
        heads.append(tr)
    y = g.tensor(sc + ".sdpa.out", [B, HEADS, S, HEAD_DIM])
    g.op(sc + ".sdpa", "scaled_dot_product_attention", heads, [y], sc)
    yt = g.tensor(sc + ".merge.transposed", [B, S, HEADS, HEAD_DIM], alias_of=y)
    g.op(sc + ".merge.transpose", "transpose", [y], [yt], sc)
    ym = g.tensor(sc + ".merge.out", [B, S, D])  # copy: input is not contiguous
    g.op(sc + ".merge", "reshape", [yt], [ym], sc)
    return linear(g, sc + ".c_proj", ym, D, D, [B, S])


def mlp(g, p, x):
    sc = p + ".mlp"
    h = linear(g, sc + ".c_fc", x, D, MLP, [B, S])
    a = g.tensor(sc + ".act.out", [B, S, MLP])
    g.op(sc + ".act", "gelu", [h], [a], sc + ".act")
    o = linear(g, sc + ".c_proj", a, MLP, D, [B, S])
    d = g.tensor(sc + ".dropout.out", [B, S, D])
    g.op(sc + ".dropout", "dropout", [o], [d], sc + ".dropout")
    return d


def block(g, i, x):
    p = "h.%d" % i
    a = attention(g, p, layer_norm(g, p + ".ln_1", x))
    r1 = g.tensor(p + ".res_1.out", [B, S, D])
    g.op(p + ".res_1", "add", [x, a], [r1], p)
    m = mlp(g, p, layer_norm(g, p + ".ln_2", r1))
    r2 = g.tensor(p + ".res_2.out", [B, S, D])
    g.op(p + ".res_2", "add", [r1, m], [r2], p)
    return r2


def build():
    g = Graph()
    idx = g.tensor("idx", [B, S], dtype="int64", kind="input")
    targets = g.tensor("targets", [B, S], dtype="int64", kind="input")
    wte = g.param("wte.weight", [VOCAB, D])
    wpe = g.param("wpe.weight", [S, D])
    tok = g.tensor("wte.out", [B, S, D])
    g.op("wte", "embedding", [wte, idx], [tok], "wte")        # ATen: embedding(weight, indices)
    x = g.tensor("wpe.out", [B, S, D])
    g.op("wpe", "add", [tok, wpe], [x], "wpe")                # [B,S,D] + [S,D] broadcast
    for i in range(LAYERS):
        x = block(g, i, x)
    x = layer_norm(g, "ln_f", x)
    logits = linear(g, "lm_head", x, D, VOCAB, [B, S], bias=False, out="logits")
    loss = g.tensor("loss", [], kind=None)
    g.op("loss_fn", "cross_entropy", [logits, targets], [loss], "loss")
    return {
        "format": "memplan.graph/1",
        "name": NAME,
        "source": {"framework": "pytorch-style", "exporter": "memplan examples/gen_gpt.py"},
        "symbols": dict(SYMBOLS),
        "tensors": g.tensors,
        "ops": g.ops,
        "outputs": [loss],
    }


def dumps(graph):
    """JSON with one tensor / op per line (stable, diff-friendly)."""
    def one(v):
        return json.dumps(v, ensure_ascii=True, separators=(", ", ": "))
    lines = ["{"]
    keys = list(graph)
    for n, k in enumerate(keys):
        comma = "," if n + 1 < len(keys) else ""
        v = graph[k]
        if k in ("tensors", "ops"):
            lines.append("  %s: [" % one(k))
            for m, item in enumerate(v):
                lines.append("    %s%s" % (one(item), "," if m + 1 < len(v) else ""))
            lines.append("  ]%s" % comma)
        else:
            lines.append("  %s: %s%s" % (one(k), one(v), comma))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "gpt_tiny.graph.json")
    text = dumps(build())
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
