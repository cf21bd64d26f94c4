#!/usr/bin/env python3
"""The exporter's per-op scratch for GPU targets (python/memplan/torch/_workspace.py)
on a small conv net and a matmul model traced on the meta device (no GPU, no
step run), every expected figure computed here from the rule's source:

  - cuBLAS / cuBLASLt (aten/src/ATen/cuda/CublasHandlePool.cpp, PyTorch 2.14):
    one workspace per handle and stream, allocated once through the caching
    allocator and kept (setWorkspaceForHandle -> getNewWorkspace), of
    getChosenWorkspaceSize() bytes: CUBLAS_WORKSPACE_CONFIG, default ":4096:8"
    on sm90 and ":4096:2:16:8" before; cuBLASLt reuses it (torch 2.14.1,
    torch/backends/cuda/__init__.py, blas_workspace_size: "physically reuses
    the same allocation"). So 0 bytes per matmul ("rule:cublas-persistent")
    and one block of the parsed size held by the device model (memplan
    analyze --device h100|a100: device_memory.cublas_workspace_bytes).
  - depthwise convolution, not float16 (aten/src/ATen/native/Convolution.cpp,
    ConvParams::use_cudnn_depthwise; aten/src/ATen/native/cuda/DepthwiseConv2d.cu):
    PyTorch's own kernels, no scratch ("rule:cuda-depthwise").
  - every other convolution: cuDNN's heuristic engine's workspace
    (aten/src/ATen/native/cudnn/Conv_v8.cpp, run_conv_plan), not derivable
    from shapes: 0 bytes, named "none:cudnn-conv"; an override replaces it.

    workspace_test.py [--memplan build/cli/memplan]   (run with .venv/bin/python)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from checks import Checks  # noqa: E402
from memplan.torch import _workspace as ws  # noqa: E402
from memplan.torch._export import export  # noqa: E402
from memplan.torch._graph import dumps  # noqa: E402

KiB = 1024


def cublas_workspace_config_bytes(config):
    """parseChosenWorkspaceSize (CublasHandlePool.cpp): each ":SIZE:COUNT" is
    SIZE KiB x COUNT, summed."""
    return sum(int(size) * KiB * int(count)
               for size, count in re.findall(r":([0-9]+):([0-9]+)", config))


# The defaults in parseChosenWorkspaceSize: "/* :4096:2:16:8 default, 32MiB for Hopper */".
CUBLAS_DEFAULT = {"h100": cublas_workspace_config_bytes(":4096:8"),
                  "h200": cublas_workspace_config_bytes(":4096:8"),
                  "a100": cublas_workspace_config_bytes(":4096:2:16:8")}


class ConvNet(nn.Module):
    """A 3-channel 3x3 convolution, a depthwise 3x3, a 1x1, then a linear layer."""

    def __init__(self, channels=16):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.pw = nn.Conv2d(channels, 8, 1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.pw(torch.relu(self.dw(self.stem(x))))), 1))


class MatmulNet(nn.Module):
    """Linear with a bias (addmm: cuBLASLt's gemm_and_bias), without (mm), and bmm."""

    def __init__(self, d=32):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d, bias=False)

    def forward(self, x):
        h = self.a(x)
        return self.b(torch.bmm(h, h.transpose(1, 2)) @ h)


def exported(model_cls, shape, device="cuda", dtype=torch.float32, **kw):
    with torch.device("meta"):
        model = model_cls().to(dtype)
        x = torch.randn(*shape, dtype=dtype)
    return export(model, (x,), target_device=device, **kw)


def by_source(graph):
    out = {}
    for o in graph["ops"]:
        if "workspace_source" in o:
            out.setdefault(o["workspace_source"], []).append(o)
    return out


def conv_checks(check):
    g = exported(ConvNet, (4, 3, 8, 8))
    src = by_source(g)
    convs = [o for o in g["ops"] if o["type"] in ws.CONV_OPS]
    dw = [o for o in convs if o.get("groups") == 16]
    check("cuda conv net: every convolution op names its scratch source",
          all("workspace_source" in o for o in convs), [o["id"] for o in convs])
    check("cuda: the depthwise convolution, forward and backward, is rule:cuda-depthwise",
          len(dw) == 2 and all(o["workspace_source"] == "rule:cuda-depthwise" for o in dw),
          [(o["id"], o.get("workspace_source")) for o in dw])
    other = [o for o in convs if o not in dw]
    check("cuda: the 3-channel and 1x1 convolutions, both ways, are none:cudnn-conv",
          len(other) == 4 and all(o["workspace_source"] == "none:cudnn-conv" for o in other),
          [(o["id"], o.get("workspace_source")) for o in other])
    check("cuda: no GPU rule adds per-op bytes (cuBLAS's workspace is persistent, the "
          "depthwise kernels allocate none, cuDNN's is not modelled)",
          not any("workspace_bytes" in o for o in g["ops"]),
          [o["id"] for o in g["ops"] if "workspace_bytes" in o])
    mms = [o for o in g["ops"] if o["type"] in ws.CUBLAS_OPS]
    check("cuda conv net: the linear layer's matmuls are rule:cublas-persistent",
          len(mms) == 3 and all(o["workspace_source"] == "rule:cublas-persistent" for o in mms),
          [(o["id"], o["type"], o.get("workspace_source")) for o in mms])
    summary = g["source"].get("workspace")
    check("source.workspace counts each source",
          summary == {"method": "rules", "device": "cuda",
                      "ops": {k: len(v) for k, v in sorted(src.items())}}, summary)

    # float16: use_cudnn_depthwise sends a float16 depthwise convolution to cuDNN.
    h = exported(ConvNet, (4, 3, 8, 8), dtype=torch.float16)
    dwh = [o for o in h["ops"] if o["type"] in ws.CONV_OPS and o.get("groups") == 16]
    check("cuda float16: the depthwise convolution is none:cudnn-conv",
          len(dwh) == 2 and all(o["workspace_source"] == "none:cudnn-conv" for o in dwh),
          [(o["id"], o.get("workspace_source")) for o in dwh])

    # 64-bit indexing: a depthwise input of 2^31 elements goes to cuDNN too.
    x = {"id": "x", "shape": [1, 32, 8192, 8192], "dtype": "float32"}
    w = {"id": "w", "shape": [32, 1, 3, 3], "dtype": "float32"}
    y = {"id": "y", "shape": [1, 32, 8192, 8192], "dtype": "float32"}
    t = {k["id"]: k for k in (x, w, y)}
    op = {"id": "c", "type": "aten.convolution.default", "inputs": ["x", "w"], "outputs": ["y"]}
    check("cuda: a depthwise convolution of 2^31 elements is none:cudnn-conv",
          ws.gpu_rule(op, t, 32) == (0, "none:cudnn-conv"), ws.gpu_rule(op, t, 32))
    x["shape"] = [1, 32, 4096, 4096]
    y["shape"] = [1, 32, 4096, 4096]
    check("cuda: the same at 2^29 elements is rule:cuda-depthwise",
          ws.gpu_rule(op, t, 32) == (0, "rule:cuda-depthwise"), ws.gpu_rule(op, t, 32))

    # The CPU rules on the same net: oneDNN's scratch, named.
    c = exported(ConvNet, (4, 3, 8, 8), device="cpu")
    ops = {o["id"]: o for o in c["ops"]}
    tensors = {t["id"]: t for t in c["tensors"]}

    def nb(tid):
        n = {"float32": 4}[tensors[tid]["dtype"]]
        for d in tensors[tid]["shape"]:
            n *= d
        return n

    stem = ops["op.convolution"]
    # 3-channel input: the larger of the output and the weights.
    want = max(nb(stem["outputs"][0]), nb(stem["inputs"][1]))
    check("cpu: the 3-channel convolution's scratch by rule:onednn-convolution",
          stem.get("workspace_bytes") == want
          and stem.get("workspace_source") == "rule:onednn-convolution",
          (stem.get("workspace_bytes"), want, stem.get("workspace_source")))
    check("cpu: no op names a GPU source",
          not any(str(o.get("workspace_source", "")).startswith(("none:", "rule:cu"))
                  for o in c["ops"]))
    return g


class GroupedNet(nn.Module):
    """Each oneDNN path the CPU convolution rules model, at small shapes: a
    3-channel stem into 24 channels (padded to 32), depthwise 3x3 over 24
    channels (jit_dw, padded) and 5x5 stride 2 over 40 (backward weights in
    gemm), grouped 3x3 with 16, 8 and 4 channels per group (blocks of 16, 8, 4;
    backward weights by the AVX-512, AVX2 and gemm kernels) and with 2 (gemm
    both ways, plain layouts), a 1x1 with
    stride 2 (reduce-to-unit-stride scratchpad), 1x1s in slow_conv2d (batch
    < 16, one thread), one on a channel split (its contiguous copy)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 24, 3, stride=2, padding=1, bias=False)
        self.dw3 = nn.Conv2d(24, 24, 3, padding=1, groups=24, bias=False)
        self.pw1 = nn.Conv2d(24, 40, 1, bias=False)
        self.dw5 = nn.Conv2d(40, 40, 5, stride=2, padding=2, groups=40, bias=False)
        self.pw2 = nn.Conv2d(40, 32, 1, bias=False)
        self.g16 = nn.Conv2d(32, 32, 3, padding=1, groups=2, bias=False)
        self.g8 = nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=False)
        self.g2 = nn.Conv2d(32, 32, 3, padding=1, groups=16, bias=False)
        self.g4 = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=8, bias=False)
        self.proj = nn.Conv2d(32, 32, 1, stride=2, bias=False)
        self.side = nn.Conv2d(32, 32, 1, bias=False)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        h = torch.relu(self.pw1(torch.relu(self.dw3(torch.relu(self.stem(x))))))
        h = torch.relu(self.pw2(torch.relu(self.dw5(h))))
        h = torch.relu(self.g2(torch.relu(self.g8(torch.relu(self.g16(h))))))
        h = torch.cat([torch.relu(self.g4(h)), self.proj(h)], 1)
        a, b = h.chunk(2, 1)
        h = a + torch.relu(self.side(b))
        return self.fc(torch.flatten(h, 1))


def cpu_conv_checks(check):
    """The CPU rules against torch.profiler's measurement of the same step,
    convolution by convolution, in bytes (rules for AVX-512's f32 blocks)."""
    from torch.backends import cpu as cpu_backend
    if cpu_backend.get_cpu_capability() != "AVX512":
        check("cpu conv rules vs measured: skipped (the rules model AVX-512; this CPU: "
              f"{cpu_backend.get_cpu_capability()})", True)
        return
    for batch in (2, 4):
        torch.manual_seed(0)
        x = torch.randn(batch, 3, 32, 32)
        measured = export(GroupedNet(), (x,), workspace="measure")
        ruled = export(GroupedNet(), (x,), workspace="rules")
        rules = {o["id"]: o for o in ruled["ops"]}
        convs = [o for o in measured["ops"] if o["type"] in ws.CONV_OPS]
        groups = sorted({o.get("groups", 1) for o in convs})
        check(f"cpu batch {batch}: the net's 22 convolutions (both ways), groups {groups}",
              len(convs) == 22 and groups == [1, 2, 4, 8, 16, 24, 40], (len(convs), groups))
        exact, near = [], []
        for o in convs:
            got, want = rules[o["id"]].get("workspace_bytes", 0), o.get("workspace_bytes", 0)
            # 1x1 with stride, backward: brgconv_strided's scratchpad is not
            # modelled; the rule takes its channels-last copies, never less.
            near_ok = want <= got <= want * 1.05
            row = (o["id"], rules[o["id"]].get("workspace_source"), got, want)
            (near if o["scope"] == "proj" and o["phase"] == "backward" else exact).append(
                (row, got == want if o["scope"] != "proj" or o["phase"] != "backward"
                 else near_ok))
        bad = [r for r, ok in exact + near if not ok]
        check(f"cpu batch {batch}: each convolution's rule equals its measured scratch "
              "(the 1x1 stride-2 backward: not below, within 5%)", not bad and len(near) == 1,
              bad or near)
        total = (sum(r[2] for r, _ in exact), sum(r[3] for r, _ in exact))
        check(f"cpu batch {batch}: convolution scratch totals, rules {total[0]} = measured "
              f"{total[1]}", total[0] == total[1] > 0, total)


def matmul_checks(check):
    g = exported(MatmulNet, (2, 8, 32))
    mms = [o for o in g["ops"] if o["type"] in ws.CUBLAS_OPS]
    types = sorted({o["type"] for o in mms})
    check("cuda matmul model: addmm, mm and bmm are all traced",
          {"aten.addmm.default", "aten.mm.default", "aten.bmm.default"} <= set(types), types)
    check("cuda matmul model: every matmul is rule:cublas-persistent with no per-op bytes",
          all(o.get("workspace_source") == "rule:cublas-persistent"
              and "workspace_bytes" not in o for o in mms),
          [(o["id"], o.get("workspace_source"), o.get("workspace_bytes")) for o in mms])
    others = [o for o in g["ops"] if o["type"] not in ws.CUBLAS_OPS and "workspace_source" in o]
    check("cuda matmul model: no other op names a scratch source", not others,
          [o["id"] for o in others])
    return g


def override_checks(check):
    g = exported(ConvNet, (4, 3, 8, 8), workspace_overrides={"op.convolution": 3 * 1024 * 1024,
                                                               "op.mm": 0})
    ops = {o["id"]: o for o in g["ops"]}
    check("override: the op gets the given bytes, workspace_source override",
          ops["op.convolution"].get("workspace_bytes") == 3 * 1024 * 1024
          and ops["op.convolution"].get("workspace_source") == "override", ops["op.convolution"])
    check("override of 0: no bytes, still named",
          "workspace_bytes" not in ops["op.mm"] and ops["op.mm"]["workspace_source"] == "override",
          ops["op.mm"])
    check("override: counted in source.workspace",
          g["source"]["workspace"]["ops"].get("override") == 2, g["source"]["workspace"])
    for bad, text in (({"op.nope": 1}, "not in the graph: op.nope"),
                      ({"op.convolution": -1}, "expected bytes >= 0"),
                      ({"op.convolution": 1.5}, "expected bytes >= 0")):
        try:
            exported(ConvNet, (4, 3, 8, 8), workspace_overrides=bad)
            check(f"override {bad} is a ValueError", False, "no error")
        except ValueError as e:
            check(f"override {bad} is a ValueError", text in str(e), str(e))
    return g


def device_checks(check, memplan, graph):
    """The persistent cuBLAS block: held once by the device model, of the size
    parseChosenWorkspaceSize gives on that GPU."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        with open(path, "w") as f:
            f.write(dumps(graph))
        for dev, want in CUBLAS_DEFAULT.items():
            out = os.path.join(tmp, dev + ".json")
            p = subprocess.run([memplan, "analyze", path, "--device", dev, "--json", out, "-q"],
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                check(f"analyze --device {dev}", False, p.stderr[-300:])
                continue
            with open(out) as f:
                dm = json.load(f)["device_memory"]
            check(f"{dev}: one cuBLAS workspace of {want} bytes, cuBLASLt sharing it",
                  dm["cublas_workspace_bytes"] == want and dm["cublaslt_workspace_bytes"] == 0
                  and dm["workspace_bytes"] == want, dm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", help="also check the device model's cuBLAS workspace")
    args = ap.parse_args()
    check = Checks()
    check("parseChosenWorkspaceSize defaults: 32 MiB on sm90, 8 MiB + 128 KiB before",
          CUBLAS_DEFAULT["h100"] == 32 * 1024 * KiB
          and CUBLAS_DEFAULT["a100"] == 8 * 1024 * KiB + 128 * KiB, CUBLAS_DEFAULT)
    g = conv_checks(check)
    cpu_conv_checks(check)
    matmul_checks(check)
    override_checks(check)
    if args.memplan:
        device_checks(check, args.memplan, g)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
