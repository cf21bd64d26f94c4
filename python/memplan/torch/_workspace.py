"""Per-op scratch (`workspace_bytes`) from rules: a function of the op's
shapes and of the device the eager step runs on, so an export need not run
the step (export --device meta) and the scratch follows `--set batch=N`.
Each op given scratch, or known to have scratch no rule models, says where
its figure came from in `workspace_source` (graph format: optional):
  "rule:<name>"  a rule below (the bytes may be 0: rule:cublas-persistent)
  "measured"     torch.profiler allocations while the op ran on this CPU
                 (export --measure-workspace; _convert.op_workspaces)
  "override"     given by the user (export(workspace_overrides={op id: bytes}))
  "none:<name>"  the op allocates scratch on the target device that no rule
                 models: taken as 0 (no workspace_bytes), named so that every
                 figure built on the graph can say so
and the graph's `source.workspace` counts them ({"method", "device", "ops":
{source: count}}).

What each CPU rule stands for (fp32, PyTorch 2.14's and 2.15's CPU kernels,
oneDNN v3.12 / v3.13, one thread; read off torch.profiler allocations
inside each op, see `export --measure-workspace`, which keeps measuring
instead). oneDNN picks kernels by instruction set, so the rules model the
CPU an export names (cpu_isa, default this machine's; source.workspace.isa):
AVX-512, below, or AVX2 (_conv_backward_avx2): the same reorders with
blocks of 8 channels (72 channels stay 72), grouped convolutions blocked
by 8 or run in gemm, a strided convolution's backward data in
brgconv_strided on channels-last copies whatever its kernel, backward
weights in gemm where the kernel is taller than the input or a padding
reaches it (resnet18's 3x3s at 2x2 pixels), the 1x1 strided backward
weights' buffer over 8 to 72 channels, ideep's own grad_bias.
Which copies a kernel makes depends on its inputs' strides: the exporter
writes each tensor's `layout` ("channels_last" or "strided" where it is
not row-major; _convert.layout), and an input a kernel needs dense in
another layout costs its bytes for the whole op.
  cpu:
    convolution            (rule:onednn-convolution; _conv_plan has the
                           sources) ideep reorders the input and weights
                           into oneDNN's blocked layouts, runs into a
                           blocked output, then copies it into the plain
                           one: the blocked copies, channels padded to
                           oneDNN's block (16 floats on AVX-512) for one
                           group and for depthwise (72 channels -> 80),
                           unpadded blocks of 16/8/4 channels for other
                           grouped convolutions; a first convolution
                           (input channels < 16) keeps its input plain; a
                           1x1 with stride adds its reduce-to-unit-stride
                           buffer; an unstrided 1x1 at batch < 16 runs
                           slow_conv2d (none); an input not dense in the
                           layout it runs in (a channel slice) is copied
                           first.
                           Channels-last (input or weights channels-last:
                           ConvNeXt after its stem, everything between
                           its permutes; _conv_cl_forward): no data
                           reorders, the weights made channels-last and
                           reordered (brdgmm_dw for depthwise, brgconv
                           otherwise, with its batch-array scratchpad)
    convolution_backward   backward data (the gradient and weights
                           reordered, a blocked grad_input; 1x1 strided:
                           brgemm on channels-last copies), then backward
                           weights (input and gradient reordered again, a
                           blocked grad_weight) or, where oneDNN has no
                           blocked kernel (depthwise kw > 3, 4 channels per
                           group, kw > 14: ViT's 16x16 patch convolution),
                           gemm on the plain layout with its im2col
                           scratchpad; a gradient or input not dense in the
                           layout it runs in (ViT's patch gradient arrives
                           through a permute, channels-last) is copied
                           first; the highest sum of live buffers, less
                           the gradients returned.
                           Channels-last (_conv_cl_backward): jit_dw or
                           brgconv backward data, then backward weights
                           into 16x16 blocks per group: a depthwise 7x7
                           over C channels takes C*256*49 floats (ConvNeXt
                           at 64x64: 38,535,168 bytes for 768 channels,
                           256 times its weights), beside a weight-sized
                           copy
    native_layer_norm(_backward)  (rule:layer-norm) the input copied when
                           it is not contiguous (a permuted view: eager
                           ConvNeXt's LayerNorm2d, ViT's attention
                           outputs), the backward's gradient too, and the
                           backward's 2 x N weight-gradient buffer
    native_batch_norm_backward, SDPA's CPU flash backward: one temporary
                           the size of the first input
    native_dropout(_backward)    one input-sized temporary
    batch norm forward     two per-channel vectors

GPU rules (cuda, h100, h200, a100; PyTorch 2.14, from its sources; one H200
run measured what they miss, docs/gpu-check.md; an override replaces them):
  rule:cublas-persistent   mm, addmm, bmm, baddbmm, ...: 0 bytes per op. PyTorch
      gives each cuBLAS handle and stream one workspace, allocated through the
      caching allocator at the first matmul and kept (aten/src/ATen/cuda/
      CublasHandlePool.cpp: getCurrentCUDABlasHandle -> setWorkspaceForHandle
      -> getNewWorkspace, size getChosenWorkspaceSize / parseChosenWorkspaceSize:
      CUBLAS_WORKSPACE_CONFIG, default ":4096:8" = 32 MiB on sm90 (H100, H200),
      ":4096:2:16:8" = 8 MiB + 128 KiB before). cuBLASLt (addmm with a bias
      through gemm_and_bias) shares that allocation: "When
      TORCH_CUBLASLT_UNIFIED_WORKSPACE is enabled (the default on open-source
      CUDA builds), the cuBLASLt workspace is capped at the cuBLAS workspace
      size and physically reuses the same allocation" (torch 2.14.1,
      torch/backends/cuda/__init__.py, blas_workspace_size). So it is a
      device-level block, held from the first step, not per-op scratch: the
      analyzer holds it (analyzer/alloc/device_memory.h, LibraryWorkspaces)
      under `--device h100|h200|a100`.
  rule:cuda-depthwise      convolution / convolution_backward with groups ==
      input channels > 1, 4-D, not float16: 0 bytes. ConvParams::
      use_cudnn_depthwise (aten/src/ATen/native/Convolution.cpp) sends only
      float16 (and channels-last) depthwise convolutions to cuDNN; the others
      run conv_depthwise2d_forward_out / _backward_out / _grad_weight_out
      (aten/src/ATen/native/cuda/DepthwiseConv2d.cu), which allocate nothing
      (grad_weight reduces in shared memory).
  none:cudnn-conv          every other convolution and convolution_backward:
      cuDNN runs the first engine of its heuristics that succeeds
      (torch.backends.cudnn.benchmark off: Conv_v8.cpp get_configs_from_heuristics
      -> try_configs) and run_conv_plan allocates plan.getWorkspaceSize()
      through the caching allocator for the call and frees it on return. That
      size is cuDNN's run-time answer for the engine it picks, bounded only by
      what the allocator can give (an engine whose workspace cannot be
      allocated is skipped; pytorch/pytorch#49207), so no rule derives it from
      the shapes: taken as 0 and named, until an override or a measurement
      gives it.
  Other GPU ops: no rule (their scratch, if any, is taken as 0, unnamed).

Falls short on: on AVX2, channels-last convolutions (the AVX-512 rules
stand in), a first convolution (input channels < 8) whose input needs a
gradient, brgconv_strided's weight block where its cost model picks other
than the one taken (the largest of 32/24/16/8 that wastes at most a
quarter) and its output buffer for a width not a multiple of the stride;
CPUs with neither AVX-512 nor AVX2 (taken as AVX2); more than one thread
(per-thread scratchpads; 1x1s then run oneDNN), convolutions not measured
here (bfloat16 and float16 are taken with float32's blocks, 1-D and 3-D
with 2-D's; float64 as 0), the 1x1 strided backward weights' buffer (a few
percent over), brgconv's weight block on channels-last convolutions (16 to
64 channels by its own cost model, taken as 16: under by the padding when
the block it picks does not divide the channels; its accumulation and
input-transpose buffers, which some shapes take, are not modelled), a
tensor whose strides suggest channels-last but are not dense (taken as
strided), SDPA's CPU flash forward buffers and the rest of its
backward's, kernels other than the ones above (their scratch is taken
as 0);
on GPUs, cuDNN's convolution scratch (none:cudnn-conv), channels-last and
transposed depthwise convolutions (taken as rule:cuda-depthwise), and more
than one stream or thread (one cuBLAS workspace each).
"""
import functools
from typing import Any, Dict, Mapping, Optional, Tuple

from ._graph import nbytes as _bytes

DEVICES = ("cpu", "cuda", "h100", "h200", "a100")
# Below this many bytes an op's scratch is not written (as _common.WORKSPACE_MIN).
MIN_BYTES = 64

# Ops that run through a cuBLAS (or cuBLASLt) handle on CUDA.
CUBLAS_OPS = frozenset(f"aten.{n}.default" for n in (
    "mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "mv", "addmv", "matmul"))
CONV_OPS = ("aten.convolution.default", "aten.convolution_backward.default")


# oneDNN's f32 vector on AVX-512: 16 floats. Its blocked layouts (aBcd16b for
# data, ABcd16b16a / Abcde16a for weights) hold channels in blocks of this size.
SIMD_F32 = 16
# The CPU kernel families the rules model, by the vector ISA oneDNN and
# PyTorch dispatch on (torch.backends.cpu.get_cpu_capability()), with the
# f32 vector width of each: AVX-512's blocks hold 16 channels, AVX2's 8.
CPU_ISAS = {"avx512": 16, "avx2": 8}


@functools.cache
def cpu_isa() -> str:
    """The ISA this machine's eager CPU kernels run ("avx512" or "avx2"),
    from torch.backends.cpu.get_cpu_capability(); an older or other CPU
    ("DEFAULT", "ZVECTOR", ...) is taken as "avx2", the narrower model."""
    import torch
    backend = getattr(torch.backends, "cpu", None)
    if backend is not None:
        return "avx512" if backend.get_cpu_capability().startswith("AVX512") else "avx2"
    # torch < 2.0 has no torch.backends.cpu: the CPU's own flags, as ATen's
    # dispatch reads them (AVX512 needs F, BW, VL and DQ).
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f
                          if line.startswith("flags")), set())
    except OSError:
        pass
    return "avx512" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags else "avx2"


def check_isa(isa: Optional[str]) -> None:
    """ValueError unless `isa` is None (this machine's) or a key of CPU_ISAS."""
    if isa is not None and isa not in CPU_ISAS:
        raise ValueError(f"cpu isa {isa!r}: expected one of {', '.join(CPU_ISAS)}")


def _rup(n, b):
    return -(-n // b) * b


def _item(t):
    return _bytes({"shape": [1], "dtype": t["dtype"]})


def _numel(t):
    n = 1
    for d in t["shape"]:
        n *= d
    return n


def _chan_bytes(t, c):
    """Bytes of activation `t` with its channel dimension (1) taken as `c`."""
    return _numel(t) // max(1, t["shape"][1]) * c * _item(t)


def _dense(t, cl=False):
    """True when `t` is dense in the channels-last layout (cl) or in the
    row-major one, so that a kernel's `.contiguous(memory_format)` returns it
    as is. Its "layout" (written by the exporter, _convert.layout) is absent
    for a row-major tensor, "channels_last" or "strided" otherwise; a
    row-major tensor with one channel or one pixel is channels-last too."""
    lay = t.get("layout")
    if not cl:
        return lay is None
    s = t["shape"]
    return lay == "channels_last" or (lay is None and len(s) > 2
                                      and (s[1] == 1 or _numel(t) == s[0] * s[1]))


def _conv_channels_last(x, w):
    """mkldnn_conv_use_channels_last (aten/src/ATen/native/ConvUtils.h): a
    4-D or 5-D convolution runs channels-last when its input or its weights
    suggest that memory format."""
    return len(x["shape"]) in (4, 5) and "channels_last" in (x.get("layout"), w.get("layout"))


def _brg_batch(ks):
    """brgemm convolutions' scratchpad on one thread: the batch-element
    array (40-byte brgemm_batch_element_t, one per kernel position, padded
    to whole 4 KiB pages and booked with a page of alignment;
    jit_brgemm_conv_utils.cpp, adjusted_batch_size and init_scratchpad)."""
    return -(-_rup(40 * ks, 4096) // 40) * 40 + 4096


def _geometry(x, w, y):
    """Per spatial dimension of a convolution, from its shapes: (input,
    kernel, output, stride, begin padding, end padding). The stride: 1 when
    the output is at least as wide as an unpadded stride-1 one, else the
    ratio of the sizes rounded up (a padded small image can read as
    either); the padding taken symmetric (PyTorch's padding=p),
    the end padding as oneDNN's calculate_end_padding (negative when the
    last input rows are never read)."""
    dims = []
    for i, k, o in zip(x["shape"][2:], w["shape"][2:], y["shape"][2:]):
        o = max(1, o)
        s = 1 if o >= i - k + 1 else -(-i // o)
        span = (o - 1) * s + k - i
        begin = max(0, -(-span // 2))
        dims.append((i, k, o, s, begin, span - begin))
    return dims


def _stride_w(x, w, y):
    """The convolution's stride along the width, from the shapes (_geometry);
    1 for a tensor without spatial dimensions."""
    dims = _geometry(x, w, y)
    return dims[-1][3] if dims else 1


def _conv_plan(x, w, y, groups, isa="avx512"):
    """How an eager CPU convolution of input `x`, weights `w`, output `y`
    runs (PyTorch 2.14, one thread, AVX-512; on AVX2 the blocks hold 8
    channels, grouped convolutions block by 8 only): a dict with
      "backend": "thnn" (slow_conv2d) or "mkldnn" (ideep -> oneDNN),
      "src", "dst", "wei": bytes of oneDNN's reordered copies (0 when the
          user's plain layout is used as is),
      "fwd_sp": the forward primitive's scratchpad (ideep allocates it
          through the c10 allocator, attr scratchpad_mode user),
      "gemm": when no blocked kernel takes the convolution at all, the
          im2col scratchpad of gemm:jit forward and backward data,
      "bwd_w": "blocked" or "gemm" (backward weights implementation),
      "bwd_w_sp": its scratchpad.
    Backend (aten/src/ATen/native/Convolution.cpp, ConvParams::use_mkldnn):
    float CPU tensors take mkldnn unless a 1x1 unstrided convolution runs on
    one thread with batch < 16, or a dense convolution with kernel <= 3 has
    batch 1 and <= 20480 input elements. Blocks (oneDNN v3.12,
    src/cpu/x64/jit_uni_dw_conv_kernel_utils.cpp and
    jit_avx512_common_conv_kernel.cpp, init_conf): depthwise (groups == input
    == output channels) runs jit_dw with channels padded up to 16
    (ok_to_pad_channels); one group: channels padded up to 16, a first
    convolution (input channels < 16) keeps its input plain; other grouped
    convolutions use blocks of 16, 8 or 4 (ok_to_try_lower_zmm: the largest
    dividing both channels per group), unpadded. Backward weights: jit_dw
    needs kw <= 3 and stride <= kw; the AVX-512 direct kernel only blocks of 16
    for groups > 1, the AVX2 one blocks of 8; otherwise gemm:jit on the plain
    layout, whose scratchpad (gemm_convolution_utils.cpp, nthr 1) holds the
    weight reduction buffers and one image's im2col columns."""
    simd = CPU_ISAS[isa]
    n, c = x["shape"][0], x["shape"][1]
    o = w["shape"][0]
    ks = 1
    for k in w["shape"][2:]:
        ks *= k
    kw = w["shape"][-1]
    sp_in = _numel(x) // max(1, n * c)
    sp_out = _numel(y) // max(1, y["shape"][0] * y["shape"][1])
    strided = sp_out < sp_in and ks == 1
    stride_w = _stride_w(x, w, y)
    item = _item(x)
    plan = {"backend": "mkldnn", "src": 0, "dst": 0, "wei": 0, "fwd_sp": 0, "gemm": 0,
            "bwd_w": "blocked", "bwd_w_sp": 0, "ks": ks, "sp_out": sp_out}
    if x["dtype"] == "float64" or len(x["shape"]) < 3:
        plan["backend"] = "other"  # no oneDNN for float64
        return plan
    if ks == 1 and not strided and n < 16:
        plan["backend"] = "thnn"
        return plan
    if groups == 1 and n == 1 and _numel(x) <= 20480 \
            and not all(k > 3 for k in w["shape"][2:]):
        plan["backend"] = "thnn"
        return plan
    icg, ocg = c // groups, o // groups
    if groups > 1 and groups == c and o == c:
        cp = _rup(c, simd)
        plan.update(src=_chan_bytes(x, cp), dst=_chan_bytes(y, cp), wei=cp * ks * item)
        if not (kw <= 3 and stride_w <= kw):
            plan["bwd_w"] = "gemm"
    elif groups == 1:
        ip, op_ = _rup(c, simd), _rup(o, simd)
        first = c < simd
        plan.update(src=0 if first else _chan_bytes(x, ip), dst=_chan_bytes(y, op_),
                    wei=op_ * (c if first else ip) * ks * item)
        # Backward weights: the AVX-512 direct kernel takes kw <= 14 (wider
        # only transposed: kw < 20 spanning a one-pixel-wide stride-1
        # output), the AVX2 one kw < 14; a wider kernel (ViT's 16x16 patch
        # convolution) runs gemm:jit.
        transposed = (len(x["shape"]) == 4 and kw < 20 and y["shape"][-1] == 1
                      and kw == x["shape"][-1] and stride_w == 1)
        if kw > 14 and not transposed:
            plan["bwd_w"] = "gemm"
    else:
        blocks = (SIMD_F32, 8, 4) if isa == "avx512" else (8,)
        block = next((b for b in blocks if icg % b == 0 and ocg % b == 0), None)
        if block is None:
            # No blocked kernel: gemm:jit on the plain layouts throughout
            # (ideep still writes its own output and copies it), one
            # image's im2col columns as scratchpad both ways.
            plan.update(bwd_w="gemm", gemm=icg * ks * sp_out * item + 128)
        else:
            plan.update(src=_bytes(x), dst=_bytes(y), wei=_bytes(w))
            if block not in (SIMD_F32, 8):
                plan["bwd_w"] = "gemm"
    if strided:
        # jit_avx512_core 1x1 with stride: "reduce to unit stride" copies one
        # image's strided input (jit_avx512_common_1x1_convolution.hpp, rtus).
        plan["fwd_sp"] = _rup(c, simd) * sp_out * item + 128
    if plan["bwd_w"] == "gemm":
        plan["bwd_w_sp"] = _gemm_bwd_w_scratchpad(w, icg, ks, sp_out, item)
    return plan


def _gemm_bwd_w_scratchpad(w, icg, ks, sp_out, item):
    """gemm:jit backward weights' scratchpad on the plain layout
    (gemm_convolution_utils.cpp, nthr 1): the weight reduction buffers and
    one image's im2col columns."""
    return 4 * _bytes(w) + icg * ks * sp_out * item + 256


def _conv_forward(x, w, y, groups, isa="avx512", bias=False):
    """Scratch of convolution(x, w) -> y: the highest sum of live buffers
    while the op runs, less the output it returns. On AVX2 a bias whose
    channels are not a multiple of 8 is padded in the scratchpad
    (key_conv_padded_bias)."""
    p = _conv_plan(x, w, y, groups, isa)
    o = w["shape"][0]
    if isa == "avx2" and bias and groups == 1 and o % 8 and p["backend"] == "mkldnn" \
            and not p["gemm"]:
        p["fwd_sp"] += _rup(o, 8) * _item(x) + 128
    cl = _conv_channels_last(x, w)
    # An input not dense in the layout the convolution runs in (a channel
    # slice, a permuted view): made contiguous first (both backends).
    copy = 0 if _dense(x, cl) else _bytes(x)
    if p["backend"] == "thnn":
        if p["ks"] == 1:  # slow_conv2d with a 1x1 kernel: no im2col
            return copy
        return copy + _numel(y) // max(1, y["shape"][1]) * x["shape"][1] * p["ks"] * _item(x)
    if p["backend"] != "mkldnn":
        return 0
    if cl:
        return copy + _conv_cl_forward(x, w, y, groups)
    if p["gemm"]:
        return max(0, copy + max(p["gemm"] + _bytes(y), 2 * _bytes(y)) - _bytes(y))
    # ideep: reorder src and weights, run into a blocked dst, free the
    # reordered inputs, allocate the plain output, reorder into it.
    peak = max(p["src"] + p["wei"] + p["dst"] + p["fwd_sp"], p["dst"] + _bytes(y))
    return max(0, copy + peak - _bytes(y))


def _conv_cl_forward(x, w, y, groups):
    """Scratch of a channels-last oneDNN convolution (_mkldnn_convolution
    with use_channels_last: the output is allocated channels-last and
    oneDNN writes it in place, nhwc in and out): the weights made
    channels-last (a copy unless they already are: one input channel per
    group or a 1x1 kernel), then reordered for the primitive, and its
    scratchpad. Depthwise runs brdgmm_dw (weights debcA16a: channels padded
    to 16, no scratchpad); the others brgconv / brgconv_1x1 (weights
    Acdb16a..Acdb64a: output channels padded to a block of 16 to 64 that
    its cost model picks, taken as 16; the batch-element scratchpad)."""
    c, o = x["shape"][1], w["shape"][0]
    ks = _numel(w) // max(1, o * w["shape"][1])
    item = _item(x)
    copy_w = 0 if _dense(w, True) else _bytes(w)
    if groups > 1 and groups == c == o:
        return copy_w + _rup(c, SIMD_F32) * ks * item
    wei = groups * _rup(o // groups, SIMD_F32) * (c // groups) * ks * item
    return copy_w + wei + _brg_batch(ks)


def _conv_backward(gy, x, w, outs, groups, isa="avx512"):
    """Scratch of convolution_backward(gy, x, w) -> (grad_input?, grad_weight?,
    grad_bias?): ideep's backward data (reorder gy and weights, run into a
    blocked grad_input, reorder into the plain one), then its backward
    weights (reorder x and gy again, run into blocked grad_weight, reorder
    into the plain one), less the gradients returned."""
    gx = next((_bytes(t) for t in outs if t["shape"] == x["shape"]), 0)
    gw = next((_bytes(t) for t in outs if t["shape"] == w["shape"]), 0)
    p = _conv_plan(x, w, gy, groups, isa)
    cl = _conv_channels_last(x, w)
    # Inputs not dense in the layout the convolution runs in (a channel
    # slice, the gradient of a permute): made contiguous first
    # (mkldnn_convolution_backward: .contiguous(memory_format)), held
    # through the op.
    copy = sum(_bytes(t) for t in (x, gy, w) if not _dense(t, cl))
    if p["backend"] == "thnn":
        if p["ks"] == 1:
            return copy
        return copy + _numel(gy) // max(1, gy["shape"][1]) * x["shape"][1] * p["ks"] * _item(x)
    if p["backend"] != "mkldnn":
        return 0
    gb = next((_bytes(t) for t in outs if len(t["shape"]) == 1), 0)
    if cl:
        return copy + _conv_cl_backward(gy, x, w, (gx, gw, gb), groups)
    if isa == "avx2":
        return copy + _conv_backward_avx2(gy, x, w, (gx, gw, gb), groups, p)
    peak = 0
    if gx and p["fwd_sp"]:
        # 1x1 with stride, backward data: brgconv_strided on channels-last
        # copies (weights Bcda32b: input channels in blocks of 32), its
        # scratchpad (_brg_strided), then grad_input allocated
        # channels-last and copied to the contiguous output.
        item = _item(x)
        sp = _brg_strided(gy)
        wei = _rup(x["shape"][1], 32) * w["shape"][0] * item
        peak = max(_bytes(gy) + wei + gx + sp, 3 * gx)
    elif gx and p["gemm"]:
        peak = max(gx + p["gemm"], 2 * gx)
    elif gx:
        peak = max(p["dst"] + p["wei"] + p["src"] + p["fwd_sp"], p["src"] + gx)
        if p["src"] == 0:  # a plain input: the gradient is written in place
            peak = max(peak, p["dst"] + p["wei"] + gx)
    if gw:
        if p["bwd_w"] == "gemm":
            peak = max(peak, gx + gw + p["bwd_w_sp"], gx + 2 * gw)
        else:
            # With a bias gradient whose channels are not a multiple of 16,
            # the direct kernel pads it in its scratchpad (key_conv_padded_bias).
            o = w["shape"][0]
            pad_bias = _rup(o, SIMD_F32) * _item(x) + 128 \
                if groups == 1 and o % SIMD_F32 and any(len(t["shape"]) == 1 for t in outs) \
                else 0
            peak = max(peak, gx + p["src"] + p["dst"] + p["wei"] + p["fwd_sp"] + pad_bias,
                       gx + p["wei"] + gw)
    return max(0, copy + peak - gx - gw)


def _avx2_direct_bwd_w(dims):
    """jit_avx2_conv_bwd_weights_kernel_f32::init_conf (oneDNN v3.12): the
    direct backward-weights kernel takes kw < 14, a kernel no taller than
    the input (kh <= ih, [bwd_w:r2]) and every padding smaller than the
    kernel; otherwise gemm:jit."""
    if dims[-1][1] >= 14:
        return False
    return all(k <= i and b < k and e < k for i, k, _, _, b, e in dims)


def _avx2_dw_bwd_w(dims):
    """jit_uni_dw_conv_bwd_weights_kernel<avx2>::init_conf: kw <= 3 with
    stride <= kw, each padding at most half the kernel (a padding over 1 a
    multiple of the stride), an input at least the kernel plus the top
    padding's misalignment; otherwise gemm:jit."""
    _, k, _, s, _, _ = dims[-1]
    if k > 3 or s > k:
        return False
    for _, k, _, s, b, e in dims:
        e = max(0, e)
        if b > k // 2 or e > k // 2 or (b > 1 and b % s) or (e > 1 and e % s):
            return False
    i, k, _, s, b, _ = dims[0]
    return i >= k + (-b) % s


def _avx2_rtus_bwd_w(c, sp_out, item):
    """jit_avx2_1x1 backward weights with a stride: the reduce-to-unit-stride
    buffer (rtus_prepare_space_info: nb_bcast_blocking x is x ic_block):
    input-channel blocks of 8, their count halved (or divided by 3) while
    over 9, of the strided output's pixels, plus 128 bytes of alignment."""
    b = -(-c // 8)
    while b > 9 and (b % 2 == 0 or b % 3 == 0):
        b = b // 2 if b % 2 == 0 else b // 3
    return b * 8 * sp_out * item + 128


def _conv_backward_avx2(gy, x, w, grads, groups, p):
    """Scratch of a plain-layout oneDNN convolution_backward on AVX2 (one
    thread), less the gradients (gx, gw, gb) it returns. Backward data: a
    strided convolution with one group runs brgconv_strided on channels-last
    copies (the gradient, weights Bcda32b: input channels in blocks of 32,
    a channels-last grad_input, its padded-gradient scratchpad), then
    grad_input passes through a channels-last and a plain tensor (3 x its
    bytes); otherwise jit:avx2 on 8-channel blocks as on AVX-512. Backward
    weights: the direct kernel (_avx2_direct_bwd_w; depthwise
    _avx2_dw_bwd_w) on the gradient and input reordered again into a
    blocked grad_weight, with the 1x1 strided kernel's reduce-to-unit-stride
    buffer (_avx2_rtus_bwd_w), or gemm:jit on the plain layout; ideep keeps
    its own grad_bias until the returned one is written."""
    gx, gw, gb = grads
    c, o = x["shape"][1], w["shape"][0]
    item, ks = _item(x), p["ks"]
    dims = _geometry(x, w, gy)
    depthwise = groups > 1 and groups == c == o
    peak = 0
    if gx:
        if groups == 1 and any(d[3] > 1 for d in dims):
            ohp = 1
            for _, k, out, s, b, e in dims:
                ohp *= out + max(0, k - 1 - b) // s + max(0, k - 1 - e) // s
            # Weights Bcda<k>b: input channels in blocks of 32 to 8 that
            # brgconv's cost model picks (64 -> 32, 40 and 20 -> 24, 8 -> 8,
            # measured), taken as the largest that wastes at most a quarter.
            block = next(b for b in (32, 24, 16, 8) if 4 * c >= 3 * _rup(c, b))
            wei = _rup(c, block) * o * ks * item
            peak = max(_bytes(gy) + wei + gx + _brg_strided(gy, ohp), 3 * gx)
        elif p["gemm"]:
            peak = max(gx + p["gemm"], 2 * gx)
        else:
            peak = max(p["dst"] + p["wei"] + p["src"], p["src"] + gx)
            if p["src"] == 0:
                peak = max(peak, p["dst"] + p["wei"] + gx)
    if gw or gb:
        direct = _avx2_dw_bwd_w(dims) if depthwise else \
            p["bwd_w"] == "blocked" and _avx2_direct_bwd_w(dims)
        if not direct:
            sp = _gemm_bwd_w_scratchpad(w, c // groups, ks, p["sp_out"], item)
            wei = _bytes(w)
            peak = max(peak, gx + wei + sp + gb, gx + wei + 2 * gb + gw)
        else:
            first = groups == 1 and c == 3  # "flat": the input stays plain
            src = 0 if first else p["src"] or _bytes(x)
            wei = p["wei"] or _bytes(w)
            sp = 0
            if ks == 1 and p["fwd_sp"]:
                sp += _avx2_rtus_bwd_w(c, p["sp_out"], item)
            if gb and o % 8:
                sp += _rup(o, 8) * item + 128  # key_conv_padded_bias
            # ideep's own grad_bias (unpadded) beside the returned one.
            peak = max(peak, gx + (p["dst"] or _bytes(gy)) + src + wei + sp + gb,
                       gx + wei + 2 * gb + gw)
    return max(0, peak - gx - gw - gb)


def _brg_strided(gy, padded_pixels=None):
    """brgconv_strided's backward-data scratchpad on one thread
    (jit_brgemm_conv_bwd_utils.cpp, init_scratchpad, each piece booked with
    a 4 KiB page of alignment): one image's gradient, padded to the pixels
    the kernel overhangs (ohp x owp: `padded_pixels`, the gradient's own
    pixels by default, as for a 1x1), rounded to 4096 elements, its 4 KiB
    mask, the batch-element array."""
    n, o = gy["shape"][0], gy["shape"][1]
    sp_out = _numel(gy) // max(1, n * o) if padded_pixels is None else padded_pixels
    return _rup(sp_out * o, 4096) * _item(gy) + 4096 + 2 * 4096 + _brg_batch(1)


def _conv_cl_backward(gy, x, w, grads, groups):
    """Scratch of a channels-last oneDNN convolution_backward (nhwc
    throughout: no data reorders), less the gradients (gx, gw, gb) it
    returns. Backward data: the weights reordered for jit_dw (depthwise:
    Abcde16a) or brgconv (Bcda16b..64b: input channels padded to a block
    taken as 16) and its scratchpad: brgconv_strided's (_brg_strided) with
    a stride, else the nested forward brgconv's batch array and 128 bytes
    of alignment. Backward weights (jit_dw for depthwise with kw <= 3 and
    stride <= kw, gemm:jit for kw > 14, else the AVX-512 direct or 1x1
    kernel): a blocked grad_weight (jit_dw: Abcde16a; gemm: plain;
    otherwise 16x16 blocks per group, aBCde16c16b: a depthwise 7x7 over C
    channels takes C*256*49 floats), its scratchpad (gemm's; the bias
    padded to 16 per group when it is not a multiple of 16; the 1x1
    kernel's reduce-to-unit-stride buffer with a stride), a grad_bias
    buffer; then grad_bias and grad_weight are allocated plain and
    grad_weight copied through one more weight-sized buffer
    (mkldnn_convolution_backward_weights: to_dense, then
    .to(channels_last))."""
    gx, gw, gb = grads
    c, o = x["shape"][1], w["shape"][0]
    icg, ocg = c // groups, o // groups
    ks = _numel(w) // max(1, o * w["shape"][1])
    kw, item = w["shape"][-1], _item(x)
    stride = _stride_w(x, w, gy)
    depthwise = groups > 1 and groups == c == o
    peak = 0
    if gx:
        if depthwise:
            wei, sp = _rup(c, SIMD_F32) * ks * item, 0
        else:
            wei = groups * _rup(icg, SIMD_F32) * ocg * ks * item
            sp = _brg_strided(gy) if stride > 1 else _brg_batch(ks) + 128
        peak = gx + wei + sp
    if gw or gb:
        sp = 0
        if depthwise and kw <= 3 and stride <= kw:
            blk = _rup(c, SIMD_F32) * ks * item
        elif kw > 14:
            # gemm:jit on nhwc (gemm_convolution_utils.cpp, is_nspc and
            # bwd_w, nthr 1): grad_weight plain, im2col columns of one
            # image, the weight reduction buffer (booked as floats of the
            # weights' bytes), one image's input transposed.
            blk = _bytes(w)
            sp_in = _numel(x) // max(1, x["shape"][0] * c)
            sp_out = _numel(gy) // max(1, gy["shape"][0] * o)
            sp = 4 * _bytes(w) + icg * ks * sp_out * item + icg * sp_in * item + 3 * 128
        else:
            first = groups == 1 and c < SIMD_F32  # input channels unblocked
            blk = groups * _rup(ocg, SIMD_F32) * (c if first else _rup(icg, SIMD_F32)) \
                * ks * item
            if gb and ocg % SIMD_F32:
                sp += groups * _rup(ocg, SIMD_F32) * item + 128
            if ks == 1 and stride > 1:
                sp += _rup(c, SIMD_F32) * (_numel(gy) // max(1, gy["shape"][0] * o)) * item + 128
        peak = max(peak, gx + blk + sp + gb, gx + blk + 2 * gb + 2 * gw)
    return max(0, peak - gx - gw - gb)


def _layer_norm(ins, outs, backward):
    """Scratch of native_layer_norm(x, ...) or native_layer_norm_backward(dy,
    x, ...) on the CPU (aten/src/ATen/native/layer_norm.cpp): x is copied
    when not contiguous (expect_contiguous), both ways; the backward copies
    dy too (LayerNormBackwardKernelImpl: dY.contiguous()) and, when it
    returns grad_weight or grad_bias, sums them in one buffer of 2 x N
    elements of the weights' dtype per thread (N: the normalized size)."""
    x = ins[1] if backward else ins[0]
    ws = 0 if _dense(x) else _bytes(x)
    if backward:
        ws += 0 if _dense(ins[0]) else _bytes(ins[0])
        params = [t for t in outs if t["shape"] != x["shape"]]
        if params:
            ws += 2 * _bytes(params[0])
    return ws


def _cpu(op, tensors, groups, isa="avx512"):
    """(bytes, source) of `op` on a CPU whose kernels run `isa` (CPU_ISAS);
    (0, None) when no rule applies."""
    kind = op["type"]
    ins = [tensors[i] for i in op["inputs"]]
    outs = [tensors[o] for o in op["outputs"]]
    if kind == "aten.convolution.default" and len(ins) >= 2 and outs:
        bias = len(ins) >= 3 and len(ins[2]["shape"]) == 1
        return (_conv_forward(ins[0], ins[1], outs[0], groups, isa, bias),
                "rule:onednn-convolution")
    if kind == "aten.convolution_backward.default" and len(ins) >= 3:
        return (_conv_backward(ins[0], ins[1], ins[2], outs, groups, isa),
                "rule:onednn-convolution-backward")
    if kind == "aten.native_layer_norm.default" and ins:
        return _layer_norm(ins, outs, backward=False), "rule:layer-norm"
    if kind == "aten.native_layer_norm_backward.default" and len(ins) >= 2:
        return _layer_norm(ins, outs, backward=True), "rule:layer-norm"
    if kind in ("aten.native_batch_norm_backward.default",
                "aten._scaled_dot_product_flash_attention_for_cpu_backward.default") and ins:
        return _bytes(ins[0]), "rule:input-sized-temporary"
    if kind in ("aten.native_dropout.default", "aten.native_dropout_backward.default") and ins:
        return _bytes(ins[0]), "rule:dropout-temporary"
    if kind == "aten._native_batch_norm_legit_functional.default" and len(ins) >= 2:
        return 2 * _bytes(ins[1]), "rule:batch-norm-statistics"
    return 0, None


def cpu_rule(op: Dict[str, Any], tensors: Dict[str, Dict[str, Any]], groups: int = 1,
             isa: Optional[str] = None) -> int:
    """Scratch bytes of `op` on a CPU whose kernels run `isa` (a key of
    CPU_ISAS; default: this machine's, cpu_isa()); 0 when no rule applies."""
    return _cpu(op, tensors, groups, isa or cpu_isa())[0]


def gpu_rule(op: Dict[str, Any], tensors: Dict[str, Dict[str, Any]],
             groups: int = 1) -> Tuple[int, Optional[str]]:
    """(bytes, workspace_source) of `op` in an eager step on a CUDA GPU (the
    module docstring's GPU rules); (0, None) when no rule applies."""
    kind = op["type"]
    if kind in CUBLAS_OPS:
        return 0, "rule:cublas-persistent"
    if kind in CONV_OPS and len(op["inputs"]) >= 2:
        ins = [tensors[i] for i in op["inputs"]]
        # convolution(input, weight, ...) -> out; convolution_backward(grad_out, input, weight, ...)
        x, w, big = (ins[0], ins[1], tensors[op["outputs"][0]]) if kind == CONV_OPS[0] \
            else (ins[1], ins[2], ins[0])
        # ConvParams::is_depthwise and use_cudnn_depthwise (Convolution.cpp): 4-D, groups ==
        # input channels > 1, output channels a multiple of them, not float16 (cuDNN's),
        # 32-bit indexable (else cuDNN).
        depthwise = (len(x["shape"]) == 4 and groups > 1 and x["shape"][1] == groups
                     and w["shape"][0] % groups == 0 and x["dtype"] != "float16"
                     and max(_numel(x), _numel(big)) < 2 ** 31)
        return 0, ("rule:cuda-depthwise" if depthwise else "none:cudnn-conv")
    return 0, None


def apply_rules(graph: Dict[str, Any], device: str,
                overrides: Optional[Mapping[str, int]] = None,
                isa: Optional[str] = None) -> int:
    """Sets each op's workspace_bytes and workspace_source by the rules for
    `device` (on "cpu", for kernels of `isa`, a key of CPU_ISAS; default:
    this machine's, cpu_isa()), replacing any it had, then applies
    `overrides` ({op id: bytes}, apply_overrides). Returns the number of
    ops given scratch."""
    if device not in DEVICES:
        raise ValueError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
    check_isa(isa)
    tensors = {t["id"]: t for t in graph["tensors"]}
    if device == "cpu":
        kernels = isa or cpu_isa()

        def rule(op, tensors, groups):
            return _cpu(op, tensors, groups, kernels)
    else:
        rule = gpu_rule
    for op in graph["ops"]:
        op.pop("workspace_bytes", None)
        op.pop("workspace_source", None)
        ws, source = rule(op, tensors, op.get("groups", 1))
        if ws >= MIN_BYTES:
            op["workspace_bytes"] = ws
            op["workspace_source"] = source
        elif source is not None and (device != "cpu"):
            op["workspace_source"] = source  # a GPU rule of 0 bytes, or none:<name>
    apply_overrides(graph, overrides or {})
    return sum(1 for op in graph["ops"] if op.get("workspace_bytes", 0) > 0)


def apply_overrides(graph: Dict[str, Any], overrides: Mapping[str, int]) -> int:
    """Sets the scratch of the ops named in `overrides` ({op id: bytes}, e.g.
    measured on the GPU) to those bytes, workspace_source "override". An
    unknown op id or a byte count that is not an integer >= 0 is a
    ValueError. Returns the number of ops overridden."""
    ops = {op["id"]: op for op in graph["ops"]}
    unknown = sorted(k for k in overrides if k not in ops)
    if unknown:
        raise ValueError(f"workspace override for {len(unknown)} op(s) not in the graph: "
                         + ", ".join(unknown[:5]))
    for k, v in overrides.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"workspace override of op {k}: {v!r}, expected bytes >= 0")
        op = ops[k]
        op.pop("workspace_bytes", None)
        if v > 0:
            op["workspace_bytes"] = v
        op["workspace_source"] = "override"
    return len(overrides)


def record_sources(graph: Dict[str, Any], method: str, device: str,
                   isa: Optional[str] = None) -> Dict[str, Any]:
    """graph["source"]["workspace"]: how the per-op scratch was obtained
    ("rules", "measure" or "none"), for which device (on "cpu", with the
    "isa" of the kernels the rules or the measurement were for), and how
    many ops carry each workspace_source. Returns it."""
    counts: Dict[str, int] = {}
    for op in graph["ops"]:
        s = op.get("workspace_source")
        if s is not None:
            counts[s] = counts.get(s, 0) + 1
    summary = {"method": method, "device": device}
    if device == "cpu" and method != "none":
        summary["isa"] = isa or cpu_isa()
    summary["ops"] = dict(sorted(counts.items()))
    graph.setdefault("source", {})["workspace"] = summary
    return summary
