"""Helpers of bench/peers.py: PyTorch's own memory tools run on the same
training steps as memplan (memplan.torch), so their
figures can be set side by side. Nothing here is measured by a formula of our
own: every peak comes from torch.profiler memory events of a real CPU step
(memplan.torch.measure, or measure_adam_step below, which follows it and adds
an optimizer step), every estimate from the peer's own code.

  LossStep(model)             model + loss as one module, for torch.compile
  compiled_model(...)         torch.compile of a fresh model at one
                              torch._functorch.config.activation_memory_budget
  measure_adam_step(...)      peak of forward + loss + backward + Adam.step()
  memtracker_peak(...)        torch.distributed._tools.mem_tracker.MemTracker
  accelerate_estimate(model)  accelerate estimate-memory's training figure
  deepspeed_zero2_estimate(n) DeepSpeed's formula, re-implemented:
                              estimate_zero2_model_states_mem_needs
  TorchSacIlp                 SACEstimator + MemTracker + RuntimeEstimator ->
                              sac_milp -> per-module SAC policies, applied with
                              torch.utils.checkpoint
"""
import contextlib
import gc
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import memplan.torch as mt  # noqa: E402

ADAM = dict(lr=1e-3, foreach=False)  # single-tensor Adam: what memplan --optimizer adam models


class LossStep(nn.Module):
    """forward(*inputs, target) -> the step's loss (memplan.torch.step_loss), so
    torch.compile sees forward and loss as one graph; memplan.torch.measure
    and bench/torch_models.step_seconds run it as a model that returns its loss."""

    memplan_returns_loss = True

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, *args):
        *inputs, target = args
        return mt.step_loss(self.m, inputs, target)


def compiled_model(spec, backend, budget):
    """A fresh model of `spec` (same seed, same weights) compiled with
    `backend` at activation_memory_budget `budget`. Dynamo is reset and the
    on-disk AOTAutograd/FX graph caches are off, so every budget is partitioned
    anew (inductor's kernel cache stays: kernels compiled before are reused)."""
    torch._dynamo.reset()
    torch._functorch.config.activation_memory_budget = budget
    torch._functorch.config.enable_autograd_cache = False
    torch._inductor.config.fx_graph_cache = False
    torch._inductor.config.compile_threads = 1  # 2 shared cores: no compile worker pool
    model = mt.load_model(spec)
    return torch.compile(LossStep(model), backend=backend)


def measure_adam_step(model, inputs, target, threads=1):
    """memplan.torch.measure with a torch.optim.Adam(foreach=False) step after
    the backward: peak of one step (grads None before it) after one unmeasured
    warm-up step that makes Adam's state; resident = parameters, buffers,
    inputs, target and the optimizer state."""
    from torch.profiler import ProfilerActivity, profile
    opt = torch.optim.Adam(model.parameters(), **ADAM)
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        def step():
            model.zero_grad(set_to_none=True)
            loss = mt.step_loss(model, inputs, target)
            loss.backward()
            opt.step()
            return loss

        torch.manual_seed(mt.SEED + 3)
        step()
        model.zero_grad(set_to_none=True)
        gc.collect()
        state = [t for s in opt.state.values() for t in s.values()
                 if isinstance(t, torch.Tensor)]
        resident = mt._measure._tensor_bytes(list(model.parameters()) + list(model.buffers())
                                    + list(inputs) + [target] + state)
        torch.manual_seed(mt.SEED + 3)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss = step()
            del loss
    finally:
        torch.set_num_threads(prev)
    peak, end, n = mt._measure._peak_from_kineto(prof)
    return {"peak_bytes": resident + peak, "resident_bytes": resident,
            "optimizer_state_bytes": mt._measure._tensor_bytes(state), "memory_events": n}


def _fake_setup(spec, batch, input_shape):
    """(fake mode, fake model, fake inputs, fake target): the model and inputs
    built under FakeTensorMode (no data), the target made for real (make_target
    deep-copies the model, which FakeTensorMode does not allow) and converted."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    real = mt.load_model(spec)
    rin = mt.example_inputs(real, batch, input_shape)
    rtarget = mt.make_target(real, rin)
    del real
    fm = FakeTensorMode()
    with fm:
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, batch, input_shape)
        target = fm.from_tensor(rtarget)
    return fm, model, inputs, target


def memtracker_peak(spec, batch, input_shape, fake=True):
    """MemTracker's peak ("Total" of its peak snapshot) of two steps with Adam
    (the first makes the state; stats reset after it), as in PyTorch's
    test_sac_ilp.py: under FakeTensorMode (no data) or on real tensors."""
    from torch.distributed._tools.mem_tracker import MemTracker
    if fake:
        fm, model, inputs, target = _fake_setup(spec, batch, input_shape)
        ctx = fm
    else:
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, batch, input_shape)
        target = mt.make_target(model, inputs)
        ctx = contextlib.nullcontext()
    with ctx:
        opt = torch.optim.Adam(model.parameters(), **ADAM)
        tracker = MemTracker()
        tracker.track_external(model, opt)
        with tracker as t:
            for i in range(2):
                model.zero_grad(set_to_none=True)
                loss = mt.step_loss(model, inputs, target)
                loss.backward()
                opt.step()
                del loss
                if i == 0:
                    t.reset_mod_stats()
        snap = tracker.get_tracker_snapshot("peak")
    dev = snap[torch.device("cpu")]
    return {"peak_bytes": int(dev["Total"]),
            "by_kind": {str(getattr(k, "value", k)): int(v) for k, v in dev.items()}}


def accelerate_estimate(model):
    """accelerate's `accelerate estimate-memory` figures, from its own code
    (accelerate.commands.estimate): the model's size (calculate_maximum_sizes:
    parameters and buffers) and its "Training using Adam" column, the largest
    entry of estimate_training_usage(size, "float32")."""
    import accelerate
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes
    total, _largest = calculate_maximum_sizes(model)
    usage = estimate_training_usage(total, "float32")
    return {"version": accelerate.__version__, "model_bytes": int(total),
            "training_adam_bytes": int(max(usage.values())),
            "parts": {k: int(v) for k, v in usage.items()}}


def deepspeed_zero2_estimate(total_params, num_gpus_per_node=1, num_nodes=1,
                             cpu_offload=False, additional_buffer_factor=1.5):
    """DeepSpeed's formula, re-implemented (its function is not run): the
    arithmetic of estimate_zero2_model_states_mem_needs
    (deepspeed/runtime/zero/stage_1_and_2.py), written out because deepspeed
    is not installed here:
        gpu = 4 * params + int(16 * params / total_gpus)      (no offload)
        gpu = 2 * params                                      (cpu_offload)
    Returns (cpu_mem, gpu_mem) in bytes as it does."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 4 * total_params + int(16 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def model_to_params(model):
    """DeepSpeed's model_to_params: shared parameters counted once."""
    return sum(dict((p.data_ptr(), p.numel()) for p in model.parameters()).values())


# --------------------------------------------------------------------------
# PyTorch's automatic SAC: SACEstimator + sac_milp
# --------------------------------------------------------------------------
@contextlib.contextmanager
def accelerator_pretend():
    """The workaround that lets the roofline estimators run on a CPU-only
    machine: torch.accelerator.is_available() answers True while they run
    (their only use of it is that guard; with gpu_type pinned, the roofline
    reads an H100 datasheet instead of the device)."""
    orig = torch.accelerator.is_available
    torch.accelerator.is_available = lambda: True
    try:
        yield
    finally:
        torch.accelerator.is_available = orig


class TorchSacIlp:
    """PyTorch's SAC pipeline (as test/distributed/_tools/test_sac_ilp.py runs
    it) on one model's step: under FakeTensorMode, MemTracker (2 steps with
    Adam), RuntimeEstimator and SACEstimator (mode `mode`), aggregate_stats ->
    parse_module_info -> sac_milp(budget) -> per chosen module,
    get_optimal_checkpointing_policy_per_module(1 - discard ratio)."""

    def __init__(self, spec, batch, input_shape, mode="operator-level-cost-model",
                 gpu_type=None, dedup_order=False):
        from torch.distributed._tools.ilp_utils import aggregate_stats, parse_module_info
        from torch.distributed._tools.mem_tracker import MemTracker, _ModState
        from torch.distributed._tools.runtime_estimator import RuntimeEstimator
        from torch.distributed._tools.sac_estimator import SACEstimator
        import copy
        fm, model, inputs, target = _fake_setup(spec, batch, input_shape)
        with fm:
            opt = torch.optim.Adam(model.parameters(), **ADAM)

            def one_step():
                model.zero_grad(set_to_none=True)
                mt.step_loss(model, inputs, target).backward()
                opt.step()

            tracker = MemTracker()
            tracker.track_external(model, opt)
            last = None
            with tracker as t:
                for i in range(2):
                    model.zero_grad(set_to_none=True)
                    mt.step_loss(model, inputs, target).backward()
                    if i == 1:
                        last = t.get_tracker_snapshot("current")
                    opt.step()
                    if i == 0:
                        t.reset_mod_stats()
            for st in tracker.memory_tracking.values():  # as the test does
                if _ModState.POST_BW not in st.snapshots:
                    st.snapshots.setdefault(_ModState.POST_BW, []).append(copy.deepcopy(last))
            one_step()
            runtime = RuntimeEstimator(gpu_type=gpu_type) if gpu_type else RuntimeEstimator()
            with runtime(estimate_mode_type=mode):
                one_step()
            sac = SACEstimator(gpu_type=gpu_type) if gpu_type else SACEstimator()
            model.zero_grad(set_to_none=True)
            with sac(estimate_mode_type=mode):
                loss = mt.step_loss(model, inputs, target)
            loss.backward()
            info = aggregate_stats(model, tracker, runtime, sac, torch.device("cpu"))
        order = info["mod_order"]
        twice = sorted({f for f in order["fw_pre_order"] if order["fw_pre_order"].count(f) > 1})
        self.called_twice = twice
        if twice and dedup_order:
            # Workaround: a module called more than once per step (a dropout
            # or ReLU module reused) is listed once per call in the orders but
            # has one stats entry, which parse_module_info asserts against;
            # keep each module's first call.
            for key in order:
                order[key] = list(dict.fromkeys(order[key]))
        try:
            self.graph = parse_module_info(info)
        except AssertionError as e:
            raise AssertionError(
                f"ilp_utils.parse_module_info: AssertionError{(' ' + str(e)) if str(e) else ''}"
                f" (len(mod_stats) {len(info['mod_stats'])} != len(fw_pre_order) "
                f"{len(order['fw_pre_order'])}: modules called more than once per step: "
                f"{', '.join(twice[:4])}{' ...' if len(twice) > 4 else ''})") from e
        self.sac_stats = dict(sac.sac_mod_stats)
        self.root = type(model).__name__

    def baseline(self):
        from torch.distributed._tools.ilp_utils import get_peak_memory_runtime_baseline
        peak, runtime = get_peak_memory_runtime_baseline(self.graph)
        return int(peak), float(runtime)

    def solve(self, budget_bytes):
        """sac_milp at budget_bytes (it takes GiB) -> (decisions {module path:
        [1 save / 0 recompute per op]}, discard ratios, recompute ms, ILP peak)."""
        from torch.distributed._tools.sac_ilp import (
            get_optimal_checkpointing_policy_per_module, sac_milp)
        ratios, recompute, peak = sac_milp(self.graph, memory_budget=budget_bytes / 2 ** 30)
        decisions, self.unset = {}, []
        for fqn, r in ratios.items():
            try:
                pol = get_optimal_checkpointing_policy_per_module(self.sac_stats[fqn],
                                                                  memory_budget=1.0 - r)
            except TypeError:
                # Workaround: PuLP leaves varValue None for an op variable in
                # no constraint with zero memory and runtime (its value does
                # not matter), and the function's round(None) raises; read
                # those as 0 (recompute) and solve again.
                import builtins
                import torch.distributed._tools.sac_ilp as sac_ilp
                sac_ilp.round = lambda v, *a: 0 if v is None else builtins.round(v, *a)
                try:
                    pol = get_optimal_checkpointing_policy_per_module(self.sac_stats[fqn],
                                                                      memory_budget=1.0 - r)
                finally:
                    del sac_ilp.round
                self.unset.append(fqn)
            if not pol:
                raise RuntimeError(
                    f"get_optimal_checkpointing_policy_per_module({fqn}, memory_budget="
                    f"{1.0 - r:.4f}) returned [] (its MILP found no solution; sac_milp had "
                    f"chosen discard ratio {r})")
            path = fqn.split(".", 1)[1] if "." in fqn else ""
            decisions[path] = {"policy": pol, "ops": list(self.sac_stats[fqn].func_names)}
        return decisions, {k.split(".", 1)[-1]: v for k, v in ratios.items()}, recompute, peak


class _IndexPolicy:
    """SAC policy of one checkpointed module call: the k-th op the estimator
    recorded (OPS_TO_ALWAYS_SKIP left out, as SACEstimator does) gets the k-th
    decision; a different op at position k raises."""

    def __init__(self, path, decision):
        from torch.distributed._tools.sac_estimator import OPS_TO_ALWAYS_SKIP
        self.skip = OPS_TO_ALWAYS_SKIP
        self.path, self.pol, self.ops, self.pos = path, decision["policy"], decision["ops"], 0

    def __call__(self, ctx, func, *args, **kwargs):
        from torch.utils.checkpoint import CheckpointPolicy
        if func in self.skip:
            return CheckpointPolicy.PREFER_RECOMPUTE
        k = self.pos
        self.pos += 1
        if k >= len(self.ops) or func._overloadpacket.__name__ != self.ops[k]:
            want = self.ops[k] if k < len(self.ops) else "(end)"
            raise RuntimeError(f"torch SAC policy of {self.path!r}: eager op #{k} is {func}, "
                               f"SACEstimator recorded {want}")
        return CheckpointPolicy.MUST_SAVE if self.pol[k] else CheckpointPolicy.PREFER_RECOMPUTE


def apply_torch_sac(model, decisions):
    """Wraps each decided module in torch.utils.checkpoint with its SAC
    policy (a fresh _IndexPolicy per call). Returns the wrapped paths."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
    for path, dec in decisions.items():
        mod = model.get_submodule(path) if path else model
        inner = mod.forward

        def fwd(*args, _inner=inner, _path=path, _dec=dec, **kwargs):
            def ctx():
                return create_selective_checkpoint_contexts(_IndexPolicy(_path, _dec),
                                                            allow_cache_entry_mutation=True)
            return checkpoint(_inner, *args, use_reentrant=False, context_fn=ctx, **kwargs)
        mod.forward = fwd
    return list(decisions)
