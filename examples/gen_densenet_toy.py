#!/usr/bin/env python3
"""Writes examples/densenet_toy.graph.json: the DenseNet-like toy of the Zygote
gradient-accumulation discussion (x_k = x_0 + ... + x_{k-1}), with a learned
map on every edge as in DenseNet (a convolution over the concatenation of
x_0..x_{k-1} is the sum of one convolution per input):

    x_0 = linear(x, w_0)
    x_k = linear(x_0, w_k_0) + linear(x_1, w_k_1) + ... + linear(x_{k-1}, w_k_{k-1})
    loss = mean(x_N)

x_j is read by every later block, so its gradient has N-j contributions, each a
new buffer from a linear backward. How many are alive at once is what the
accumulation mode decides: one running sum (PyTorch), one plus a transient
copy (out of place), or all of them until the final sum (deferred).
Usage: gen_densenet_toy.py [N] [--batch B] [--width H] [-o OUT]
"""
import argparse
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("blocks", nargs="?", type=int, default=8)
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--width", type=int, default=256)
ap.add_argument("-o", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "densenet_toy.graph.json"))
args = ap.parse_args()
N, H = args.blocks, args.width

tensors = [{"id": "x", "shape": ["batch", H], "dtype": "float32", "kind": "input"}]
ops = []


def activation(name):
    tensors.append({"id": name, "shape": ["batch", H], "dtype": "float32"})
    return name


def linear(name, src, scope):
    tensors.append({"id": f"{name}.weight", "shape": [H, H], "dtype": "float32",
                    "kind": "parameter"})
    out = activation(name)
    ops.append({"id": f"{scope}.{name}", "type": "linear", "inputs": [src, f"{name}.weight"],
                "outputs": [out], "scope": scope})
    return out


xs = [linear("x0", "x", "block0")]
for k in range(1, N + 1):
    scope = f"block{k}"
    terms = [linear(f"t{k}_{j}", xs[j], scope) for j in range(k)]
    acc = terms[0]
    for j, term in enumerate(terms[1:], start=1):
        out = activation(f"x{k}" if j == k - 1 else f"x{k}.partial{j}")
        ops.append({"id": f"{scope}.add{j}", "type": "add", "inputs": [acc, term],
                    "outputs": [out], "scope": scope})
        acc = out
    if k == 1:  # a single term: x_1 is that term
        tensors[-1]["id"] = "x1"
        ops[-1]["outputs"] = ["x1"]
        acc = "x1"
    xs.append(acc)
tensors.append({"id": "loss", "shape": [], "dtype": "float32"})
ops.append({"id": "loss_fn", "type": "mean", "inputs": [xs[N]], "outputs": ["loss"],
            "scope": "loss"})

doc = {
    "format": "memplan.graph/1",
    "name": f"densenet_toy_{N}",
    "source": {"framework": "hand-written", "exporter": "examples/gen_densenet_toy.py"},
    "symbols": {"batch": args.batch},
    "tensors": tensors,
    "ops": ops,
    "outputs": ["loss"],
}
with open(args.o, "w") as f:
    f.write("{\n")
    keys = list(doc)
    for i, key in enumerate(keys):
        sep = "," if i + 1 < len(keys) else ""
        if isinstance(doc[key], list) and doc[key] and isinstance(doc[key][0], dict):
            f.write(f' "{key}": [\n')
            f.write(",\n".join("  " + json.dumps(item) for item in doc[key]))
            f.write(f"\n ]{sep}\n")
        else:
            f.write(f' "{key}": {json.dumps(doc[key])}{sep}\n')
    f.write("}\n")
