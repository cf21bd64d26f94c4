#!/usr/bin/env python3
"""The CPU scratch rules for this machine's kernels (AVX-512 or AVX2) against
torch.profiler's measurement, and the rules for either CPU chosen at export.

On AVX-512, the rules that depend on strides (python/memplan/torch/
_workspace.py, read off torch 2.14 / oneDNN v3.12 and torch 2.15 / oneDNN
v3.13 on AVX-512, one thread) against torch.profiler's measurement of the
same ops, byte for byte, at shapes the rules were not read off:

  - a ConvNeXt-like net (a 3-channel 4x4 stride-4 stem, LayerNorm2d's
    permutes, so everything after the stem runs channels-last; blocks of a
    depthwise 7x7 over 40 channels and 5x5 over 64, permute, layer norm, two
    linears, permute back; a 2x2 stride-2 downsample), eager and as
    torch.compile's aot_eager backend runs it: oneDNN's nhwc kernels, whose
    depthwise backward weights fill 16x16 blocks per group (ConvNeXt's miss);
  - a ViT-like patch embedding (a 16x16 stride-16 convolution whose gradient
    arrives channels-last through a permute, backward weights in gemm; layer
    norms over permuted and transposed views, both ways).

Each convolution, convolution_backward and layer norm op's rule must equal
its measured scratch; without the rules (the exporter's `layout`, the
channels-last paths, the copies of inputs not dense in the layout a kernel
runs in) they miss by up to tens of megabytes.

    workspace_layout_test.py   (run with .venv/bin/python or .venv-newest/bin/python)
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from checks import Checks  # noqa: E402
from memplan.torch import _workspace as ws  # noqa: E402
from memplan.torch._export import export  # noqa: E402

RULED = ("aten.convolution.default", "aten.convolution_backward.default",
         "aten.native_layer_norm.default", "aten.native_layer_norm_backward.default")


class LayerNorm2d(nn.LayerNorm):
    """torchvision's ConvNeXt LayerNorm2d: permute, layer norm, permute back
    (the result is a channels-last view)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Block(nn.Module):
    """ConvNeXt's block: depthwise kxk, permute, layer norm, MLP, permute back, residual."""

    def __init__(self, c: int, k: int):
        super().__init__()
        self.dw = nn.Conv2d(c, c, k, padding=k // 2, groups=c)
        self.ln = nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dw(x).permute(0, 2, 3, 1)
        h = self.fc2(nn.functional.gelu(self.fc1(self.ln(h))))
        return x + h.permute(0, 3, 1, 2)


class TinyConvNeXt(nn.Module):
    """Stem 3 -> 40 (4x4, stride 4), LayerNorm2d, a 7x7 block over 40
    channels (not a multiple of 16: padded blocks), LayerNorm2d, a 2x2
    stride-2 downsample to 64, a 5x5 block, mean, linear."""

    def __init__(self):
        super().__init__()
        self.stem, self.ln0 = nn.Conv2d(3, 40, 4, stride=4), LayerNorm2d(40)
        self.b1 = Block(40, 7)
        self.ln1, self.down = LayerNorm2d(40), nn.Conv2d(40, 64, 2, stride=2)
        self.b2 = Block(64, 5)
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.b1(self.ln0(self.stem(x)))
        h = self.b2(self.down(self.ln1(h)))
        return self.fc(h.mean((2, 3)))


class TinyPatch(nn.Module):
    """ViT's patch embedding (3 -> 48, 16x16 stride 16), flattened and
    permuted to tokens, a layer norm on that permuted view, a linear, a
    transpose and a second layer norm (its gradient comes back transposed)."""

    def __init__(self, d: int = 48):
        super().__init__()
        self.proj = nn.Conv2d(3, d, 16, stride=16)
        self.ln, self.fc, self.ln2 = nn.LayerNorm(d), nn.Linear(d, d), nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        h = h.reshape(h.shape[0], h.shape[1], -1).permute(0, 2, 1)
        h = self.ln2(self.fc(self.ln(h)).transpose(0, 1))
        return self.head(h.mean(0))


def compare(check, label, model, x, compile_backend=None):
    """Exports the step twice, measured and by the rules, and checks every
    op of RULED types op by op. Returns the measured graph."""
    torch.manual_seed(0)
    measured = export(model, (x,), workspace="measure", compile=compile_backend)
    ruled = export(model, (x,), workspace="rules", compile=compile_backend)
    rules = {o["id"]: o for o in ruled["ops"]}
    rows = [(o["id"], o["type"].split(".")[1], o.get("groups", 1),
             rules[o["id"]].get("workspace_bytes", 0), o.get("workspace_bytes", 0))
            for o in measured["ops"] if o["type"] in RULED]
    bad = [r for r in rows if r[3] != r[4]]
    check(f"{label}: each of its {len(rows)} convolution and layer-norm ops' rule equals "
          "its measured scratch", rows and not bad, bad)
    total = (sum(r[3] for r in rows), sum(r[4] for r in rows))
    check(f"{label}: their scratch totals, rules {total[0]} = measured {total[1]}",
          total[0] == total[1] > 0, total)
    return measured, rows


def convnext_checks(check, batch: int, side: int):
    model = TinyConvNeXt()
    x = torch.randn(batch, 3, side, side)
    for backend in (None, "aot_eager"):
        label = f"convnext-like b{batch} {side}x{side} {backend or 'eager'}"
        g, rows = compare(check, label, model, x, backend)
        tensors = {t["id"]: t for t in g["tensors"]}
        dw_bw = [o for o in g["ops"] if o["type"] == "aten.convolution_backward.default"
                 and o.get("groups", 1) == 40]
        cl = dw_bw and all(tensors[i].get("layout") == "channels_last" for i in dw_bw[0]["inputs"][1:2])
        check(f"{label}: the 7x7 depthwise backward reads a channels-last input", cl,
              [(i, tensors[i].get("layout")) for o in dw_bw for i in o["inputs"]])
        # Its backward weights fill 16x16 blocks per group: 40 * 256 * 49
        # floats, 256 times the weights, the op's largest buffer.
        big = 40 * 256 * 49 * 4
        got = [r for r in rows if r[0] == (dw_bw[0]["id"] if dw_bw else None)]
        check(f"{label}: the depthwise 7x7 backward's scratch holds its 16x16-blocked "
              f"grad_weight ({big} bytes)", got and got[0][4] >= big and got[0][3] == got[0][4],
              got)


def patch_checks(check, batch: int):
    label = f"vit-like patch b{batch}"
    g, rows = compare(check, label, TinyPatch(), torch.randn(batch, 3, 64, 48))
    tensors = {t["id"]: t for t in g["tensors"]}
    conv_bw = [o for o in g["ops"] if o["type"] == "aten.convolution_backward.default"]
    gy = tensors[conv_bw[0]["inputs"][0]] if conv_bw else {}
    check(f"{label}: the patch convolution's gradient arrives channels-last",
          gy.get("layout") == "channels_last", gy)
    norms = [o for o in g["ops"] if o["type"] == "aten.native_layer_norm.default"]
    strided = [o["id"] for o in norms if tensors[o["inputs"][0]].get("layout") == "strided"]
    check(f"{label}: both layer norms read a permuted or transposed view", len(strided) == 2,
          [(o["id"], tensors[o["inputs"][0]].get("layout")) for o in norms])


class PlainNet(nn.Module):
    """Plain-layout convolutions that take AVX2's other kernels: a first
    convolution, 3x3 stride-2 ones over 24 and 64 channels (brgconv_strided
    backward data, weights in blocks of 24 and 32), a 1x1 stride 2 over 40
    channels with a 44-channel bias (reduce-to-unit-stride buffers, a bias
    padded to 8), and at 2x2 pixels a depthwise 3x3 and a 3x3 whose kernel
    is taller than the input (backward weights in gemm)."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([
            nn.Conv2d(3, 24, 3, padding=1, bias=False),
            nn.Conv2d(24, 40, 3, stride=2, padding=1),
            nn.Conv2d(40, 44, 1, stride=2),
            nn.Conv2d(44, 64, 3, stride=2, padding=1, bias=False),
            nn.Conv2d(64, 96, 3, stride=2, padding=1, bias=False),
            nn.Conv2d(96, 96, 3, padding=1, groups=96, bias=False),
            nn.Conv2d(96, 96, 3, padding=1)])
        self.fc = nn.Linear(96, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.fc(x.mean((2, 3)))


def plain_checks(check, batch: int, side: int):
    label = f"plain-layout net b{batch} {side}x{side}"
    _, rows = compare(check, label, PlainNet(), torch.randn(batch, 3, side, side))
    gemm = [r for r in rows if r[1] == "convolution_backward" and r[4] >= 4 * 96 * 9 * 4 * 96]
    check(f"{label}: the 96-channel 3x3 at 2x2 pixels takes gemm's backward-weights "
          "scratchpad (4 x its weights and more)", len(gemm) == 1, rows)


def isa_checks(check):
    """The rules for either CPU, chosen at export (cpu_isa), named in the
    graph: a 72-channel depthwise convolution's blocks pad to 80 channels on
    AVX-512, none on AVX2; a 64-channel one is the same on both."""
    model = nn.Sequential(nn.Conv2d(3, 72, 3, padding=1), nn.Conv2d(72, 72, 3, padding=1,
                                                                     groups=72),
                          nn.Flatten(), nn.Linear(72 * 8 * 8, 10))
    x = torch.randn(2, 3, 8, 8)
    dw = {}
    for isa in ("avx512", "avx2"):
        g = export(model, (x,), cpu_isa=isa)
        check(f"cpu_isa={isa}: source.workspace.isa names it",
              g["source"]["workspace"].get("isa") == isa, g["source"]["workspace"])
        dw[isa] = next(o["workspace_bytes"] for o in g["ops"]
                       if o["type"] == "aten.convolution.default" and o.get("groups") == 72)
    # ideep's blocked copies of the input and output (2 images of 8x8 pixels
    # each) and of the weights, less the plain output the op returns.
    out = 2 * 72 * 64 * 4
    expected = {isa: 2 * (2 * c * 64 * 4) + c * 9 * 4 - out
                for isa, c in (("avx512", 80), ("avx2", 72))}
    check(f"depthwise 72 channels: {dw} bytes, expected {expected}", dw == expected)
    try:
        export(model, (x,), cpu_isa="sse4")
        check("cpu_isa='sse4' is refused", False)
    except ValueError as e:
        check("cpu_isa='sse4' is refused naming the choices",
              str(e) == "cpu isa 'sse4': expected one of avx512, avx2", str(e))


def main() -> int:
    check = Checks()
    isa = ws.cpu_isa()
    isa_checks(check)
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        print(f"torch {torch.__version__}, rules of {ws.__name__} for this CPU's "
              f"{isa} kernels", flush=True)
        if isa == "avx512":
            for batch, side in ((3, 40), (5, 48)):
                convnext_checks(check, batch, side)
            for batch in (3, 4):
                patch_checks(check, batch)
        else:
            # AVX2's channels-last kernels are not modelled (the AVX-512 rules
            # stand in for them: docs/training-steps.md, "CPU scratch rules").
            for batch, side in ((3, 16), (5, 20)):
                plain_checks(check, batch, side)
    finally:
        torch.set_num_threads(prev)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
