#!/usr/bin/env python3
"""The optimizer step against measured eager CPU steps: torchvision resnet18,
the tests' GPT (memplan.torch.models.gpt_small) and a small transformers
Llama, each with torch.optim.Adam and AdamW (torch's defaults: on the CPU
the single-tensor loop, whose `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`
makes two parameter-sized temporaries while the previous parameter's denom
is still referenced), predicted by memplan.torch.estimate within TOLERANCE.

Measured step (as bench/peers_lib.measure_adam_step, with the optimizer's
own defaults): one unmeasured warm-up step makes the optimizer state; then
grads None, forward, loss, backward, optimizer.step() with the output and
the loss held until after the step (estimate's hold_outputs=True), one
intra-op thread, torch.profiler's CPU [memory] events; peak = resident
(parameters, buffers, inputs, target, optimizer state) + the running sum's
peak above the start.

Also Adam(foreach=True) on the CPU against the step exported for "cuda"
(allocation-level peaks): memplan models torch's CUDA default, foreach,
whose torch._foreach_sqrt copies every exp_avg_sq at once.

Also checks the premise: torch.optim picks neither foreach nor fused for
CPU parameters (torch/optim/optimizer.py _default_to_fused_or_foreach), and
foreach for CUDA ones, as memplan's --optimizer model assumes per
source.target_device (analyzer/lower/optimizer_state.h).

Usage: optimizer_step_test.py --memplan PATH [--require-torch 2.15.0]
"""
import argparse
import gc
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import Checks  # noqa: E402

# Not modelled: Adam's 4-byte "step" tensor per parameter (resident here)
# and the 4- to 12-byte scalar wrappers of each update op: ~250 bytes of
# ~60-200 MB.
TOLERANCE = 1e-3
# (label, model spec, batch, per-sample input shape or None): batches small
# enough that the update's temporaries decide each step's peak (the check
# below; resnet18 at 96x96, since at 64x64 AVX2's oneDNN computes layer4's
# weight gradients at 2x2 pixels in gemm, whose 38 MB scratchpad puts the
# peak in the backward there); the llama has no biases, so the previous parameter's denom is a
# weight of the same layer.
MODELS = [
    ("resnet18", "torchvision:resnet18", 2, (3, 96, 96)),
    ("gpt_small", "models:gpt_small", 1, None),
    ("llama", "hf:llama:hidden_size=128,intermediate_size=344,num_hidden_layers=2,"
              "num_attention_heads=4,num_key_value_heads=2,vocab_size=1000,seq=64", 1, None),
]


def measure(model, inputs, target, optimizer):
    import memplan.torch as mt
    import torch
    from memplan.torch import _measure
    from memplan.torch._spec import forward_and_loss
    from torch.profiler import ProfilerActivity, profile

    def step():
        model.zero_grad(set_to_none=True)
        out, loss = forward_and_loss(model, inputs, target)
        loss.backward()
        optimizer.step()
        del out, loss

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(mt.SEED + 3)
        step()  # makes the optimizer state
        model.zero_grad(set_to_none=True)
        gc.collect()
        state = [t for s in optimizer.state.values() for t in s.values()
                 if isinstance(t, torch.Tensor)]
        resident = _measure._tensor_bytes(list(model.parameters()) + list(model.buffers())
                                          + list(inputs) + [target] + state)
        torch.manual_seed(mt.SEED + 3)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step()
    finally:
        torch.set_num_threads(prev)
    peak, _, _ = _measure._peak_from_kineto(prof)
    _, stack = _measure._peak_stack(prof)
    return resident + peak, stack or ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--require-torch", default=None)
    args = ap.parse_args()
    os.environ["MEMPLAN_BINARY"] = os.path.abspath(args.memplan)
    import memplan.torch as mt
    import torch
    from torch.optim.optimizer import _default_to_fused_or_foreach

    check = Checks()
    if args.require_torch:
        check("torch " + args.require_torch,
              torch.__version__.split("+")[0] == args.require_torch, torch.__version__)
    cpu = [torch.nn.Parameter(torch.zeros(2))]
    check("torch.optim's default on CPU parameters: single-tensor (not fused, not foreach)",
          _default_to_fused_or_foreach(cpu, False) == (False, False),
          repr(_default_to_fused_or_foreach(cpu, False)))
    # Without a GPU: the choice reads only each parameter's device type and
    # class (torch.optim.optimizer._default_to_fused_or_foreach).
    from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices
    check("torch.optim's default on CUDA parameters: foreach",
          "cuda" in _get_foreach_kernels_supported_devices()
          and "cpu" not in _get_foreach_kernels_supported_devices(),
          repr(_get_foreach_kernels_supported_devices()))

    for label, spec, batch, shape in MODELS:
        for cls in (torch.optim.Adam, torch.optim.AdamW):
            name = f"{label} {cls.__name__}"
            torch.manual_seed(mt.SEED)
            model = mt.load_model(spec)
            inputs = mt.example_inputs(model, batch, shape)
            target = mt.make_target(model, inputs)
            opt = cls(model.parameters(), lr=1e-3)
            measured, stack = measure(model, inputs, target, opt)
            est = mt.estimate(model, inputs, target=target, optimizer=opt)
            err = (est.peak_bytes - measured) / measured
            detail = (f"predicted {est.peak_bytes} ({est.report.get('peak_phase')}: "
                      f"{est.report.get('peak_op')}), measured {measured} ({stack}), "
                      f"error {100 * err:+.4f}%")
            print(f"     {name}: {detail}", flush=True)
            check(f"{name}: within {100 * TOLERANCE:g}%", abs(err) <= TOLERANCE, detail)
            # The case this test is for: the update's temporaries decide the peak.
            check(f"{name}: measured and predicted peaks in the optimizer step",
                  "Optimizer.step" in stack and est.report.get("peak_phase") == "optimizer",
                  detail)
        # The CUDA default, foreach (list-wide temporaries), run on the CPU: the
        # allocation-level peak of a step exported for "cuda" (memplan models
        # foreach there) against Adam(foreach=True) measured on the CPU.
        name = f"{label} Adam(foreach=True)"
        torch.manual_seed(mt.SEED)
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, batch, shape)
        target = mt.make_target(model, inputs)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
        measured, stack = measure(model, inputs, target, opt)
        est = mt.estimate(model, inputs, target=target, optimizer=opt, device="cuda")
        err = (est.peak_bytes - measured) / measured
        detail = (f"predicted {est.peak_bytes} for cuda ({est.report.get('peak_op')}), "
                  f"measured {measured} ({stack}), error {100 * err:+.4f}%")
        print(f"     {name}: {detail}", flush=True)
        check(f"{name}: within {100 * TOLERANCE:g}%", abs(err) <= TOLERANCE, detail)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
