#!/usr/bin/env python3
"""Per-op scratch of real eager training steps on a device: what each ATen op
allocates while it runs beyond what it returns (cuDNN's convolution
workspace, attention kernels' temporaries, ...), and the op running at the
step's peak. The ground truth for the GPU rules of memplan.torch's
_workspace.py, which take cuDNN's scratch as 0 (none:cudnn-conv).

Per model, after one warm-up step: one step under torch.profiler
(profile_memory, record_shapes); every outermost aten:: op's allocations on
the device are summed in time order; its scratch is the highest running sum
less what was still allocated when it returned. The step is the one
profiler/torch_gpu_check.py measures (forward, loss, backward, the output
held through the backward).

Usage: gpu_op_scratch.py --out FILE.json [--device cuda|cpu]
                         [--models name:batch,...] [--deadline-s N]
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
FORMAT = "memplan.op_scratch/1"
MODELS = ("models:res_cnn:256,torchvision:vit_b_16:32,models:gpt_small:64,"
          "torchvision:resnet18:128,torchvision:resnet50:64,torchvision:densenet121:32,"
          "torchvision:mobilenet_v2:64")


def split_model(entry):
    spec, batch = entry.rsplit(":", 1)
    return spec, int(batch)


def tensor_meta(x):
    """Shape and dtype of a profiler input, or None."""
    sizes = getattr(x, "sizes", None)
    if sizes is None:
        return None
    return {"shape": list(sizes), "dtype": str(getattr(x, "dtype", ""))}


def op_inputs(node):
    try:
        ins = node.extra_fields.inputs
    except AttributeError:
        return []
    out = []
    for x in ins:
        if isinstance(x, (list, tuple)):
            out.append([tensor_meta(y) for y in x])
        else:
            m = tensor_meta(x)
            out.append(m if m is not None else (x if isinstance(x, (int, float, bool)) else None))
    return out


def mem_events(node, device, out):
    ef = node.extra_fields
    if hasattr(ef, "alloc_size") and getattr(ef, "device", None) is not None \
            and ef.device.type == device:
        out.append((node.start_time_ns, ef.alloc_size))
    for c in node.children:
        mem_events(c, device, out)
    return out


def outermost_ops(roots, device):
    """[(name, start ns, end ns, inputs, scratch bytes, net bytes)] for every
    outermost aten:: op (the step's own calls, forward and backward)."""
    res = []

    def walk(node):
        if node.name.startswith("aten::"):
            evs = sorted(mem_events(node, device, []), key=lambda e: e[0])
            cur = peak = 0
            for _, size in evs:
                cur += size
                peak = max(peak, cur)
            res.append((node.name, node.start_time_ns, node.end_time_ns, node,
                        peak - max(cur, 0), cur))
            return
        for c in node.children:
            walk(c)

    for r in roots:
        walk(r)
    return res


def step_profile(mt, torch, spec, batch, device):
    from memplan.torch._spec import forward_and_loss
    from torch.profiler import ProfilerActivity, profile
    model = mt.load_model(spec).to(device)
    inputs = tuple(x.to(device) for x in mt.example_inputs(model, batch))
    target = mt.make_target(model, inputs).to(device)
    resident = sum(t.numel() * t.element_size() for t in
                   list(model.parameters()) + list(model.buffers()) + list(inputs) + [target])

    def step():
        model.zero_grad(set_to_none=True)
        out, loss = forward_and_loss(model, inputs, target)
        loss.backward()
        del out, loss

    torch.manual_seed(mt.SEED + 3)
    step()
    model.zero_grad(set_to_none=True)
    cuda = device == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    with profile(activities=acts, profile_memory=True, record_shapes=True) as prof:
        step()
        if cuda:
            torch.cuda.synchronize()
    roots = prof.profiler.kineto_results.experimental_event_tree()
    ops = outermost_ops(roots, device)
    # The step's running sum over every device allocation, and the op at its peak.
    allev = []
    for r in roots:
        mem_events(r, device, allev)
    allev.sort(key=lambda e: e[0])
    cur = peak = 0
    peak_t = None
    for t, size in allev:
        cur += size
        if cur > peak:
            peak, peak_t = cur, t
    at_peak = [o for o in ops if peak_t is not None and o[1] <= peak_t <= o[2]]
    row = {"model": spec, "batch": batch, "device": device, "resident_bytes": resident,
           "peak_above_start": peak, "measured_peak_bytes": resident + peak,
           "op_at_peak": at_peak[0][0] if at_peak else None,
           "op_at_peak_inputs": op_inputs(at_peak[0][3]) if at_peak else None,
           "ops": []}
    if cuda:
        row["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        row["allocated_before_step"] = before
        row["allocator_peak_bytes"] = resident + torch.cuda.max_memory_allocated() - before
    by_name = {}
    for name, t0, _, node, scratch, net in ops:
        agg = by_name.setdefault(name, {"op": name, "calls": 0, "scratch_bytes": 0,
                                        "calls_with_scratch": 0})
        agg["calls"] += 1
        if scratch > 0:
            agg["calls_with_scratch"] += 1
            agg["scratch_bytes"] += scratch
            row["ops"].append({"op": name, "scratch_bytes": scratch, "net_bytes": net,
                               "at_peak": bool(at_peak) and at_peak[0][1] == t0,
                               "inputs": op_inputs(node)})
    row["by_op"] = sorted(by_name.values(), key=lambda a: -a["scratch_bytes"])
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--deadline-s", type=float, default=120)
    a = ap.parse_args()
    import memplan.torch as mt
    import torch
    start = time.time()
    doc = {"format": FORMAT, "device": a.device, "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version() if a.device == "cuda" else None,
           "cudnn_benchmark": torch.backends.cudnn.benchmark,
           "device_name": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
           "rows": []}
    for entry in a.models.split(","):
        spec, batch = split_model(entry)
        if time.time() - start > a.deadline_s:
            doc["rows"].append({"model": spec, "batch": batch, "error": "skipped: deadline"})
            continue
        t0 = time.time()
        try:
            row = step_profile(mt, torch, spec, batch, a.device)
        except Exception as e:  # noqa: BLE001 - one model's failure is a row
            row = {"model": spec, "batch": batch, "error": f"{type(e).__name__}: {e}"[:600]}
        row["seconds"] = round(time.time() - t0, 2)
        doc["rows"].append(row)
        print(f"{spec} b{batch}: {row.get('error') or row.get('measured_peak_bytes')} "
              f"({row['seconds']} s)", flush=True)
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
        if a.device == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
