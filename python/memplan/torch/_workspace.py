"""Per-op scratch (`workspace_bytes`) from rules: a function of the op's
shapes and of the device the eager step runs on, so an export need not run
the step (export --device meta) and the scratch follows `--set batch=N`.

What each rule stands for (fp32, PyTorch 2.14's CPU kernels, one thread; read
off torch.profiler allocations inside each op, see `export
--measure-workspace`, which keeps measuring instead):
  cpu:
    convolution            k x k: oneDNN writes the output in its blocked
                           layout and reorders the weights (output + weight
                           bytes); 3-channel input: the larger of the two;
                           depthwise: input + weights; 1x1: none
    convolution_backward   k x k: the weights reordered or, when the gradient
                           is larger, two gradient-sized buffers (the larger
                           of the two); 3-channel input: weights or one
                           gradient; depthwise: the input and the gradient
                           in blocked layout; 1x1: none
    native_batch_norm_backward, layer norm (both ways), SDPA's CPU flash
    backward: one temporary the size of the first input
    native_dropout(_backward)    one input-sized temporary
    batch norm forward     two per-channel vectors
  cuda (and h100, h200, a100): no per-op rule. cuBLAS's workspace lives as
    long as its handle and cuDNN's depends on the algorithm the heuristics
    pick at run time; both are for the device-level model (analyzer/alloc).

Falls short on: oneDNN's choices that depend on sizes in ways not modelled
(1x1 strided convolution backward measured 17% above its weight bytes on
resnet18), kernels other than the ones above (their scratch is taken as 0).
"""
from typing import Any, Dict

from ._graph import nbytes as _bytes

DEVICES = ("cpu", "cuda", "h100", "h200", "a100")


def _conv_kind(x, w, groups):
    """"pointwise" (1x1, one group), "depthwise", "rgb" (3-channel input) or "dense"."""
    if groups > 1 and groups == x["shape"][1]:
        return "depthwise"
    if x["shape"][1] == 3:
        return "rgb"
    if all(k == 1 for k in w["shape"][2:]) and groups == 1:
        return "pointwise"
    return "dense"


def cpu_rule(op: Dict[str, Any], tensors: Dict[str, Dict[str, Any]], groups: int = 1) -> int:
    """Scratch bytes of `op` on the CPU (0 when no rule applies)."""
    kind = op["type"]
    ins = [tensors[i] for i in op["inputs"]]
    outs = [tensors[o] for o in op["outputs"]]
    if kind == "aten.convolution.default" and len(ins) >= 2 and outs:
        x, w = ins[0], ins[1]
        conv = _conv_kind(x, w, groups)
        return {"pointwise": 0, "depthwise": _bytes(x) + _bytes(w),
                "rgb": max(_bytes(outs[0]), _bytes(w)),
                "dense": _bytes(outs[0]) + _bytes(w)}[conv]
    if kind == "aten.convolution_backward.default" and len(ins) >= 3:
        grad, x, w = ins[0], ins[1], ins[2]
        conv = _conv_kind(x, w, groups)
        return {"pointwise": 0, "depthwise": _bytes(x) + _bytes(grad),
                "rgb": max(_bytes(w), _bytes(grad)),
                "dense": max(_bytes(w), 2 * _bytes(grad))}[conv]
    if kind in ("aten.native_batch_norm_backward.default", "aten.native_layer_norm.default",
                "aten.native_layer_norm_backward.default",
                "aten._scaled_dot_product_flash_attention_for_cpu_backward.default") and ins:
        return _bytes(ins[0])
    if kind in ("aten.native_dropout.default", "aten.native_dropout_backward.default") and ins:
        return _bytes(ins[0])
    if kind == "aten._native_batch_norm_legit_functional.default" and len(ins) >= 2:
        return 2 * _bytes(ins[1])
    return 0


def apply_rules(graph: Dict[str, Any], device: str) -> int:
    """Sets each op's workspace_bytes by the rules for `device`, replacing
    any it had. Returns the number of ops given scratch."""
    if device not in DEVICES:
        raise ValueError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
    tensors = {t["id"]: t for t in graph["tensors"]}
    n = 0
    for op in graph["ops"]:
        op.pop("workspace_bytes", None)
        ws = cpu_rule(op, tensors, op.get("groups", 1)) if device == "cpu" else 0
        if ws >= 64:
            op["workspace_bytes"] = ws
            n += 1
    return n
