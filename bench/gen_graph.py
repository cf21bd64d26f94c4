#!/usr/bin/python3
"""Generate synthetic forward-only memplan.graph/1 files for benchmarks.

    /usr/bin/python3 bench/gen_graph.py --ops N --shape chain|resnet|transformer -o OUT

Deterministic: the same arguments give the same bytes (no randomness, no dict sorting,
no timestamps). The file has exactly N ops and one tensor / op per line.

Streaming: the graph is described by a Python generator that yields tensors and ops in
program order. It is run twice, once writing the "tensors" array and once writing the
"ops" array, so memory stays flat no matter how large N is (1M ops in a few seconds).

Shapes (symbols batch=8, seq=128, hidden D=64, float32): every activation
[batch, seq, D] is 8*128*64*4 = 256 KiB, linear weights [D, D] are 16 KiB. Bytes do
not matter for speed; they are chosen so reported peaks stay readable.

  chain        x -> (linear -> gelu)* -> mean -> loss
  resnet       x -> (linear -> relu -> linear -> add(residual))* -> mean -> loss
  transformer  x -> (pre-LN attention block + pre-LN MLP block)* -> mean -> loss, the
               block using layer_norm, linear, split (3 aliased outputs), view
               (alias_of), scaled_dot_product_attention, transpose (alias_of),
               reshape (copy), gelu, dropout and add: 17 ops per layer.

If N is not a whole number of blocks, the remaining ops are gelu layers (and one
linear when needed) so the op count is exact. Every op has a scope.
"""
import argparse
import json
import sys

B, S = "batch", "seq"
SYMBOLS = {"batch": 8, "seq": 128}
D = 64
HEADS = 4
HEAD_DIM = D // HEADS
MLP = 4 * D
ACT = [B, S, D]

_dump = json.JSONEncoder(ensure_ascii=True, separators=(", ", ": ")).encode


def T(tid, shape, kind=None, alias_of=None, dtype="float32"):
    t = {"id": tid, "shape": shape, "dtype": dtype}
    if kind is not None:
        t["kind"] = kind
    if alias_of is not None:
        t["alias_of"] = alias_of
    return ("t", t)


def O(oid, otype, inputs, outputs, scope):
    return ("o", {"id": oid, "type": otype, "inputs": inputs, "outputs": outputs,
                  "scope": scope})


def linear(p, x, in_f=D, out_f=D, lead=(B, S), out=None):
    w, b = p + ".weight", p + ".bias"
    y = out or p + ".out"
    yield T(w, [out_f, in_f], kind="parameter")
    yield T(b, [out_f], kind="parameter")
    yield T(y, list(lead) + [out_f])
    yield O(p, "linear", [x, w, b], [y], p)


def unary(p, otype, x, shape=ACT):
    y = p + ".out"
    yield T(y, list(shape))
    yield O(p, otype, [x], [y], p)


def pad(prefix, x, n):
    """n filler ops (gelu, plus one linear first when n is odd); returns last tensor."""
    i = 0
    if n % 2:
        yield from linear("%s.%d" % (prefix, i), x)
        x = "%s.%d.out" % (prefix, i)
        i += 1
    while i < n:
        yield from unary("%s.%d" % (prefix, i), "gelu", x)
        x = "%s.%d.out" % (prefix, i)
        i += 1
    return x


def chain_body(x, n):
    blocks, rest = divmod(n, 2)
    for i in range(blocks):
        p = "layers.%d" % i
        yield from linear(p + ".fc", x)
        yield from unary(p + ".act", "gelu", p + ".fc.out")
        x = p + ".act.out"
    return (yield from pad("pad", x, rest))


def resnet_body(x, n):
    blocks, rest = divmod(n, 4)
    for i in range(blocks):
        p = "blocks.%d" % i
        yield from linear(p + ".fc1", x)
        yield from unary(p + ".relu", "relu", p + ".fc1.out")
        yield from linear(p + ".fc2", p + ".relu.out")
        y = p + ".add.out"
        yield T(y, list(ACT))
        yield O(p + ".add", "add", [x, p + ".fc2.out"], [y], p)
        x = y
    return (yield from pad("pad", x, rest))


def layer_norm(p, x):
    w, b, y = p + ".weight", p + ".bias", p + ".out"
    yield T(w, [D], kind="parameter")
    yield T(b, [D], kind="parameter")
    yield T(y, list(ACT))
    yield O(p, "layer_norm", [x, w, b], [y], p)


TRANSFORMER_BLOCK_OPS = 17


def transformer_layer(p, x):
    a = p + ".attn"
    yield from layer_norm(p + ".ln_1", x)
    qkv = a + ".qkv"
    yield from linear(a + ".c_attn", p + ".ln_1.out", D, 3 * D, out=qkv)
    parts = [a + "." + n for n in ("q", "k", "v")]
    for t in parts:
        yield T(t, list(ACT), alias_of=qkv)  # torch.split returns views
    yield O(a + ".split", "split", [qkv], parts, a)
    heads = []
    for t in parts:
        v = t + ".heads"
        yield T(v, [B, S, HEADS, HEAD_DIM], alias_of=t)
        yield O(t + ".view", "view", [t], [v], a)
        heads.append(v)
    y = a + ".sdpa.out"
    yield T(y, [B, S, HEADS, HEAD_DIM])
    yield O(a + ".sdpa", "scaled_dot_product_attention", heads, [y], a)
    yt = a + ".merge.transposed"
    yield T(yt, [B, HEADS, S, HEAD_DIM], alias_of=y)
    yield O(a + ".merge.transpose", "transpose", [y], [yt], a)
    ym = a + ".merge.out"  # copy: the transposed input is not contiguous
    yield T(ym, list(ACT))
    yield O(a + ".merge", "reshape", [yt], [ym], a)
    yield from linear(a + ".c_proj", ym)
    r1 = p + ".res_1.out"
    yield T(r1, list(ACT))
    yield O(p + ".res_1", "add", [x, a + ".c_proj.out"], [r1], p)
    m = p + ".mlp"
    yield from layer_norm(p + ".ln_2", r1)
    yield from linear(m + ".c_fc", p + ".ln_2.out", D, MLP)
    yield from unary(m + ".act", "gelu", m + ".c_fc.out", [B, S, MLP])
    yield from linear(m + ".c_proj", m + ".act.out", MLP, D)
    yield from unary(m + ".dropout", "dropout", m + ".c_proj.out")
    r2 = p + ".res_2.out"
    yield T(r2, list(ACT))
    yield O(p + ".res_2", "add", [r1, m + ".dropout.out"], [r2], p)
    return r2


def transformer_body(x, n):
    blocks, rest = divmod(n, TRANSFORMER_BLOCK_OPS)
    for i in range(blocks):
        x = yield from transformer_layer("h.%d" % i, x)
    return (yield from pad("pad", x, rest))


BODIES = {"chain": chain_body, "resnet": resnet_body, "transformer": transformer_body}


def graph_items(shape, n_ops):
    """Yields ("t", tensor) / ("o", op) in program order; exactly n_ops ops."""
    if n_ops < 1:
        raise ValueError("--ops must be >= 1")
    yield T("x", list(ACT), kind="input")
    x = yield from BODIES[shape]("x", n_ops - 1)
    yield T("loss", [])
    yield O("loss_fn", "mean", [x], ["loss"], "loss")


def write(f, shape, n_ops):
    w = f.write
    w("{\n")
    w('  "format": "memplan.graph/1",\n')
    w('  "name": %s,\n' % _dump("synthetic_%s_%d" % (shape, n_ops)))
    w('  "source": {"framework": "synthetic", "exporter": "memplan bench/gen_graph.py"},\n')
    w('  "symbols": %s,\n' % _dump(SYMBOLS))
    counts = {}
    for key, kind in (("tensors", "t"), ("ops", "o")):
        w('  "%s": [\n' % key)
        first = True
        n = 0
        for k, item in graph_items(shape, n_ops):
            if k != kind:
                continue
            if not first:
                w(",\n")
            w("    ")
            w(_dump(item))
            first = False
            n += 1
        w("\n  ],\n")
        counts[key] = n
    w('  "outputs": ["loss"]\n')
    w("}\n")
    assert counts["ops"] == n_ops, counts
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, required=True, help="number of ops (exact)")
    ap.add_argument("--shape", choices=sorted(BODIES), default="chain")
    ap.add_argument("-o", "--output", required=True, help="output file ('-' for stdout)")
    ap.add_argument("--stats", action="store_true",
                    help="print {ops, tensors} as JSON on stdout")
    a = ap.parse_args(argv)
    if a.ops < 1:
        ap.error("--ops must be >= 1")
    if a.output == "-":
        counts = write(sys.stdout, a.shape, a.ops)
    else:
        with open(a.output, "w", encoding="ascii", newline="\n", buffering=1 << 20) as f:
            counts = write(f, a.shape, a.ops)
    if a.stats and a.output != "-":
        print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
