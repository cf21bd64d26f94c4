#!/usr/bin/env python3
"""Per-rank memory of one distributed training step on this machine's CPUs
(torch.distributed, gloo, localhost processes), against `memplan analyze
--parallel ...` (issue 17).

For each model (the exporter's GPT `models:gpt_small`, torchvision resnet18 at
3x64x64; issue 31's Mistral-style causal LM with an untied embedding and
lm_head, DDP and FSDP only) and each strategy -- DDP (gradient_as_bucket_view False / True),
ZeRO-1 (ZeroRedundancyOptimizer over Adam, DDP for the gradients), FSDP2
(fully_shard per block then the root; reshard_after_forward True / False;
bf16 MixedPrecisionPolicy), FSDP1 (FULL_SHARD, SHARD_GRAD_OP) at world sizes
2 and 4, and torch.distributed.pipelining (GPipe, 1F1B; 2 stages, 4
micro-batches) -- every rank measures ONE steady-state training step
(forward, loss, backward, Adam step) the way `memplan.torch.measure` does
(torch.profiler CPU [memory] events, one intra-op thread), PLUS the bytes
already alive when the step starts (parameters or their shards, DDP's buckets,
optimizer state, inputs). A strategy that does not run on CPU/gloo is
recorded with its exception text.

Each configuration runs in its own subprocess, which forks one process per
rank (MASTER_ADDR=127.0.0.1, a free port). Results: bench/results/parallel.json
(every number) and bench/results/parallel.md (tables).

Usage (with .venv/bin/python; bench/parallel_gloo.sh runs it all):
  bench/parallel_gloo.py [--quick] [--memplan build/cli/memplan] [--work DIR]
  bench/parallel_gloo.py --predict-only   # re-run only the memplan predictions
                                          # against the measurements saved in
                                          # bench/results/parallel.json
"""
import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402
RESULTS = os.path.join(ROOT, "bench", "results")

# name -> spec, per-sample input shape (None: the model's example_input),
# per-rank batch, the block class wrapped by FSDP, the scope depth of one
# block (memplan --fsdp-depth: "h.0", "layer1.0"), the module where the
# pipeline's second stage begins (memplan --pp-split; _pipeline_stage).
# "strategies": the only ones run (default: all). Every step measured here
# drops the model's output before the backward, and is exported so
# (hold_outputs=False).
MODELS = {
    "gpt_small": {"spec": "models:gpt_small", "input_shape": None, "batch": 4,
                  "block": "GPTBlock", "fsdp_depth": 2, "pp_split": "h.2"},
    "resnet18": {"spec": "torchvision:resnet18", "input_shape": [3, 64, 64], "batch": 4,
                 "block": "BasicBlock", "fsdp_depth": 2, "pp_split": "layer3"},
    # Issue 31's held-out check: a Mistral-style causal LM (GQA, untied
    # embedding and lm_head, 4 MiB each), the model's own loss.
    "mistral_untied": {"spec": "hf:mistral:hidden_size=128,intermediate_size=344,"
                               "num_hidden_layers=2,num_attention_heads=4,"
                               "num_key_value_heads=2,vocab_size=8192,seq=128",
                       "input_shape": None, "batch": 4, "block": "MistralDecoderLayer",
                       "fsdp_depth": 4, "pp_split": None,
                       "strategies": ["ddp", "fsdp2", "fsdp1"]},
}
PP_STAGES, PP_MICROBATCHES, PP_BATCH = 2, 4, 8  # pipeline: global batch 8, micro-batches of 2
WARMUP_STEPS = 2  # DDP and ZeRO-1 (DDP rebuilds its buckets in its 2nd iteration); others 1
LR = 1e-3

# (strategy, options) in table order
STRATEGIES = [
    ("ddp", {"bucket_view": False}),
    ("ddp", {"bucket_view": True}),
    ("zero1", {}),
    ("fsdp2", {"reshard_after_forward": True}),
    ("fsdp2", {"reshard_after_forward": False}),
    ("fsdp2", {"reshard_after_forward": True, "param_dtype": "bfloat16"}),
    ("fsdp1", {"sharding": "FULL_SHARD"}),
    ("fsdp1", {"sharding": "SHARD_GRAD_OP"}),
    ("pipeline", {"schedule": "GPipe"}),
    ("pipeline", {"schedule": "1F1B"}),
]


def label(strategy, opts):
    if strategy == "ddp":
        return f"DDP bucket_view={opts['bucket_view']}"
    if strategy == "zero1":
        return "ZeRO-1 (ZeroRedundancyOptimizer(Adam) + DDP)"
    if strategy == "fsdp2":
        s = f"FSDP2 reshard_after_forward={opts['reshard_after_forward']}"
        return s + (f" param_dtype={opts['param_dtype']}" if "param_dtype" in opts else "")
    if strategy == "fsdp1":
        return f"FSDP1 {opts['sharding']}"
    if strategy == "pipeline":
        return f"pipelining Schedule{opts['schedule']} ({PP_STAGES} stages, " \
               f"{PP_MICROBATCHES} micro-batches)"
    return strategy


# --------------------------------------------------------------------------
# Measurement (runs in the rank processes)
# --------------------------------------------------------------------------
def _mem_events(prof):
    import torch
    evs = [e for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    key = (lambda e: e.start_ns()) if evs and hasattr(evs[0], "start_ns") else \
        (lambda e: e.start_us())
    evs.sort(key=key)
    return evs


def _net(prof):
    return sum(e.nbytes() for e in _mem_events(prof))


def _local(t):
    """The local tensor of a DTensor (FSDP2's sharded parameters), else t."""
    return t.to_local() if hasattr(t, "to_local") and hasattr(t, "placements") else t


def _bytes(tensors):
    seen, n = set(), 0
    for t in tensors:
        t = _local(t)
        if t is None or t.is_meta:
            continue
        try:
            st = t.untyped_storage()
            key = (st.data_ptr(), st.nbytes())
        except Exception:  # noqa: BLE001 - a wrapper without storage
            continue
        if key not in seen:
            seen.add(key)
            n += st.nbytes()
    return n


def _visible_bytes():
    """Bytes of the distinct storages of every tensor the Python garbage
    collector can see (parameters, gradients, optimizer state, inputs; not
    tensors held only by C++, such as DDP's buckets)."""
    import torch
    import warnings
    ts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated module proxies warn on isinstance
        for o in gc.get_objects():
            try:
                if isinstance(o, torch.Tensor) and o.device.type == "cpu":
                    ts.append(o)
            except Exception:  # noqa: BLE001 - objects with odd __class__
                pass
    return _bytes(ts)


def _opt_state_bytes(opt):
    inner = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer: the local optimizer
    ts = []
    for s in inner.state.values():
        ts.extend(v for v in s.values() if hasattr(v, "untyped_storage") or hasattr(v, "to_local"))
    return _bytes(ts)


def _block_class(model, name):
    for m in model.modules():
        if type(m).__name__ == name:
            return type(m)
    raise ValueError(f"no {name} module in the model")


def _pipeline_stage(model, name, stage):
    """The stage's half of the model as one nn.Module (the other half dropped)."""
    import torch.nn as nn
    if name == "gpt_small":
        class First(nn.Module):
            def __init__(self, m, blocks):
                super().__init__()
                self.wte, self.wpe, self.drop = m.wte, m.wpe, m.drop
                self.h = nn.ModuleList(blocks)

            def forward(self, idx):
                import torch
                pos = torch.arange(idx.shape[1], device=idx.device)
                x = self.drop(self.wte(idx) + self.wpe(pos))
                for b in self.h:
                    x = b(x)
                return x

        class Last(nn.Module):
            def __init__(self, m, blocks):
                super().__init__()
                self.h = nn.ModuleList(blocks)
                self.ln_f, self.lm_head = m.ln_f, m.lm_head

            def forward(self, x):
                for b in self.h:
                    x = b(x)
                return self.lm_head(self.ln_f(x))

        half = len(model.h) // 2
        return First(model, list(model.h)[:half]) if stage == 0 else \
            Last(model, list(model.h)[half:])
    if name == "resnet18":
        class First(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.body = nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1, m.layer2)

            def forward(self, x):
                return self.body(x)

        class Last(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.body = nn.Sequential(m.layer3, m.layer4, m.avgpool)
                self.fc = m.fc

            def forward(self, x):
                return self.fc(self.body(x).flatten(1))

        return First(model) if stage == 0 else Last(model)
    raise ValueError(f"no pipeline split for {name}")


def _setup(cfg, rank, world):
    """Model, optimizer, inputs and a step() for one rank."""
    import torch
    import memplan.torch as mt
    from memplan.torch._spec import forward_and_loss
    m = MODELS[cfg["model"]]
    strategy, opts = cfg["strategy"], cfg["options"]
    model = mt.load_model(m["spec"])
    shape = tuple(m["input_shape"]) if m["input_shape"] else None
    batch = cfg["batch"]
    inputs = mt.example_inputs(model, batch, shape)
    target = mt.make_target(model, inputs)
    info = {}
    schedule = None
    if strategy == "single":
        opt = torch.optim.Adam(model.parameters(), lr=LR) if cfg.get("optimizer", True) else None
        run = model
    elif strategy in ("ddp", "zero1"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        run = DDP(model, gradient_as_bucket_view=opts.get("bucket_view", False))
        if strategy == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(run.parameters(), optimizer_class=torch.optim.Adam, lr=LR)
        else:
            opt = torch.optim.Adam(run.parameters(), lr=LR)
    elif strategy == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mesh = init_device_mesh("cpu", (world,))
        kw = {"mesh": mesh, "reshard_after_forward": opts["reshard_after_forward"]}
        if "param_dtype" in opts:
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=getattr(torch, opts["param_dtype"]))
        block = _block_class(model, m["block"])
        for mod in list(model.modules()):
            if isinstance(mod, block):
                fully_shard(mod, **kw)
        fully_shard(model, **kw)
        run = model
        opt = torch.optim.Adam(model.parameters(), lr=LR)
    elif strategy == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        run = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({_block_class(model, m["block"])}),
                   sharding_strategy=getattr(ShardingStrategy, opts["sharding"]),
                   device_id=torch.device("cpu"))
        opt = torch.optim.Adam(run.parameters(), lr=LR)
    elif strategy == "pipeline":
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
        run = _pipeline_stage(model, cfg["model"], rank)
        del model
        stage = PipelineStage(run, rank, world, torch.device("cpu"))
        cls = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[opts["schedule"]]
        schedule = cls(stage, n_microbatches=PP_MICROBATCHES, loss_fn=mt.loss_fn)
        opt = torch.optim.Adam(run.parameters(), lr=LR)
        if rank != 0:
            inputs = ()
        if rank != world - 1:
            target = None
    else:
        raise ValueError(strategy)

    def step():
        if schedule is not None:
            if rank == 0:
                schedule.step(*inputs)
            else:
                losses = []
                schedule.step(target=target, losses=losses)
                del losses
        else:
            # The exporter's step (hf: models compute their own loss); the
            # output dropped before the backward.
            out, loss = forward_and_loss(run, inputs, target)
            del out
            loss.backward()
            del loss
        if opt is not None:
            opt.step()

    def zero():
        run.zero_grad(set_to_none=True)

    info["param_bytes"] = _bytes(run.parameters())
    info["buffer_bytes"] = _bytes(run.buffers())
    return {"run": run, "opt": opt, "inputs": inputs, "target": target, "step": step,
            "zero": zero, "info": info}


def _alloc_events(prof):
    """[(time_ns, ptr, +size | -size, "outermost op > innermost op")] of the CPU
    allocator, in time order (the profiler's event tree: the same events as
    _mem_events, with their addresses and the ops that made them)."""
    out = []

    def walk(n, stack):
        ef = n.extra_fields
        if hasattr(ef, "alloc_size") and ef.device.type == "cpu":
            where = (stack[0] if len(stack) == 1 else f"{stack[0]} > {stack[-1]}") \
                if stack else None
            out.append((n.start_time_ns, ef.ptr, ef.alloc_size, where))
            return
        for c in n.children:
            walk(c, stack + [n.name])

    for r in prof.profiler.kineto_results.experimental_event_tree():
        walk(r, [])
    out.sort(key=lambda e: e[0])
    return out


def _replay(events, live):
    """Replay allocator events over `live` (ptr -> bytes, changed in place).
    A block freed on another thread (a gloo worker dropping the last reference
    to a collective's tensor) never shows its free in the profiler, which
    records the profiling thread only; an allocation at an address still live
    proves such a free and closes the old block first. Returns (peak, reused
    bytes, bytes of frees of blocks not in `live`)."""
    r = _replay_step(events, live, None)
    return r["peak"], r["reused"], r["unknown"]


def _replay_step(events, live, vis_end, exclude=()):
    """_replay, and with vis_end (the storages visible after the step) the
    books: `lost` = blocks still counted at the end that back no visible
    tensor (freed on another thread, unseen; `exclude`: DDP's buckets, held by
    C++); the peak is `exact` when no lost or address-reused block was made
    before it (a free the profiler missed cannot have lowered it), `balanced`
    when there are none at all."""
    cur = sum(live.values())
    born = {p: -1 for p in live}  # event index of each counted block (-1: before the step)
    peak, peak_i, peak_at, reused, unknown = cur, -1, None, 0, 0
    doubt = []  # alloc indices of blocks whose free the profiler missed
    for i, (_, ptr, n, where) in enumerate(events):
        if n > 0:
            if ptr in live:
                reused += live[ptr]
                doubt.append(born[ptr])
                cur -= live.pop(ptr)
            live[ptr] = n
            born[ptr] = i
            cur += n
            if cur > peak:
                peak, peak_i, peak_at = cur, i, where
        elif ptr in live:
            cur -= live.pop(ptr)
        else:
            unknown -= n
    lost = 0
    if vis_end is not None:
        for p, n in live.items():
            if p not in vis_end and p not in exclude:
                lost += n
                doubt.append(born[p])
    return {"peak": peak, "peak_at": peak_at, "reused": reused, "unknown": unknown,
            "lost": lost, "balanced": not doubt, "exact": all(b > peak_i for b in doubt)}


def _held(st):
    """The tensors a step's state holds, touched from Python so that C++-made
    ones (gradients autograd made, never read from Python) get a Python object
    the gc scan can see."""
    run, ts = st["run"], []
    for p in run.parameters():
        ts.append(p)
        if p.grad is not None:
            ts.append(p.grad)
    ts.extend(run.buffers())
    if st["opt"] is not None:
        for s in getattr(st["opt"], "optim", st["opt"]).state.values():
            ts.extend(v for v in s.values() if hasattr(v, "untyped_storage"))
    ts.extend(st["inputs"])
    if st["target"] is not None:
        ts.append(st["target"])
    return ts


def _visible_storages(held=()):
    """ptr -> bytes of the distinct CPU storages of every tensor Python's gc
    can see (parameters or their shards, gradients, optimizer state, inputs,
    FSDP's padded shards; not tensors held only by C++, such as DDP's buckets)."""
    import warnings
    import torch
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated module proxies warn on isinstance
        for o in list(held) + gc.get_objects():
            try:
                if not isinstance(o, torch.Tensor):
                    continue
                t = _local(o)
                if t.device.type != "cpu" or t.is_meta:
                    continue
                st = t.untyped_storage()
                if st.nbytes() and st.data_ptr():
                    out[st.data_ptr()] = st.nbytes()
            except Exception:  # noqa: BLE001 - wrappers without storage, odd objects
                pass
    return out


def _ddp_buckets(run):
    """DDP's gradient bucket sizes in bytes, as DDP logs them (after its rebuild)."""
    logging = getattr(run, "_get_ddp_logging_data", None)
    if logging is None:
        return [], None
    data = logging()
    key = "rebuilt_bucket_sizes" if data.get("has_rebuilt_buckets") else "bucket_sizes"
    sizes = [int(x) for x in str(data.get(key, "")).replace(",", " ").split()]
    return sizes, {k: v for k, v in data.items() if "bucket" in k}


MEASURED_STEPS = 6


def measure_rank(cfg, rank, world):
    """One rank. Session A: build and wrap the model, make the inputs,
    warm-up steps (WARMUP_STEPS for DDP and ZeRO-1, else 1), gradients set to
    None, gc. Then steps, each profiled on its own (gradients set to None and
    gc between them, unprofiled), until every rank has had one whose peak is
    exact (MEASURED_STEPS at most):
      start = the distinct storages of gc-visible tensors + DDP's buckets (the
              blocks session A saw allocated, held only by C++, of the sizes
              DDP logs);
      peak  = the highest total while the step's allocator events are
              replayed over the start blocks (memplan.torch.measure's running
              sum, by address: see _replay_step);
      exact = no block made before the peak had its free missed by the
              profiler (freed on another thread: see _replay_step). The
              rank's first exact step is the measurement.
    Also kept: the plain running sum (memplan.torch.measure's arithmetic) and
    session A's net sum."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    gc.collect()
    t0 = time.time()
    ddp = cfg["strategy"] in ("ddp", "zero1")
    warmup = WARMUP_STEPS if ddp else 1
    # Session A is profiled only where the step's state includes tensors held
    # by C++ alone (DDP's buckets): they are found among the blocks it saw.
    with (profile(activities=[ProfilerActivity.CPU], profile_memory=True) if ddp
          else contextlib.nullcontext()) as pa:
        st = _setup(cfg, rank, world)
        for _ in range(warmup):
            st["step"]()
            st["zero"]()
        gc.collect()
    net_a = _net(pa) if ddp else None
    live_a = {}
    if ddp:
        _replay(_alloc_events(pa), live_a)
    del pa
    gc.collect()
    opt_bytes = _opt_state_bytes(st["opt"]) if st["opt"] is not None else 0
    io_bytes = _bytes(list(st["inputs"]) + ([st["target"]] if st["target"] is not None else []))
    raw = []
    had_exact = False
    for k in range(MEASURED_STEPS):
        gc.collect()
        vis = _visible_storages(_held(st))
        if world > 1:
            dist.barrier()
        t1 = time.time()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as pb:
            st["step"]()
            gc.collect()
        step_s = time.time() - t1
        evs = _mem_events(pb)
        cur = naive = 0
        for e in evs:
            cur += e.nbytes()
            naive = max(naive, cur)
        aevs = _alloc_events(pb)
        del pb
        vis_end = _visible_storages(_held(st))
        grads = _bytes(p.grad for p in st["run"].parameters() if p.grad is not None)
        raw.append((vis, aevs, vis_end, naive, cur, len(evs), grads, step_s))
        st["zero"]()
        # Exact? (DDP's buckets are never allocated in a steady step and are
        # not in `vis`: the check needs no bucket sizes.) Every rank stops at
        # the same step, once all have had one, so their collectives stay matched.
        had_exact = had_exact or _replay_step(aevs, dict(vis), vis_end)["exact"]
        done = had_exact
        if world > 1:
            flag = torch.tensor([1 if had_exact else 0])
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            done = bool(flag.item())
        if done:
            break
    if world > 1:
        dist.barrier()
    # DDP logs its rebuilt buckets one iteration late: read them after the steps.
    bucket_sizes, bucket_log = _ddp_buckets(st["run"])
    steps = []
    chosen = None
    for k, (vis, aevs, vis_end, naive, cur, n_evs, grads, step_s) in enumerate(raw):
        cxx = {p: n for p, n in live_a.items() if p not in vis}
        want = list(bucket_sizes)
        buckets = {}
        for p, n in sorted(cxx.items(), key=lambda x: -x[1]):
            if n in want:
                want.remove(n)
                buckets[p] = n
        start_map = {**vis, **buckets}
        start = sum(start_map.values())
        r = _replay_step(aevs, dict(start_map), vis_end, buckets)
        steps.append({
            "peak_bytes": r["peak"], "start_bytes": start, "peak_above_start": r["peak"] - start,
            "peak_at": r["peak_at"], "exact": r["exact"], "balanced": r["balanced"],
            "lost_bytes": r["lost"], "reused_address_bytes": r["reused"],
            "unknown_free_bytes": r["unknown"],
            "plain_running_sum_peak_above_start": naive, "plain_end_above_start": cur,
            "visible_start_bytes": sum(vis.values()),
            "ddp_bucket_bytes_at_start": sum(buckets.values()), "ddp_buckets_not_found": want,
            "session_a_blocks_not_counted_bytes": sum(n for p, n in cxx.items()
                                                      if p not in buckets),
            "grad_bytes_after_step": grads, "memory_events": n_evs,
            "step_seconds": round(step_s, 3)})
        if chosen is None and r["exact"]:
            chosen = k
    if chosen is None:
        chosen = min(range(len(steps)), key=lambda i: steps[i]["lost_bytes"]
                     + steps[i]["reused_address_bytes"])
    c = steps[chosen]
    return {
        "rank": rank,
        "peak_bytes": c["peak_bytes"],
        "start_bytes": c["start_bytes"],
        "peak_above_start": c["peak_above_start"],
        "exact": c["exact"],
        "peak_at": c["peak_at"],
        "measured_step": chosen + 1,
        "max_step_peak_bytes": max(x["peak_bytes"] for x in steps),
        "param_bytes": st["info"]["param_bytes"],
        "buffer_bytes": st["info"]["buffer_bytes"],
        "optimizer_state_bytes": opt_bytes,
        "input_target_bytes": io_bytes,
        "ddp_bucket_sizes": bucket_sizes,
        "ddp_logging_buckets": bucket_log,
        "session_a_net_bytes": net_a,
        "steps": steps,
        "setup_seconds": round(time.time() - t0, 2),
    }


def _rank_main(rank, world, port, cfg, out_dir):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)})
    res = {"rank": rank}
    try:
        if world > 1:
            dist.init_process_group("gloo", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=90))
        res = measure_rank(cfg, rank, world)
    except Exception as e:  # noqa: BLE001 - recorded, never skipped silently
        res["error"] = f"{type(e).__name__}: {e}"
        res["traceback"] = traceback.format_exc()[-4000:]
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(res, f)
        if world > 1 and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _import_once():
    """torch, torchvision and the exporter imported in the driver, before any
    fork (no torch op runs in the driver, so no thread pool is forked)."""
    import torch
    import memplan.torch  # noqa: F401
    import torchvision  # noqa: F401
    torch.set_num_threads(1)


def _forked(fn, nprocs, args, timeout):
    """fn(i, *args) in nprocs forked processes; (ok, why)."""
    import torch.multiprocessing as mp
    ctx = mp.start_processes(fn, args=args, nprocs=nprocs, start_method="fork", join=False)
    deadline = time.time() + timeout
    try:
        while not ctx.join(timeout=2):
            if time.time() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                return False, f"timed out after {timeout} s"
    except Exception as e:  # noqa: BLE001 - a process died
        return False, f"{type(e).__name__}: {e}"
    return True, None


def run_config(cfg, timeout=420):
    """Fork one process per rank (a fresh process for each configuration),
    collect what each wrote."""
    world = cfg["world_size"]
    t = time.time()
    with tempfile.TemporaryDirectory() as out:
        ok, why = _forked(_rank_main, world, (world, _free_port(), cfg, out), timeout)
        ranks = []
        for r in range(world):
            p = os.path.join(out, f"rank{r}.json")
            ranks.append(json.load(open(p)) if os.path.exists(p) else
                         {"rank": r, "error": why or "the rank wrote no result"})
    return ranks, round(time.time() - t, 1)


def _memplan_measure_child(_, cfg, path):
    import torch
    import memplan.torch as mt
    torch.set_num_threads(1)
    m = MODELS[cfg["model"]]
    model = mt.load_model(m["spec"])
    shape = tuple(m["input_shape"]) if m["input_shape"] else None
    inputs = mt.example_inputs(model, cfg["batch"], shape)
    with open(path, "w") as f:
        json.dump(mt.measure(model, inputs, mt.make_target(model, inputs), hold_outputs=False),
                  f)


def single_memplan_measure(cfg):
    """memplan.torch.measure (no optimizer) on the same model and batch in a
    forked process: a cross-check that this script's accounting matches
    memplan's."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.json")
        ok, why = _forked(_memplan_measure_child, 1, (cfg, path), 300)
        if not os.path.exists(path):
            return {"error": why or "no result"}
        return json.load(open(path))


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------
def export_graph(name, work):
    path = os.path.join(work, f"{name}.graph.json")
    if os.path.exists(path):
        return path, None
    cmd = [sys.executable, os.path.abspath(__file__), "--export", name, "--work", work]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr[-2000:]
    return path, None


def do_export(name, work):
    import torch
    import memplan.torch as mt
    torch.set_num_threads(1)
    m = MODELS[name]
    model = mt.load_model(m["spec"])
    shape = tuple(m["input_shape"]) if m["input_shape"] else None
    # Op workspaces measured (the exporter runs each op once and records its
    # scratch, e.g. the CPU convolution backward's); the step is not measured.
    g, st = mt.export_symbolic(model, m["batch"], shape, name=name, workspace="measure",
                               hold_outputs=False)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, f"{name}.graph.json"), "w") as f:
        f.write(mt.dumps(g))
    print(json.dumps({"ops": len(g["ops"]), "symbols": st.get("symbols")}))


def memplan_args(row):
    """The `memplan analyze` flags for a row, or (None, why)."""
    s, o, n = row["strategy"], row["options"], row["world_size"]
    if s == "single":
        return [], None
    if s == "ddp":
        return ["--parallel", "ddp", "--world-size", str(n)] + \
            (["--ddp-bucket-view"] if o["bucket_view"] else []), None
    if s == "zero1":
        return ["--parallel", "zero1", "--world-size", str(n)], None
    if s in ("fsdp2", "fsdp1"):
        reshard = o["reshard_after_forward"] if s == "fsdp2" else o["sharding"] == "FULL_SHARD"
        return ["--parallel", "fsdp", "--world-size", str(n), "--fsdp-reshard-after-forward",
                "true" if reshard else "false", "--fsdp-depth",
                str(MODELS[row["model"]]["fsdp_depth"])] + \
            (["--fsdp-param-dtype", o["param_dtype"]] if "param_dtype" in o else []), None
    if s == "pipeline":
        return ["--parallel", "pipeline", "--pp-stages", str(PP_STAGES), "--micro-batches",
                str(PP_MICROBATCHES), "--pp-schedule", o["schedule"].lower(), "--pp-split",
                MODELS[row["model"]]["pp_split"]], None
    return None, f"no memplan flags for {s}"


def predict(row, binary, graph):
    args, why = memplan_args(row)
    if args is None:
        row["prediction"] = {"unavailable": why}
        return
    if graph is None:
        row["prediction"] = {"unavailable": "no exported graph"}
        return
    with open(graph) as f:
        symbols = json.load(f).get("symbols") or {}
    # A pipeline's graph is one micro-batch.
    batch = row["batch"] // PP_MICROBATCHES if row["strategy"] == "pipeline" else row["batch"]
    sets = ["--set", f"batch={batch}"] if "batch" in symbols else []
    preds = []
    ranks = row.get("ranks") or [{"rank": 0}]
    for r in ranks:
        extra = ["--rank", str(r["rank"])] if row["strategy"] != "single" else []
        with tempfile.NamedTemporaryFile(suffix=".json") as rep:
            cmd = [binary, "analyze", graph, *sets, "--optimizer", "adam", *args, *extra,
                   "--json", rep.name, "-q"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as e:
                row["prediction"] = {"unavailable": f"{type(e).__name__}: {e}",
                                     "command": " ".join(cmd)}
                return
            if p.returncode != 0:
                row["prediction"] = {"unavailable": f"exit {p.returncode}: {p.stderr.strip()}",
                                     "command": " ".join(cmd)}
                return
            rj = json.load(open(rep.name))
        pr = {"rank": r["rank"], "peak_bytes": rj["peak_bytes"],
              "resident_bytes": rj.get("resident_bytes"), "peak_phase": rj.get("peak_phase"),
              "peak_op": rj.get("peak_op"),
              "parallel": (rj.get("graph") or {}).get("parallel")}
        if r.get("peak_bytes"):
            pr["error"] = (rj["peak_bytes"] - r["peak_bytes"]) / r["peak_bytes"]
        preds.append(pr)
    row["prediction"] = {"command": " ".join(cmd), "ranks": preds}


def machine():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB RAM"
                break
    except OSError:
        pass
    return f"{platform.node()}: {cpu}, {os.cpu_count()} logical CPUs, {mem}, " \
           f"{platform.system()} {platform.release()}"


COUNTED = (
    "Per rank, **peak** = the most bytes held in CPU-allocator blocks at any moment of ONE "
    "training step (forward, cross-entropy loss, backward, Adam `step()`; gradients set to "
    "None before it), the blocks alive when the step starts included. **Alive at start** = "
    "the distinct storages of every tensor the rank's state holds that Python can reach "
    "(`gc.get_objects()` plus the module's parameters and gradients, the optimizer's state, "
    "the inputs and targets: parameters or their local shards with FSDP's padding, buffers, "
    "optimizer state, pipeline-stage buffers) + DDP's gradient buckets, which only C++ holds "
    "(the allocator blocks of the sizes DDP logs in `_get_ddp_logging_data()`, found among "
    "the blocks a profiled setup session saw allocated and still alive). **During the step** "
    "`torch.profiler` (`profile_memory=True`) records each CPU allocation and free made on "
    "the rank's main thread (which runs forward, backward -- CPU autograd runs on the "
    "calling thread -- and the optimizer, and issues every collective); the events are "
    "replayed by address over the start blocks and the highest total is the peak: "
    "`memplan.torch.measure`'s running sum, kept by address. Warm-up: 1 step (DDP and ZeRO-1: "
    f"{WARMUP_STEPS}, DDP rebuilds its buckets in its second iteration); one intra-op thread "
    "per process; each configuration in freshly forked processes. **Exact steps**: when a "
    "gloo worker thread drops the last reference to a collective's tensor, the tensor is "
    "freed on that thread and the profiler never sees the free; such a block is found at "
    "the step's end (counted, yet backing no live tensor) or when its address is allocated "
    "again. A step's peak is exact when no such block was made before the peak. Each "
    f"rank's figure is its first exact step (steps are repeated, up to {MEASURED_STEPS}, "
    "until every rank has had one; `(not exact)` marks a rank that had none, its figure "
    "then from the step with the fewest such bytes); in other steps the block stays "
    "counted until its address is reused, an upper bound (`max over steps` below and in the "
    "JSON). Not counted: memory gloo allocates outside c10's allocator, Python "
    "objects, the allocator's own overhead. `single`: the same model, batch, optimizer and "
    "method in one process with no process group. memplan's figure: `peak_bytes` of "
    "`memplan analyze GRAPH --set batch=B --optimizer adam [--parallel ... --world-size N "
    "--rank R ...]`, GRAPH exported once per model by `memplan.torch.export_symbolic`; "
    "error = (predicted - measured) / measured.")


def mib(b):
    return "" if b is None else f"{b / 2**20:.2f}"


def _memplan_at(p):
    if not p:
        return ""
    op = p.get("peak_op")
    if isinstance(op, dict):
        op = op.get("name") or op.get("id")
    return f"{p.get('peak_phase') or ''}: {op or ''}".replace("|", "/")


def _rank_groups(row, pranks):
    """Ranks with identical figures in one table line."""
    groups = []
    for rk in row["ranks"]:
        p = pranks.get(rk["rank"], {}).get("peak_bytes")
        key = (rk["peak_bytes"], rk["start_bytes"], rk["param_bytes"],
               rk["optimizer_state_bytes"], rk["max_step_peak_bytes"], rk["exact"],
               rk["peak_at"], p)
        for g in groups:
            if g[0] == key:
                g[1].append(rk)
                break
        else:
            groups.append((key, [rk]))
    return [g[1] for g in groups]


def _checks(rows, name):
    """Sanity checks computed from the measurements."""
    out = []
    single = next((r for r in rows if r["model"] == name and r["strategy"] == "single"
                   and r["batch"] == MODELS[name]["batch"] and not r.get("no_optimizer_check")
                   and not r.get("error")), None)
    if single is None:
        return out
    s0 = single["ranks"][0]
    for r in rows:
        if r["model"] != name or r.get("error"):
            continue
        k = r["ranks"][0]
        if r["strategy"] == "ddp":
            buckets = k["steps"][k["measured_step"] - 1]["ddp_bucket_bytes_at_start"]
            where = "held by C++ alone, counted from the allocator's blocks" if buckets else \
                "reachable from Python, counted among the visible storages"
            out.append(f"- {label(r['strategy'], r['options'])} N={r['world_size']}: peak - "
                       f"single peak = {mib(k['peak_bytes'] - s0['peak_bytes'])} MiB; DDP's "
                       f"buckets {', '.join(mib(b) for b in k['ddp_bucket_sizes'])} MiB "
                       f"(sum {mib(sum(k['ddp_bucket_sizes']))} MiB; {where}).")
        if r["strategy"] == "zero1":
            st = [x["optimizer_state_bytes"] for x in r["ranks"]]
            frac = "/".join(f"{x / s0['optimizer_state_bytes']:.3f}" for x in st)
            out.append(f"- ZeRO-1 N={r['world_size']}: optimizer state per rank "
                       f"{'/'.join(mib(x) for x in st)} MiB = {frac} "
                       f"of the single process's {mib(s0['optimizer_state_bytes'])} MiB "
                       f"(1/N = {1 / r['world_size']:.3f}).")
        if r["strategy"] in ("fsdp2", "fsdp1"):
            out.append(f"- {label(r['strategy'], r['options'])} N={r['world_size']}: local "
                       f"parameters {mib(k['param_bytes'])} MiB = "
                       f"{k['param_bytes'] / s0['param_bytes']:.3f} of the model's "
                       f"{mib(s0['param_bytes'])} MiB (1/N = {1 / r['world_size']:.3f}).")
    return out


def write_md(doc, path):
    L = ["# Per-rank memory of one distributed training step (torch.distributed, gloo, CPU)",
         "",
         f"- date: {doc['date']}",
         f"- machine: {doc['machine']}",
         f"- torch {doc['torch']}, Python {doc['python']}, commit {doc['commit']}",
         f"- run: `{doc['command']}` ({doc['seconds']} s); memplan predictions "
         f"`{doc.get('memplan')}` at {doc.get('predicted_at', 'never')}",
         "- models: " + "; ".join(f"`{n}` = {m['spec']}"
                                  + (f" at {'x'.join(map(str, m['input_shape']))}"
                                     if m['input_shape'] else "")
                                  + f", per-rank batch {m['batch']}"
                                  for n, m in doc["models"].items()),
         f"- FSDP wraps each `{'` / `'.join(m['block'] for m in doc['models'].values())}` "
         "then the root (FSDP1: `ModuleWrapPolicy`, `device_id=cpu`; FSDP2: `fully_shard` "
         "on a 1-D CPU `DeviceMesh`); ZeRO-1 = `ZeroRedundancyOptimizer(optimizer_class=Adam)` "
         "over DDP (`bucket_cap_mb` 25, `gradient_as_bucket_view=False`); pipelining: "
         f"{PP_STAGES} stages (gpt_small: embeddings + h.0-1 | h.2-3 + ln_f + lm_head; "
         "resnet18: conv1..layer2 | layer3..fc; `params` in the tables: each stage's), "
         f"the loss on the last stage, global batch {PP_BATCH} in "
         f"{PP_MICROBATCHES} micro-batches; every data-parallel rank steps on the same "
         "seeded samples (their values do not change memory)",
         "", "**What is counted.** " + doc["counted"], ""]
    rows = doc["rows"]
    L += ["## What runs on CPU/gloo (torch " + doc["torch"] + ")", "",
          "| strategy | runs? | configurations |", "| --- | --- | --- |"]
    seen = {}
    for r in rows:
        if r["strategy"] != "single":
            seen.setdefault(label(r["strategy"], r["options"]), []).append(r)
    for key, rs in seen.items():
        ok = [r for r in rs if not r.get("error")]
        cfgs = ", ".join(f"{r['model']} N={r['world_size']}" + (" (fails)" if r.get("error")
                                                                 else "") for r in rs)
        runs = "yes" if len(ok) == len(rs) else ("no" if not ok else "partly")
        L.append(f"| {key} | {runs} | {cfgs} |")
    L.append("")
    fails = [r for r in rows if r.get("error")]
    if fails:
        L += ["### Exceptions (exact text)", ""]
        done = set()
        for r in fails:
            k = (label(r["strategy"], r["options"]), r["error"])
            if k in done:
                continue
            done.add(k)
            same = [f"{x['model']} N={x['world_size']}" for x in fails
                    if (label(x["strategy"], x["options"]), x["error"]) == k]
            L += [f"**{k[0]}** ({', '.join(same)}):", "", "```", r["error"][:3000], "```"]
            if r.get("where"):
                L += ["raised at:", "", "```", r["where"], "```"]
            L.append("")
    else:
        L += ["Every configuration ran; no exception to record.", ""]
    for name in doc["models"]:
        mr = [r for r in rows if r["model"] == name]
        if not mr:
            continue
        L += [f"## {name}", "",
              "| configuration | N | ranks | peak MiB | alive at start MiB | params MiB | "
              "optimizer state MiB | peak / single | max over steps MiB | predicted MiB | "
              "error | measured peak during | memplan's peak |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in mr:
            name_s = "single (no process group)" if r["strategy"] == "single" else \
                label(r["strategy"], r["options"])
            if r.get("no_optimizer_check"):
                name_s += ", no optimizer (method check)"
            if r["batch"] != MODELS[name]["batch"] or r["strategy"] == "pipeline":
                name_s += f", batch {r['batch']}"
            if r.get("error"):
                L.append(f"| {name_s} | {r['world_size']} | | fails (above) "
                         "| | | | | | | | | |")
                continue
            pred = r.get("prediction") or {}
            pranks = {p["rank"]: p for p in pred.get("ranks", [])}
            single = r.get("single_peak_bytes")
            for g in _rank_groups(r, pranks):
                rk = g[0]
                p = pranks.get(rk["rank"])
                if p:
                    pt = mib(p["peak_bytes"])
                    err = f"{100 * p['error']:+.1f}%" if "error" in p else ""
                elif r.get("no_optimizer_check"):
                    pt, err = "", ""
                else:
                    pt, err = ("unavailable", "") if pred.get("unavailable") else ("", "")
                ratio = f"{rk['peak_bytes'] / single:.3f}" if single else ""
                peak = mib(rk["peak_bytes"]) + ("" if rk["exact"] else " (not exact)")
                L.append(f"| {name_s} | {r['world_size']} | "
                         f"{','.join(str(x['rank']) for x in g)} | {peak} | "
                         f"{mib(rk['start_bytes'])} | {mib(rk['param_bytes'])} | "
                         f"{mib(rk['optimizer_state_bytes'])} | {ratio} | "
                         f"{mib(rk['max_step_peak_bytes'])} | {pt} | {err} | "
                         f"{(rk.get('peak_at') or '').replace('|', '/')} | "
                         f"{_memplan_at(p)} |")
        L.append("")
        una = {}
        for r in mr:
            u = (r.get("prediction") or {}).get("unavailable")
            if u and not r.get("error"):
                una.setdefault(u, []).append(f"{label(r['strategy'], r['options'])} "
                                             f"N={r['world_size']}")
        if una:
            L += ["Predictions unavailable:", ""]
            for u, where in una.items():
                L.append(f"- {'; '.join(sorted(set(where)))}: prediction unavailable: "
                         f"`{u[:600]}`")
            L.append("")
        chk = _checks(rows, name)
        for r in mr:
            mm = r.get("single_memplan_measure")
            if mm and "peak_bytes" in mm:
                chk.append(f"- Method check (one process, no optimizer): this script "
                           f"{mib(r['ranks'][0]['peak_bytes'])} MiB "
                           f"({r['ranks'][0]['peak_bytes']} B), `memplan.torch.measure` "
                           f"{mib(mm['peak_bytes'])} MiB ({mm['peak_bytes']} B).")
        if chk:
            L += ["Checks:", ""] + chk + [""]
    L += ["peak / single: the rank's peak over the one-process step's peak at the same "
          "per-rank batch (pipelining: the same global batch in one process). max over "
          "steps: the highest replayed peak among the rank's measured steps (a step that is "
          "not exact gives an upper bound). measured peak during: the outermost and innermost "
          "profiler ops around the allocation that set the peak.", ""]
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


# Which (strategy, options) run at which world size: every one at 2; at 4 the
# ones that check the 1/N scaling (the machine has 2 cores: 4 ranks are slow).
WORLD4 = [("ddp", {"bucket_view": False}), ("zero1", {}),
          ("fsdp2", {"reshard_after_forward": True}), ("fsdp1", {"sharding": "FULL_SHARD"})]
QUICK = [("ddp", {"bucket_view": False}), ("zero1", {}),
         ("fsdp2", {"reshard_after_forward": True}), ("fsdp1", {"sharding": "FULL_SHARD"}),
         ("pipeline", {"schedule": "GPipe"})]


def build_rows(quick, models=None, strategies=None):
    rows = []
    for name, m in MODELS.items():
        if models and name not in models:
            continue
        rows.append({"model": name, "strategy": "single", "options": {}, "world_size": 1,
                     "batch": m["batch"]})
        if not quick or name == "gpt_small":  # the method against memplan.torch.measure
            rows.append({"model": name, "strategy": "single", "options": {"optimizer": False},
                         "world_size": 1, "batch": m["batch"], "no_optimizer_check": True})
        only = m.get("strategies")
        if not only or "pipeline" in only:
            rows.append({"model": name, "strategy": "single", "options": {}, "world_size": 1,
                         "batch": PP_BATCH})
        for s, o in STRATEGIES:
            if (strategies and s not in strategies) or (quick and (s, o) not in QUICK) \
                    or (only and s not in only):
                continue
            if s == "pipeline":
                rows.append({"model": name, "strategy": s, "options": o,
                             "world_size": PP_STAGES, "batch": PP_BATCH})
                continue
            for n in (2,) if quick or only or (s, o) not in WORLD4 else (2, 4):
                rows.append({"model": name, "strategy": s, "options": o, "world_size": n,
                             "batch": m["batch"]})
    return rows


def measure_all(rows, log):
    for i, row in enumerate(rows):
        cfg = {k: row[k] for k in ("model", "strategy", "options", "world_size", "batch")}
        if row.get("no_optimizer_check"):
            cfg["optimizer"] = False
        ranks, row["seconds"] = run_config(cfg)
        errs = [r for r in ranks if r.get("error")]
        # the root cause first: a rank's own exception, not a peer's lost connection
        errs.sort(key=lambda r: ("Connection" in r["error"] or "Read error" in r["error"]
                                 or "timed out" in r["error"]))
        if errs:
            row["error"] = errs[0]["error"]
            tb = errs[0].get("traceback", "")
            frames = [l.strip() for l in tb.splitlines() if l.strip().startswith("File ")]
            row["where"] = "\n".join(frames[-3:])
            row["rank_errors"] = errs
        else:
            row["ranks"] = ranks
        log(f"[{i + 1}/{len(rows)}] {row['model']} {label(row['strategy'], row['options'])} "
            f"N={row['world_size']} b={row['batch']}: "
            + (("error: " + row["error"][:160]) if row.get("error") else
               " ".join(f"r{r['rank']} {mib(r['peak_bytes'])} MiB" for r in row["ranks"]))
            + f" ({row['seconds']} s)")
    # references
    for row in rows:
        if row.get("error"):
            continue
        ref = [r for r in rows if r["model"] == row["model"] and r["strategy"] == "single"
               and r["batch"] == row["batch"] and not r.get("no_optimizer_check")
               and not r.get("error")]
        if ref:
            row["single_peak_bytes"] = ref[0]["ranks"][0]["peak_bytes"]
    for row in rows:
        if row.get("no_optimizer_check") and not row.get("error"):
            cfg = {k: row[k] for k in ("model", "strategy", "options", "world_size", "batch")}
            row["single_memplan_measure"] = single_memplan_measure(cfg)
            if "peak_bytes" in row["single_memplan_measure"]:
                row["no_optimizer_peak_bytes"] = row["ranks"][0]["peak_bytes"]


def predict_all(doc, binary, work, log):
    graphs = {}
    for name in [n for n in MODELS if any(r["model"] == n for r in doc["rows"])]:
        path, err = export_graph(name, work)
        graphs[name] = path
        doc.setdefault("graphs", {})[name] = path or f"export failed: {err}"
        log(f"graph {name}: {path or err}")
    for row in doc["rows"]:
        if row.get("error") or row.get("no_optimizer_check"):
            continue
        predict(row, binary, graphs.get(row["model"]))
    doc["predicted_at"] = datetime.datetime.now().isoformat(timespec="seconds")
    doc["memplan"] = binary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="world size 2 only, one variant of each strategy (~5 minutes)")
    ap.add_argument("--predict-only", action="store_true",
                    help="reuse the measurements in --out; redo exports (if missing) and "
                         "predictions, rewrite the JSON and the Markdown")
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--work", default=os.environ.get("WORK") or
                    os.path.join(tempfile.gettempdir(), "memplan_parallel_gloo"))
    ap.add_argument("--out", default=os.path.join(RESULTS, "parallel.json"))
    ap.add_argument("--md", default=os.path.join(RESULTS, "parallel.md"))
    ap.add_argument("--models", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--strategies", help="comma-separated subset of ddp,zero1,fsdp2,fsdp1,"
                                         "pipeline (the single-process references always run)")
    ap.add_argument("--export", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.export:
        do_export(args.export, args.work)
        return 0

    def log(msg):
        print(msg, flush=True)

    os.makedirs(args.work, exist_ok=True)
    if args.predict_only:
        doc = json.load(open(args.out))
    else:
        _import_once()
        import torch
        t0 = time.time()
        doc = {"format": "memplan.bench.parallel_gloo/1",
               "date": datetime.datetime.now().isoformat(timespec="seconds"),
               "machine": machine(), "torch": torch.__version__,
               "python": platform.python_version(), "commit": provenance.commit(),
               "command": " ".join(["bench/parallel_gloo.py"] + sys.argv[1:]),
               "quick": args.quick, "warmup_steps": WARMUP_STEPS,
               "pipeline": {"stages": PP_STAGES, "microbatches": PP_MICROBATCHES,
                            "batch": PP_BATCH},
               "models": MODELS, "counted": COUNTED,
               "rows": build_rows(args.quick,
                                  args.models.split(",") if args.models else None,
                                  args.strategies.split(",") if args.strategies else None)}
        measure_all(doc["rows"], log)
        doc["seconds"] = round(time.time() - t0, 1)
    predict_all(doc, args.memplan, args.work, log)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    write_md(doc, args.md)
    log(f"wrote {args.out} and {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
