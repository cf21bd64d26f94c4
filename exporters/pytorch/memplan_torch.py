#!/usr/bin/python3
"""memplan's PyTorch exporter: real graphs in, plans applied back, predictions
checked against real eager training steps.

    memplan_torch.py export  MODEL --batch N [--input-shape 3,64,64] -o OUT.graph.json [--style joint|forward]
    memplan_torch.py measure MODEL --batch N [--input-shape ...] [--plan PLAN.json] --json OUT.json

MODEL is `torchvision:NAME` (e.g. torchvision:resnet18) or `package.module:factory`
(a callable returning an nn.Module; `models:gpt_small` names the models of
exporters/pytorch/models.py). The training step is always the same: forward,
cross-entropy against a random target shaped like the output without its last
dimension, backward, every parameter's .grad None beforehand, no optimizer.
The input is `model.example_input(batch)` when the model has that method, else
a float tensor of shape (batch, *--input-shape) (default 3,224,224). The seed is
fixed, so an export and a measurement describe the same step.

Python API (mirrors the CLI):
    graph = export(model, example_inputs, target=None, style="joint")  # memplan.graph/1 dict
    apply_plan(model, plan)   # wraps the plan's "modules" in torch.utils.checkpoint
    report = measure(model, example_inputs, target=None, plan=None)

How export works (torch 1.13: functorch.compile.aot_module; 2.x: the same
entry points, through torch._functorch; only 1.13 is tested):
  1. aot_module traces a *copy* of model + loss into a joint graph (ATen ops,
     functionalized); the partitioner (default: save what the backward reads)
     splits it into a forward and a backward fx graph, which we record.
  2. Both graphs are re-run on real tensors (fx.Interpreter) for the shape,
     dtype and storage of every value, tuple elements included.
  3. fx nodes become memplan tensors/ops. Outputs that the op's schema says
     alias an input (views, detach) become `alias_of` views, confirmed by
     storage; the forward's saved outputs and the backward's placeholders map
     to the same ids; backward outputs become `<param>.grad` with `grad_of`.
  4. Module scopes are recorded while tracing (module hooks for the forward,
     autograd-node hooks for the backward), see ScopeRecorder.
  5. Eager fidelity: functionalization turns eager's in-place ops (ReLU(inplace),
     ReLU6/Hardswish/SiLU(inplace), `x += y`, dropout's bernoulli_/div_) into
     ops that allocate. aot 1.13 traces twice (plain, then functionalized by
     re-running the plain graph); while a plain in-place node is re-run, the
     functional node it becomes is tagged, and its output is written as a view
     (`alias_of`) of the tensor it overwrote: no new buffer, and the old one
     stays alive as long as the new value is, which is what eager does.
     Batch-norm running statistics are updated in place by the kernel in
     eager and are not outputs of aot 1.13's graph, so nothing is allocated for
     them on either side.
"""
import argparse
import contextlib
import copy
import gc
import importlib
import inspect
import json
import operator
import os
import statistics
import sys
import time

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
if TORCH2:  # AOTAutograd with Python functionalization (FunctionalTensorMode)
    from torch._functorch.aot_autograd import aot_function, aot_module, make_boxed_func
    from torch._functorch.partitioners import (default_partition,
                                               min_cut_rematerialization_partition)
    from torch._subclasses.functional_tensor import FunctionalTensorMode
else:  # torch 1.13: functorch's AOTAutograd, functionalized by a second trace
    from functorch.compile import (aot_module, default_partition, make_boxed_func,
                                   min_cut_rematerialization_partition)
    FunctionalTensorMode = None

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

EXPORTER = "memplan_torch 1"
SEED = 0
SCOPE_KEY = "memplan_scope"
INPLACE_KEY = "memplan_inplace"
DTYPES = {
    torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32",
    torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8",
    torch.bool: "bool", torch.complex64: "complex64",
}
DTYPE_SIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8,
              "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8}
# Ops that are views in eager although their schema carries no alias annotation.
EXTRA_VIEWS = {"aten._unsafe_view.default": 0}
# Scratch below this (wrapped scalars, 4-8 byte temporaries) is not recorded.
WORKSPACE_MIN = 64
RESIDENT = {"input", "parameter", "buffer", "optimizer_state"}


class Progress:
    """One line redrawn on stderr while an export runs: phase, done/total,
    seconds. Only on a terminal, never with -q (CI logs stay clean)."""

    def __init__(self, enabled=None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = None
        self.drawn = False
        self.prefix = ""  # the outer step, e.g. "export 2/5 (batch=3, seq=63): "

    def __call__(self, phase, done=None, total=None):
        if not self.enabled:
            return
        import time
        if self.start is None:
            self.start = time.time()
        count = f" {done}/{total}" if total else ""
        sys.stderr.write(f"\r\033[Kmemplan_torch: {self.prefix}{phase}{count}, "
                         f"{time.time() - self.start:.0f} s")
        sys.stderr.flush()
        self.drawn = True

    def done(self):
        if self.drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.drawn = False


PROGRESS = Progress(enabled=False)  # the CLI turns it on for a terminal


class ExportError(ValueError):
    """A graph the exporter cannot write faithfully (names the node)."""


# --------------------------------------------------------------------------
# Models, inputs and the training step
# --------------------------------------------------------------------------
def load_model(spec, device=None):
    """`torchvision:NAME`, `hf:ARCH[:k=v,...]` or `package.module:factory` ->
    nn.Module (seeded, train mode); built on `device` when given ("meta": no
    weights allocated, nothing initialised for real)."""
    if device is not None:
        with torch.device(device):
            return load_model(spec)
    if ":" not in spec:
        raise ValueError(f"expected torchvision:NAME or package.module:factory")
    mod_name, attr = spec.split(":", 1)
    torch.manual_seed(SEED)
    if mod_name == "hf":
        import hf_models
        return hf_models.build(attr).train()
    if mod_name == "torchvision":
        import torchvision
        factory = getattr(torchvision.models, attr, None)
        if factory is None:
            raise ValueError(f"torchvision.models has no {attr}")
        model = factory(weights=None)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise ValueError(f"cannot import {mod_name}: {e}") from None
        factory = getattr(module, attr, None)
        if factory is None:
            raise ValueError(f"{mod_name} has no {attr}")
        model = factory()
    return model.train()


def has_seq(model):
    """True when model.example_input takes a sequence length (`seq`)."""
    fn = getattr(model, "example_input", None)
    return fn is not None and "seq" in inspect.signature(fn).parameters


def example_inputs(model, batch, input_shape=None, seq=None):
    """The step's input tuple: model.example_input(batch[, seq]), else
    randn(batch, *shape); on the model's device (meta for a meta model)."""
    p = next(model.parameters(), None)
    if p is not None and p.is_meta:
        with torch.device("meta"):
            return _example_inputs(model, batch, input_shape, seq)
    return _example_inputs(model, batch, input_shape, seq)


def _example_inputs(model, batch, input_shape, seq):
    torch.manual_seed(SEED + 1)
    if input_shape is None and hasattr(model, "example_input"):
        x = model.example_input(batch, seq=seq) if seq is not None else model.example_input(batch)
        return x if isinstance(x, tuple) else (x,)
    shape = tuple(input_shape or (3, 224, 224))
    return (torch.randn(batch, *shape),)


def make_target(model, inputs):
    """Random class targets shaped like the output without its last dimension
    (found with a no-grad forward of a copy on the first sample); for models
    with their own LM loss, the labels: the input ids."""
    if getattr(model, "memplan_returns_loss", False):
        return inputs[0].clone()
    probe = copy.deepcopy(model).eval()
    on = torch.device("meta") if inputs[0].is_meta else contextlib.nullcontext()
    with torch.no_grad(), on:
        out = probe(*[x[:1] for x in inputs])
    shape = (inputs[0].shape[0],) + tuple(out.shape[1:-1])
    torch.manual_seed(SEED + 2)
    return torch.randint(0, out.shape[-1], shape, device=inputs[0].device)


def loss_fn(out, target):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def step_loss(model, inputs, target):
    """The step's loss: the model's own when it computes one (hf: models take
    the labels and return their LM loss), else cross-entropy on its output."""
    if getattr(model, "memplan_returns_loss", False):
        return model(*inputs, target)
    return loss_fn(model(*inputs), target)


class WithLoss(nn.Module):
    """model + loss as one module, so the loss is inside the traced graph."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        *inputs, target = args
        return step_loss(self.model, inputs, target)


# --------------------------------------------------------------------------
# Scope and in-place recording while aot traces
# --------------------------------------------------------------------------
def _mutated_arg(target):
    """Index of the argument an in-place ATen op writes (schema `(a!)`), else None."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return None
    for j, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            return j
    return None


def _packet_name(target):
    pk = getattr(target, "overloadpacket", None)
    return getattr(pk, "__name__", None)


class ScopeRecorder:
    """Tags every fx node created while tracing with meta[SCOPE_KEY], and the
    functional counterparts of eager in-place ops with meta[INPLACE_KEY].

    * forward: module pre/post hooks keep a stack of module paths; a node
      created while the stack is non-empty gets its top.
    * backward: each module's post-hook also walks the autograd graph behind
      its outputs and registers a post-hook on the untagged grad_fn nodes; a
      module's pre-hook gives untagged nodes behind its inputs to the parent.
      The autograd engine runs nodes one at a time (CPU: on the calling
      thread), so the fx nodes created since the previous post-hook belong to
      the node whose post-hook fires now. Gradient-summing adds run after the
      producing node's hook and end up in the next node's scope (best effort).
    * aot 1.13 traces twice (plain, then functionalized by re-running the
      first graph in an fx.Interpreter); during the second trace a node
      inherits the scope of the node being interpreted, and when that node is
      an in-place op (relu_, add_, ...), the node of the functional op of the
      same name (relu, add) is tagged with the index of the overwritten input.
    * torch 2.x traces once, functionalizing in FunctionalTensorMode: while it
      dispatches an in-place op (relu_), the node of the functional op of the
      same name that it emits (relu) is tagged the same way.
    """

    def __init__(self, root, names, record_inplace=True):
        self.root, self.names = root, names  # names: module -> scope string
        self.record_inplace = record_inplace
        self.stack, self.pending, self.cur_src = [], [], None
        self.cur_inplace = None  # torch 2.x: the in-place op being functionalized
        self.tagged = {}  # grad_fn -> scope (holds refs so ids stay valid)
        self.handles = []
        self.inplace_sources = 0

    def __enter__(self):
        st = self
        self.orig_create = torch.fx.Graph.create_node
        self.orig_run_node = torch.fx.Interpreter.run_node

        def create_node(graph, *a, **k):
            node = st.orig_create(graph, *a, **k)
            src = st.cur_src
            inp = st.cur_inplace
            if (inp is not None and node.op == "call_function"
                    and _packet_name(node.target) == _packet_name(inp)[:-1]):
                node.meta[INPLACE_KEY] = str(inp)
            if src is not None:
                if SCOPE_KEY in src.meta:
                    node.meta[SCOPE_KEY] = src.meta[SCOPE_KEY]
                if (st.record_inplace and node.op == "call_function"
                        and src.op == "call_function"):
                    j = _mutated_arg(src.target)
                    name = _packet_name(src.target)
                    if (j == 0 and name and name.endswith("_")
                            and _packet_name(node.target) == name[:-1]):
                        node.meta[INPLACE_KEY] = str(src.target)
            elif st.stack:
                node.meta[SCOPE_KEY] = st.stack[-1]
            else:
                st.pending.append(node)
            return node

        def run_node(interp, n):
            prev, st.cur_src = st.cur_src, n
            try:
                return st.orig_run_node(interp, n)
            finally:
                st.cur_src = prev

        def dispatch(mode, func, types, args=(), kwargs=None):
            name = _packet_name(func)
            inplace = (func if st.record_inplace and _mutated_arg(func) == 0 and name
                       and name.endswith("_") else None)
            prev, st.cur_inplace = st.cur_inplace, inplace
            try:
                return st.orig_dispatch(mode, func, types, args, kwargs)
            finally:
                st.cur_inplace = prev

        torch.fx.Graph.create_node = create_node
        torch.fx.Interpreter.run_node = run_node
        if FunctionalTensorMode is not None:
            self.orig_dispatch = FunctionalTensorMode.__torch_dispatch__
            FunctionalTensorMode.__torch_dispatch__ = dispatch
        for mod in self.root.modules():
            self.handles.append(mod.register_forward_pre_hook(self._pre))
            self.handles.append(mod.register_forward_hook(self._post))
        return self

    def __exit__(self, *exc):
        torch.fx.Graph.create_node = self.orig_create
        torch.fx.Interpreter.run_node = self.orig_run_node
        if FunctionalTensorMode is not None:
            FunctionalTensorMode.__torch_dispatch__ = self.orig_dispatch
        for h in self.handles:
            h.remove()
        self.tagged.clear()

    def _walk(self, tensors):
        """Untagged autograd nodes reachable from `tensors` (stops at tagged ones)."""
        seen, todo = set(), [t.grad_fn for t in _flat_tensors(tensors)]
        while todo:
            fn = todo.pop()
            if (fn is None or fn in seen or fn in self.tagged
                    or type(fn).__name__ == "AccumulateGrad"):
                continue
            seen.add(fn)
            todo.extend(f for f, _ in fn.next_functions)
        return seen

    def _tag(self, fns, scope):
        for fn in fns:
            self.tagged[fn] = scope
            fn.register_hook(self._bw_hook(scope))

    def _pre(self, mod, inputs):
        if self.stack:
            self._tag(self._walk(inputs), self.stack[-1])
        self.stack.append(self.names[mod])

    def _post(self, mod, inputs, output):
        scope = self.stack.pop()
        self._tag(self._walk(output), scope)

    def _bw_hook(self, scope):
        def hook(grad_inputs, grad_outputs):
            for node in self.pending:
                node.meta.setdefault(SCOPE_KEY, scope)
            self.pending.clear()
        return hook


def _flat_tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in _flat_tensors(e)]
    if isinstance(x, dict):
        return [t for e in x.values() for t in _flat_tensors(e)]
    return []


def _named(module, what):
    """Named parameters/buffers in aot_module's primal order (duplicates kept)."""
    try:
        return list(getattr(module, "named_" + what)(remove_duplicate=False))
    except TypeError:  # torch 1.13
        from functorch._src.named_members_polyfill import _named_buffers, _named_parameters
        fn = _named_parameters if what == "parameters" else _named_buffers
        return list(fn(module, remove_duplicate=False))


def capture(model, inputs, target, partition_fn=default_partition, record_inplace=True):
    """Traces a copy of model + loss with aot_module. Returns ({"fw", "bw"}:
    (GraphModule, example args)), [(primal name, kind)], number of inputs."""
    wrapped = WithLoss(copy.deepcopy(model))
    # Scopes: the loss wrapper is "loss", the model's own code "", its
    # submodules their usual paths ("layer1.0.conv1").
    names = {}
    for n, m in wrapped.named_modules():
        names[m] = "loss" if n == "" else ("" if n == "model" else n[len("model."):])
    graphs = {}

    def fw_compiler(gm, args):
        graphs["fw"] = (gm, list(args))
        return make_boxed_func(gm.forward)

    def bw_compiler(gm, args):
        graphs["bw"] = (gm, list(args))
        return make_boxed_func(gm.forward)

    if TORCH2:
        # aot_function over functional_call with each parameter once: tied
        # weights (an LM head sharing the embedding) are one primal, tied back
        # by functional_call (aot_module passes both names and fails on them).
        params = list(wrapped.named_parameters())
        buffers = list(wrapped.named_buffers())
        keys = [n for n, _ in params + buffers]

        def step_fn(*flat):
            state = dict(zip(keys, flat[:len(keys)]))
            return torch.func.functional_call(wrapped, state, tuple(flat[len(keys):]),
                                              tie_weights=True)

        compiled = aot_function(step_fn, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                                partition_fn=partition_fn)
        args = [t for _, t in params + buffers] + list(inputs) + [target]
    else:
        compiled = aot_module(wrapped, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                              partition_fn=partition_fn)
        args = list(inputs) + [target]
        params, buffers = _named(wrapped, "parameters"), _named(wrapped, "buffers")
    torch.manual_seed(SEED + 3)
    on_meta = inputs[0].is_meta
    with ScopeRecorder(wrapped, names, record_inplace), \
            (_meta_patches() if on_meta else contextlib.nullcontext()):
        loss = compiled(*args)
        loss.backward()

    for gm, _ in graphs.values():
        remove_dead_code(gm)
    strip = lambda n: n[len("model."):] if n.startswith("model.") else n
    primals = [(strip(n), "parameter") for n, _ in params]
    primals += [(strip(n), "buffer") for n, _ in buffers]
    in_names = ["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))]
    primals += [(n, "input") for n in in_names] + [("target", "input")]
    # The forward graph is replayed on the real tensors in primal order (torch
    # 2.x hands the compiler fake tensors).
    real = [t for _, t in params + buffers] + list(inputs) + [target]
    graphs["fw"] = (graphs["fw"][0], real)
    return graphs, primals


@contextlib.contextmanager
def _meta_patches():
    """What tracing on the meta device needs to give the CPU trace's graph:
    * F.cross_entropy as the ops it decomposes to on the CPU (log_softmax,
      nll_loss_forward): on meta, aten.nll_loss has a Python meta kernel and
      no autograd kernel, so AOT's backward trace would stop at the loss;
    * torch.autocast(device_type="meta") (transformers' RoPE disables
      autocast on its input's device) as the CPU's;
    * F.scaled_dot_product_attention picks its kernel as the CPU would
      (torch._fused_sdp_choice on CPU stand-ins: stride-0 views of one row,
      no data); on meta it would always take the math path."""
    orig = F.cross_entropy
    orig_autocast = torch.autocast
    orig_sdpa = F.scaled_dot_product_attention

    def stand_in(t):
        if not isinstance(t, torch.Tensor):
            return t
        return torch.empty(t.shape[-1] if t.dim() else 1, dtype=t.dtype).expand(t.shape)

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        if query.is_meta and not enable_gqa:
            from torch.utils._python_dispatch import _disable_current_modes
            with _disable_current_modes():  # a question, not a traced op
                choice = torch._fused_sdp_choice(stand_in(query), stand_in(key),
                                                 stand_in(value), stand_in(attn_mask), dropout_p,
                                                 is_causal, scale=scale)
            if choice == int(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                if isinstance(attn_mask, torch.Tensor) and attn_mask.dtype == torch.bool:
                    # as the CPU kernel converts it: where(mask, 0, -inf)
                    neg = torch.scalar_tensor(float("-inf"), dtype=query.dtype,
                                              device=query.device)
                    zero = torch.scalar_tensor(0.0, dtype=query.dtype, device=query.device)
                    attn_mask = torch.where(attn_mask, zero, neg)
                return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    query, key, value, dropout_p, is_causal, attn_mask=attn_mask,
                    scale=scale)[0]
        return orig_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                         is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)

    class autocast(orig_autocast):
        def __init__(self, device_type, *a, **k):
            super().__init__("cpu" if device_type == "meta" else device_type, *a, **k)
    reductions = {"none": 0, "mean": 1, "sum": 2}

    def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                      reduce=None, reduction="mean", label_smoothing=0.0):
        if (input.dim() == 2 and target.dim() == 1 and weight is None and size_average is None
                and reduce is None and label_smoothing == 0.0 and reduction in reductions
                and not target.is_floating_point()):
            logp = F.log_softmax(input, 1)
            return torch.ops.aten.nll_loss_forward(logp, target, None, reductions[reduction],
                                                   ignore_index)[0]
        return orig(input, target, weight, size_average, ignore_index, reduce, reduction,
                    label_smoothing)

    F.cross_entropy, torch.autocast = cross_entropy, autocast
    F.scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.cross_entropy, torch.autocast = orig, orig_autocast
        F.scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention = orig_sdpa


def remove_dead_code(gm):
    """Drops ops whose results nothing reads. torch 2.x's partitioner leaves
    some in the backward (a recomputed attention score chain ending in an
    unread dropout: random ops survive its dead-code pass); eager never runs
    them. Ops that write an argument are kept."""
    removed = 0
    for node in reversed(list(gm.graph.nodes)):
        if (node.op == "call_function" and not node.users
                and _mutated_arg(node.target) is None):
            gm.graph.erase_node(node)
            removed += 1
    if removed:
        gm.recompile()
    return removed


# --------------------------------------------------------------------------
# Conversion to memplan.graph/1
# --------------------------------------------------------------------------
class Recorder(torch.fx.Interpreter):
    """Runs a graph on real tensors and keeps every node's value; each node runs
    inside record_function("memplan::<name>") so that op_workspaces() can find
    its allocations in a profile."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        with torch.profiler.record_function("memplan::" + n.name):
            v = super().run_node(n)
        self.values[n] = v
        return v


class Timer(torch.fx.Interpreter):
    """Runs a graph on real tensors and keeps each call's wall time (seconds)
    by node name, the least over the runs so far."""

    def __init__(self, gm):
        super().__init__(gm)
        self.seconds = {}

    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        t = time.perf_counter()
        v = super().run_node(n)
        dt = time.perf_counter() - t
        self.seconds[n.name] = min(dt, self.seconds.get(n.name, dt))
        return v


def op_times(gm, args, repeats=3):
    """{fx node name: seconds of one run}: the least of `repeats` runs of the
    graph on one thread (the caller's), after the caller's own warm-up run."""
    timer = Timer(gm)
    for _ in range(repeats):
        torch.manual_seed(SEED + 3)
        timer.run(*args)
    return timer.seconds


def op_workspaces(prof):
    """{fx node name: transient bytes} from a profile of Recorder runs: the
    highest running sum of the CPU allocations made while the node ran, less
    what was still allocated when it returned (its outputs). This is scratch
    the kernel allocates through the c10 allocator, e.g. oneDNN's reordered
    copies in convolution_backward, which eager pays at the same moment."""
    res = {}

    def mem_events(node, out):
        ef = node.extra_fields
        if hasattr(ef, "alloc_size") and getattr(ef, "device", None) is not None \
                and ef.device.type == "cpu":
            out.append((node.start_time_ns, ef.alloc_size))
        for c in node.children:
            mem_events(c, out)
        return out

    def walk(node):
        if node.name.startswith("memplan::"):
            evs = sorted(mem_events(node, []), key=lambda e: e[0])
            cur = peak = 0
            for _, size in evs:
                cur += size
                peak = max(peak, cur)
            if peak > max(cur, 0):
                res[node.name[len("memplan::"):]] = peak - max(cur, 0)
            return
        for c in node.children:
            walk(c)

    for r in prof.profiler.kineto_results.experimental_event_tree():
        walk(r)
    return res


def _node_args(node):
    """fx Nodes read by `node`, in order, without duplicates."""
    out = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda a: out.append(a) or a)
    seen, res = set(), []
    for a in out:
        if a not in seen:
            seen.add(a)
            res.append(a)
    return res


def _schema_aliases(node):
    """{output index: fx argument Node} for outputs the schema says alias an input."""
    name = str(node.target)
    if name in EXTRA_VIEWS:
        return {0: node.args[EXTRA_VIEWS[name]]}
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    res = {}
    for i, ret in enumerate(schema.returns):
        if ret.alias_info is None:
            continue
        for j, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.before_set & ret.alias_info.before_set:
                v = node.args[j] if j < len(node.args) else node.kwargs.get(arg.name)
                if isinstance(v, torch.fx.Node):
                    res[i] = v
    return res


def _storage(t):
    """The identity of t's storage (meta tensors included: views share it)."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return None
    if TORCH2:
        return t.untyped_storage()._cdata
    return t.storage().data_ptr()


def _flops(node, ins, outs):
    """FLOPs of matmul- and convolution-like ops; others are left to memplan."""
    t = str(node.target)
    try:
        if t in ("aten.mm.default", "aten.bmm.default"):
            return 2 * ins[0].numel() * ins[1].shape[-1]
        if t in ("aten.addmm.default", "aten.baddbmm.default"):
            return 2 * ins[1].numel() * ins[2].shape[-1]
        if t == "aten.convolution.default":
            w, y = ins[1], outs[0]
            groups = node.args[8] if len(node.args) > 8 else 1
            return 2 * y.numel() * w[0].numel() // max(1, groups) * groups
        if t == "aten.convolution_backward.default":
            grad_out, w = ins[0], ins[2]
            per = 2 * grad_out.numel() * w[0].numel()  # one convolution's worth
            return per * sum(1 for o in outs[:2] if isinstance(o, torch.Tensor))
    except (AttributeError, IndexError, TypeError):
        pass
    return None


def buffer_updates(nodes, placeholders):
    """{fx output node: placeholder it overwrites} for the forward's leading
    outputs in torch 2.x, the new values of mutated inputs: an output k of
    `op_functional` (torchgen's functional variant, which returns the op's
    results and then one new value per argument it mutates) maps to the k-th
    mutated argument; any other op (`add` for `num_batches_tracked += 1`) to
    its first argument when that is a placeholder of the same shape."""
    res = {}
    phs = set(placeholders)
    for node in nodes:
        src, k = node, None
        if node.op == "call_function" and node.target is operator.getitem:
            src, k = node.args[0], node.args[1]
        target = None
        name = _packet_name(getattr(src, "target", None)) or ""
        if k is not None and name.endswith("_functional"):
            base = getattr(torch.ops.aten, name[:-len("_functional")], None)
            base = getattr(base, src.target._overloadname, None) if base else None
            schema = getattr(base, "_schema", None)
            if schema is not None:
                mutable = [j for j, a in enumerate(schema.arguments)
                           if a.alias_info is not None and a.alias_info.is_write]
                m = k - len(schema.returns)
                if 0 <= m < len(mutable) and mutable[m] < len(src.args):
                    target = src.args[mutable[m]]
        elif k is None and node.op == "call_function" and node.args:
            target = node.args[0]
        if not (isinstance(target, torch.fx.Node) and target in phs):
            raise ExportError(f"{node.name}: the forward updates an input the exporter cannot "
                             f"name (produced by {getattr(src, 'target', src)})")
        res[node] = target
    return res


def _conv_groups(node):
    t = str(node.target)
    k = {"aten.convolution.default": 8, "aten.convolution_backward.default": 9}.get(t)
    if k is None or len(node.args) <= k or not isinstance(node.args[k], int):
        return 1
    return node.args[k]


def convert(graphs, primals, name, style="joint", target_device="cpu", measure_workspace=True,
            measure_times=False):
    fw_gm, fw_args = graphs["fw"]
    bw_gm, _ = graphs["bw"]
    fw_ph = [n for n in fw_gm.graph.nodes if n.op == "placeholder"]
    if len(fw_ph) != len(primals):
        raise ExportError(f"expected {len(primals)} primals, got {len(fw_ph)} "
                         "(tied weights are deduplicated by aot; not handled)")

    from torch.profiler import ProfilerActivity, profile
    on_meta = any(isinstance(a, torch.Tensor) and a.is_meta for a in fw_args)
    measure_workspace = measure_workspace and not on_meta
    measure_times = measure_times and not on_meta
    profiled = (lambda: profile(activities=[ProfilerActivity.CPU], profile_memory=True)) \
        if measure_workspace else contextlib.nullcontext
    ws_of = op_workspaces if measure_workspace else (lambda prof: {})
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as measure() runs the eager step
    try:
        with torch.no_grad():
            torch.manual_seed(SEED + 3)
            with profiled() as prof:
                fw_run = Recorder(fw_gm)
                fw_outs = fw_run.run(*fw_args)
            ws_fw = ws_of(prof)
            bw_ph = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
            # The forward returns [updated buffers (torch 2.x), user outputs,
            # saved tensors]; the backward takes [saved tensors, tangents].
            n_user = sum(1 for n in bw_ph if n.name.startswith("tangents"))
            n_saved = len(bw_ph) - n_user
            n_mut = len(fw_outs) - n_saved - n_user
            fw_outs = fw_outs[n_mut:]
            tangents = [torch.ones_like(o) for o in fw_outs[:n_user]]
            bw_args = list(fw_outs[n_user:]) + tangents
            with profiled() as prof:
                bw_run = Recorder(bw_gm)
                bw_run.run(*bw_args)
            ws_bw = ws_of(prof)
            if measure_times:
                # Each graph has run once above (the warm-up).
                secs = {"forward": op_times(fw_gm, fw_args), "backward": op_times(bw_gm, bw_args)}
    finally:
        torch.set_num_threads(prev_threads)
    values = {**fw_run.values, **bw_run.values}

    fw_out_nodes = list(next(n for n in fw_gm.graph.nodes if n.op == "output").args[0])
    # Buffers the forward updates (batch norm's running statistics, its
    # counter): eager writes them in place, so their new values are views.
    updated = buffer_updates(fw_out_nodes[:n_mut], fw_ph)
    fw_out_nodes = fw_out_nodes[n_mut:]
    bw_out_nodes = list(next(n for n in bw_gm.graph.nodes if n.op == "output").args[0])

    tensors, ops = {}, []
    tid = {}            # fx Node or (fx Node, index) -> tensor id
    storage_owner = {}  # storage ptr -> owning (non-alias) tensor id
    renames = {}        # fx Node -> preferred tensor id

    user_ids = ["loss"] if n_user == 1 else [f"out{i}" for i in range(n_user)]
    for node, uid in zip(fw_out_nodes[:n_user], user_ids):
        renames[node] = uid
    grad_of = {}
    for node, (pname, kind) in zip(bw_out_nodes, primals):
        if node is None:
            continue
        if kind != "parameter" or node.op != "call_function" or node in renames:
            raise ExportError(f"unsupported backward output {node} for {pname}")
        renames[node] = pname + ".grad"
        grad_of[node] = pname

    def root(t):
        while "alias_of" in tensors[t]:
            t = tensors[t]["alias_of"]
        return t

    def add_tensor(key, tensor_id, value, kind, base=None):
        if tensor_id in tensors:  # fx names are unique per graph, not across fw/bw
            k = 1
            while f"{tensor_id}.{k}" in tensors:
                k += 1
            tensor_id = f"{tensor_id}.{k}"
        t = {"id": tensor_id, "shape": [int(s) for s in value.shape],
             "dtype": DTYPES[value.dtype], "kind": kind}
        if base is not None:
            t["alias_of"] = root(base)
        tensors[tensor_id] = t
        tid[key] = tensor_id
        ptr = _storage(value)
        if base is None and ptr is not None:
            storage_owner.setdefault(ptr, tensor_id)
        return t

    for node, (pname, kind) in zip(fw_ph, primals):
        add_tensor(node, pname, values[node], kind)

    op_ids = set()
    grad_flow = set()  # backward values derived from the tangent
    overwritten = {}   # tensor id an eager in-place op overwrote -> index of that op
    stats = {"views_by_schema": 0, "views_by_storage": 0, "schema_alias_copied": 0,
             "eager_inplace": 0, "inplace_ops": {}, "workspace_ops": 0,
             "buffer_updates_in_place": 0, "constants": 0, "ops_without_schema": []}

    def emit(gm, phase):
        getitems = {}
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is operator.getitem:
                getitems[(n.args[0], n.args[1])] = n
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            val = values[node]
            multi = isinstance(val, (tuple, list))
            outs = list(val) if multi else [val]
            in_nodes = _node_args(node)
            inputs = []
            for a in in_nodes:
                if a in tid:
                    inputs.append(tid[a])
                elif a.target is operator.getitem and (a.args[0], a.args[1]) in tid:
                    inputs.append(tid[(a.args[0], a.args[1])])
                elif a.op == "get_attr" and isinstance(values.get(a), torch.Tensor):
                    # a constant the traced code made (torch.tensor(...)): resident
                    inputs.append(add_tensor(a, f"{phase[:2]}.{a.target}", values[a],
                                             "buffer")["id"])
                    stats["constants"] += 1
                else:
                    raise ExportError(f"{node.name}: input {a.name} has no tensor")
            in_vals = [values[a] for a in in_nodes]
            flow = phase == "backward" and any(a in grad_flow for a in in_nodes)
            if flow:
                grad_flow.add(node)
            aliases = _schema_aliases(node)
            if getattr(node.target, "_schema", None) is None and \
                    str(node.target) not in EXTRA_VIEWS:
                # No schema: aliasing unknown. Outputs sharing an input's storage
                # become views (checked below), the rest new buffers.
                stats["ops_without_schema"].append(node.name)
                print(f"memplan_torch: warning: {node.name} ({node.target}) has no ATen "
                      "schema; its outputs are new buffers unless they share an input's "
                      "storage", file=sys.stderr)
            # Eager ran this op in place on its first argument (see ScopeRecorder).
            inplace_of = None
            if INPLACE_KEY in node.meta and not multi and node.args and \
                    isinstance(node.args[0], torch.fx.Node) and node.args[0] in tid:
                a0 = values[node.args[0]]
                if (isinstance(a0, torch.Tensor) and isinstance(val, torch.Tensor)
                        and a0.shape == val.shape and a0.dtype == val.dtype):
                    inplace_of = tid[node.args[0]]
            out_ids = []
            for i, v in enumerate(outs):
                if not isinstance(v, torch.Tensor):
                    continue  # None (masked-out gradient) or a non-tensor
                fx_out = getitems.get((node, i)) if multi else node
                key = (node, i) if multi else node
                tensor_id = renames.get(fx_out) or (fx_out.name if fx_out is not None
                                                    else f"{node.name}.{i}")
                base, ptr = None, _storage(v)
                if fx_out in updated:
                    base = tid[updated[fx_out]]
                    stats["buffer_updates_in_place"] += 1
                elif i in aliases and ptr is not None and ptr == _storage(values[aliases[i]]):
                    base = tid[aliases[i]] if aliases[i] in tid else None
                    stats["views_by_schema"] += 1
                elif i in aliases:
                    stats["schema_alias_copied"] += 1
                elif inplace_of is not None and fx_out not in renames:
                    base = inplace_of
                    overwritten[inplace_of] = len(ops)  # this op, appended below
                    stats["eager_inplace"] += 1
                    k = node.meta[INPLACE_KEY]
                    stats["inplace_ops"][k] = stats["inplace_ops"].get(k, 0) + 1
                elif ptr is not None and ptr in storage_owner and any(
                        _storage(x) == ptr for x in in_vals):
                    base = storage_owner[ptr]
                    stats["views_by_storage"] += 1
                if phase == "forward":
                    kind = "activation"
                else:
                    kind = "gradient" if flow else "temporary"
                t = add_tensor(key, tensor_id, v, kind, base)
                tensor_id = t["id"]
                if fx_out is not None:
                    tid[fx_out] = tensor_id
                    if flow:
                        grad_flow.add(fx_out)
                if fx_out in grad_of:
                    t["kind"] = "gradient"
                    t["grad_of"] = grad_of[fx_out]
                out_ids.append(tensor_id)
            op_id = "op." + node.name
            if op_id in op_ids:
                op_id = f"{op_id}.{phase[:2]}"
            op_ids.add(op_id)
            op = {"id": op_id, "type": str(node.target), "inputs": inputs,
                  "outputs": out_ids, "phase": phase,
                  "scope": node.meta.get(SCOPE_KEY, "")}
            fl = _flops(node, in_vals, outs)
            if fl:
                op["flops"] = fl
            groups = _conv_groups(node)
            if groups > 1:
                op["groups"] = groups  # for workspace.py's rules
            if measure_times and node.name in secs[phase]:
                op["time_us"] = round(secs[phase][node.name] * 1e6, 3)
            ws = (ws_fw if phase == "forward" else ws_bw).get(node.name, 0)
            if ws >= WORKSPACE_MIN:
                op["workspace_bytes"] = ws
                stats["workspace_ops"] += 1
            if (phase == "backward" and str(node.target) == "aten.add.Tensor"
                    and len(in_nodes) == 2 and all(a in grad_flow for a in in_nodes)):
                op["accumulate"] = True
            ops.append(op)

    emit(fw_gm, "forward")
    if style == "joint":
        for ph, fw_node in zip(bw_ph[:n_saved], fw_out_nodes[n_user:]):
            tid[ph] = tid[fw_node]
        for ph, uid, tv in zip(bw_ph[n_saved:], user_ids, tangents):
            gid = uid + ".grad"
            gid = add_tensor(ph, gid, tv, "gradient")["id"]
            grad_flow.add(ph)
            ops.append({"id": gid + ".seed", "type": "ones_like", "inputs": [uid],
                        "outputs": [gid], "phase": "backward", "scope": "loss"})
        emit(bw_gm, "backward")
    stats["inplace_clones_hoisted"] = 0
    ops = hoist_inplace_clones(ops, tensors, overwritten, stats)
    ops = fuse_silu_backward(ops, tensors, stats)
    ops = sink_backward_views(ops, tensors)
    if target_device == "cpu":
        stats["dropout_noise_as_eager_cpu"] = eager_cpu_dropout(ops, tensors)
    graph = {
        "format": "memplan.graph/1",
        "name": name,
        "source": {"framework": "pytorch", "version": torch.__version__,
                   "exporter": EXPORTER, "style": style},
        "symbols": {},
        "tensors": list(tensors.values()),
        "ops": ops,
        "outputs": user_ids,
    }
    return graph, stats


def hoist_inplace_clones(ops, tensors, overwritten, stats):
    """Moves the clone of an in-place op's input from the backward to the
    forward, just before that op. Eager autograd saves `self.clone()` before
    an in-place op whose derivative reads the input it overwrites (hardtanh_,
    i.e. ReLU6; hardswish_; silu_; ...: `_saved_self` of their grad_fn). aot's
    joint graph traces that clone, and the partitioner, which keeps in the
    forward only what the forward outputs need, puts it in the backward, where
    it reads the overwritten tensor. In eager it is made when the in-place op
    runs and lives until its backward reads it: as a forward tensor it is what
    torch.utils.checkpoint drops and remakes with its module, whereas a
    backward clone forces its module's recomputation at the top of the
    backward, with every such clone alive at once."""
    moved, hoisted = {}, set()  # forward op index -> clones to put before it
    for k, op in enumerate(ops):
        if (op["phase"] == "backward" and op["type"] == "aten.clone.default"
                and len(op["inputs"]) == 1 and op["inputs"][0] in overwritten
                and len(op["outputs"]) == 1 and "alias_of" not in tensors[op["outputs"][0]]):
            at = overwritten[op["inputs"][0]]
            if ops[at]["phase"] != "forward":
                continue  # the in-place op itself is rerun in the backward (min-cut)
            op["phase"] = "forward"
            op["scope"] = ops[at]["scope"]
            tensors[op["outputs"][0]]["kind"] = "activation"
            moved.setdefault(at, []).append(op)
            hoisted.add(k)
    stats["inplace_clones_hoisted"] += len(hoisted)
    out = []
    for k, op in enumerate(ops):
        out.extend(moved.get(k, ()))
        if k not in hoisted:
            out.append(op)
    return out


# infinitely_differentiable_silu_backward as aot 1.13 traces it: eager's
# backward runs the fused aten.silu_backward instead (the traced formula is
# the one for tensor subclasses such as the tracer's).
SILU_BACKWARD_PARTS = ["aten.sigmoid.default", "aten.empty_like.default", "aten.fill.Scalar",
                       "aten.sub.Tensor", "aten.mul.Tensor", "aten.add.Scalar",
                       "aten.mul.Tensor"]


def fuse_silu_backward(ops, tensors, stats):
    """Replaces each traced SiLU derivative, grad * (s * (1 + x * (1 - s)))
    with s = sigmoid(x) (seven temporaries: sigmoid, empty_like, fill, sub,
    mul, add, mul, then the mul by the gradient), by one aten.silu_backward
    op reading the gradient and x, as eager runs it: one new buffer instead of
    up to four alive at once. Matched by op types and dataflow: the parts read
    only x and each other, and only the parts and the final mul read them."""
    producer, readers = {}, {}
    for k, op in enumerate(ops):
        for o in op["outputs"]:
            producer[o] = k
        for i in op["inputs"]:
            readers.setdefault(i, []).append(k)
    drop, fused = set(), 0
    for k, op in enumerate(ops):
        if op["phase"] != "backward" or op["type"] != SILU_BACKWARD_PARTS[0] or k in drop:
            continue
        x = op["inputs"][0]
        part = [k]
        made = set(op["outputs"])
        # Follow the chain in program order (the next 64 ops): each next op reads
        # only x and parts.
        j = k + 1
        while len(part) < len(SILU_BACKWARD_PARTS) and j < min(len(ops), k + 64):
            q = ops[j]
            if q["phase"] == "backward" and set(q["inputs"]) <= made | {x} and \
                    set(q["inputs"]) & made:
                if q["type"] != SILU_BACKWARD_PARTS[len(part)]:
                    break
                part.append(j)
                made.update(q["outputs"])
            j += 1
        if len(part) != len(SILU_BACKWARD_PARTS):
            continue
        last = ops[part[-1]]["outputs"]
        outer = {r for o in made for r in readers.get(o, []) if r not in part}
        if len(outer) != 1 or len(last) != 1:
            continue
        g = outer.pop()
        gop = ops[g]
        if (gop["type"] != "aten.mul.Tensor" or len(gop["inputs"]) != 2
                or last[0] not in gop["inputs"]
                or any(r != g for r in readers.get(last[0], []))
                or any(tensors[o]["kind"] != "temporary" for o in made)):
            continue
        grad = next(i for i in gop["inputs"] if i != last[0])
        if tensors[grad]["kind"] != "gradient":
            continue
        gop["type"] = "aten.silu_backward.default"
        gop["inputs"] = [grad, x]
        gop.pop("workspace_bytes", None)
        drop.update(part)
        for o in made:
            del tensors[o]
        fused += 1
    stats["silu_backward_fused"] = fused
    return [op for k, op in enumerate(ops) if k not in drop]


def eager_cpu_dropout(ops, tensors):
    """torch 2.x traces F.dropout as aten.native_dropout, whose mask is bool;
    eager on the CPU runs no fused kernel (`_dropout_impl`: a noise tensor of
    the input's dtype, bernoulli_, div_, input * noise) and saves that noise
    for the backward, 4x the bytes of the mask in float32. The mask takes the
    input's dtype (the same bytes as eager's noise). CUDA's eager dropout is
    the fused native_dropout, left as traced by export(device="cuda")."""
    changed = 0
    for op in ops:
        if (op["phase"] == "forward" and op["type"] == "aten.native_dropout.default"
                and len(op["outputs"]) == 2):
            out, mask = (tensors[o] for o in op["outputs"])
            if mask["dtype"] == "bool" and out["dtype"] != "bool":
                mask["dtype"] = out["dtype"]
                changed += 1
    return changed


def sink_backward_views(ops, tensors):
    """Moves each backward op that only makes views (detach, view, t, ...) to
    just before its first backward reader. aot's partitioner puts the detach
    of every saved tensor at the top of the backward graph; left there, each
    one would make a checkpoint plan recompute its tensor when the backward
    starts. A view owns no memory and its base lives to the view's last use
    either way, so the baseline program is unchanged."""
    def alias_only(op):
        return (op["phase"] == "backward" and op["outputs"]
                and all("alias_of" in tensors[o] for o in op["outputs"]))

    readers = {}
    for k, op in enumerate(ops):
        for i in op["inputs"]:
            readers.setdefault(i, []).append(k)
    key = [(k, 0) for k in range(len(ops))]
    for k in range(len(ops) - 1, -1, -1):
        if not alias_only(ops[k]):
            continue
        after = [key[r] for o in ops[k]["outputs"] for r in readers.get(o, []) if r > k]
        if after:
            first = min(after)
            key[k] = (first[0], first[1] - 1)
    order = sorted(range(len(ops)), key=lambda k: key[k])
    return [ops[k] for k in order]


def export(model, example_inputs, target=None, style="joint", name="model",
           partition_fn=default_partition, with_stats=False, record_inplace=True,
           target_device="cpu", workspace="rules", times=False):
    """memplan.graph/1 (a dict) of one training step of `model` on
    `example_inputs` (a tuple) with the cross-entropy loss against `target`
    (random, shaped from the output, when None). The model is not modified.
    record_inplace=False writes the functionalized graph as traced (eager's
    in-place ops then allocate, as in a compiled step). workspace: per-op
    scratch from "rules" (workspace.py: shapes and device), "measure"d by
    replaying the step on this CPU (torch.profiler; the tests' oracle), or
    "none". times=True: each op's time_us measured by replaying the traced
    graphs on this CPU (one thread, the least of 3 runs after a warm-up; the
    planner's costs then, instead of its roofline). target_device: where
    the eager step will run ("cpu" or "cuda"; the graph is traced on this
    CPU either way): eager kernels that differ (dropout) follow it."""
    if target_device not in ("cpu", "cuda"):
        raise ValueError(f"target_device {target_device!r}: cpu or cuda")
    if workspace not in ("rules", "measure", "none"):
        raise ValueError(f"workspace {workspace!r}: rules, measure or none")
    if style not in ("joint", "forward"):
        raise ValueError(f"style {style!r}: joint or forward")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    if target is None:
        target = make_target(model, inputs)
    # A model and inputs on the meta device are traced without data (nothing
    # allocated, no kernel run). Tensors the model creates must follow its
    # inputs' device (torch.arange(n, device=x.device)): a device context
    # around AOT's trace loses the backward.
    PROGRESS("tracing (AOTAutograd)")
    graphs, primals = capture(model, inputs, target, partition_fn, record_inplace)
    PROGRESS("converting")
    graph, stats = convert(graphs, primals, name, style, target_device,
                           measure_workspace=workspace == "measure", measure_times=times)
    if workspace == "rules":
        import workspace as workspace_rules
        stats["workspace_ops"] = workspace_rules.apply_rules(graph, target_device)
    stats["workspace"] = workspace
    errs = validate(graph)
    if errs:
        raise RuntimeError("exported graph fails its self-check:\n  " + "\n  ".join(errs[:20]))
    return (graph, stats) if with_stats else graph


def export_symbolic(model, batch, input_shape=None, seq=None, name="model", **kw):
    """export() with the sizes as symbols: `batch` always, `seq` when the
    model's example_input takes one (default: the model's own length). The
    step is exported at 2^N + 1 sizes around (batch, seq) and every number
    that changes is solved as a multilinear expression (symbolic.py), so
    `memplan analyze --set batch=64` resizes the graph without tracing again.
    Returns (graph, stats); raises symbolic.SymbolicError when some size
    cannot be expressed."""
    import symbolic
    # Batch 1 takes other code paths in some models (transformers' position
    # ids: a slice instead of an expand, both views): solved from batches 2..4
    # and then set to 1.
    names, base, step = ["batch"], [max(batch, 2)], [1]
    if input_shape is None and has_seq(model):
        if seq is None:
            seq = example_inputs(model, 1)[0].shape[1]
        names.append("seq")
        base.append(seq)
        step.append(-1)  # a model may have a maximum length (position embeddings)
        if seq < 3:
            raise ValueError(f"{name}: seq {seq}: symbolic export needs seq >= 3")
    stats_at_base = {}

    count = [0]
    total = 2 ** len(names) + 1

    def export_at(point):
        sizes = dict(zip(names, point))
        count[0] += 1
        PROGRESS.prefix = (f"export {count[0]}/{total} ("
                           + ", ".join(f"{k}={v}" for k, v in sizes.items()) + "): ")
        inputs = example_inputs(model, sizes["batch"], input_shape, seq=sizes.get("seq"))
        target = make_target(model, inputs)
        g, st = export(model, inputs, target, name=name, with_stats=True, **kw)
        if list(point) == base:
            stats_at_base.update(st)
        return g

    try:
        graph, sym_stats = symbolic.make_symbolic(export_at, names, tuple(base), tuple(step))
    finally:
        PROGRESS.prefix = ""
    graph["symbols"]["batch"] = batch
    return graph, {**stats_at_base, **sym_stats, "symbols": graph["symbols"]}


# --------------------------------------------------------------------------
# Self-check (SPEC section 1)
# --------------------------------------------------------------------------
def nbytes(t):
    n = DTYPE_SIZE[t["dtype"]]
    for s in t["shape"]:
        n *= s
    return n


def validate(g):
    """A list of problems (empty when the graph is well formed)."""
    errs = []
    tensors = {}
    for t in g["tensors"]:
        if t["id"] in tensors:
            errs.append(f"duplicate tensor id {t['id']}")
        tensors[t["id"]] = t
        if t["dtype"] not in DTYPE_SIZE:
            errs.append(f"{t['id']}: bad dtype {t['dtype']}")
        if not all((isinstance(s, int) and s >= 0) or (isinstance(s, str) and s)
                   for s in t["shape"]):
            errs.append(f"{t['id']}: bad shape {t['shape']}")
    for t in tensors.values():
        if "alias_of" in t and (t["alias_of"] not in tensors or "alias_of" in tensors[t["alias_of"]]):
            errs.append(f"{t['id']}: alias_of {t.get('alias_of')} is not a base tensor")
        if "grad_of" in t and tensors.get(t["grad_of"], {}).get("kind") != "parameter":
            errs.append(f"{t['id']}: grad_of {t['grad_of']} is not a parameter")
    op_ids, defined = set(), {i for i, t in tensors.items() if t["kind"] in RESIDENT}
    produced, seen_bw = set(), False
    for op in g["ops"]:
        if op["id"] in op_ids or op["id"] in tensors:
            errs.append(f"duplicate op id {op['id']}")
        op_ids.add(op["id"])
        if op["phase"] == "backward":
            seen_bw = True
        elif seen_bw:
            errs.append(f"{op['id']}: forward op after the backward started")
        for i in op["inputs"]:
            if i not in defined:
                errs.append(f"{op['id']}: reads {i} before it is produced")
        for o in op["outputs"]:
            if o not in tensors:
                errs.append(f"{op['id']}: dangling output {o}")
            if o in produced or tensors.get(o, {}).get("kind") in RESIDENT:
                errs.append(f"{o}: produced twice")
            produced.add(o)
            defined.add(o)
    for t in tensors:
        if t not in defined:
            errs.append(f"{t}: never produced")
    for o in g["outputs"]:
        if o not in defined:
            errs.append(f"output {o} is never produced")
    return errs


def dumps(g):
    """Deterministic JSON, one tensor / op per line (diff-friendly)."""
    enc = lambda v: json.dumps(v, separators=(", ", ": "))
    parts = []
    for k, v in g.items():
        if k in ("tensors", "ops"):
            body = ",\n".join("  " + enc(x) for x in v)
            parts.append(f"{json.dumps(k)}: [\n{body}\n]")
        else:
            parts.append(f"{json.dumps(k)}: {enc(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


# --------------------------------------------------------------------------
# Plans applied back: torch.utils.checkpoint around the plan's modules, with a
# selective activation checkpointing policy when the plan has one
# --------------------------------------------------------------------------
class PlanError(ValueError):
    """A plan that cannot be applied to this model as it is written."""


# Ops that only reshape or alias: no buffer of their own, matched on neither
# side (the trace and eager differ in them: view vs _unsafe_view, the
# detaches autograd adds, which SAC ignores). Their SAC policy is recompute.
SAC_SHAPE_OPS = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand",
    "expand_as", "view_as", "unsqueeze", "squeeze", "split", "split_with_sizes", "slice",
    "select", "detach", "alias", "as_strided", "unbind", "chunk", "narrow", "flatten",
    "unflatten", "movedim", "diagonal", "unfold", "lift_fresh", "lift_fresh_copy", "numpy_T",
    "mT",
}

# Functionalization's write-backs of an in-place op on a view (swin's
# attn_mask[h, w] = count): in the trace only; eager writes through the view.
SAC_TRACE_ONLY_OPS = {"slice_scatter", "select_scatter", "as_strided_scatter",
                      "diagonal_scatter"}

# A traced op that eager runs as several ops, each following the policy of
# one of the traced op's outputs: on the CPU eager dropout is a noise tensor,
# bernoulli_ and div_ on it (the mask, output 1) and the product (output 0)
# (see eager_cpu_dropout).
# Eager CPU batch norm (training) first makes an empty reserve tensor, then
# runs native_batch_norm (None: the op's policy; -1: recompute).
SAC_EAGER_EXPANSIONS = {
    ("cpu", "native_dropout"): [("empty_like", 1), ("bernoulli", 1), ("div", 1), ("mul", 0)],
    ("cpu", "_native_batch_norm_legit"): [("empty", -1), ("native_batch_norm", None)],
}


def _sac_name(op_type):
    """'aten.relu_.default' -> 'relu': the packet name, without the in-place
    underscore and the functionalization suffix."""
    parts = str(op_type).split(".")
    name = parts[1] if len(parts) >= 2 and parts[0] == "aten" else \
        ".".join(parts[:-1]) if len(parts) > 1 else parts[0]
    name = name.replace("aten::", "")
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    if name.endswith("_functional"):
        name = name[:-len("_functional")]
    return name


def _is_shape_op(op_type, overload=None):
    if _sac_name(op_type) in SAC_SHAPE_OPS:
        return True
    return bool(overload is not None and getattr(overload, "is_view", False))


def _resolve(op_type):
    """The OpOverload of 'aten.view.default', or None."""
    parts = str(op_type).split(".")
    if len(parts) != 3:
        return None
    try:
        return getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    except AttributeError:
        return None


def sac_schedule(region, target_device="cpu"):
    """The policy schedule of one plan region ({"module", "ops"}): the eager
    ops SAC will see, as (name, save, plan op id), views left out."""
    out = []
    for op in region["ops"]:
        if _is_shape_op(op["type"], _resolve(op["type"])) or \
                _sac_name(op["type"]) in SAC_TRACE_ONLY_OPS:
            continue
        name, policy = _sac_name(op["type"]), op["policy"]
        per_output = policy if isinstance(policy, list) else None
        any_save = "save" in per_output if per_output else policy == "save"
        expansion = SAC_EAGER_EXPANSIONS.get((target_device, name))
        whole = any_save and not (per_output is not None and "recompute" in per_output)
        if expansion is None:
            # One eager op saves all its outputs or none. Outputs the plan
            # recomputes next to saved ones are the op's own buffers nothing
            # reads again (batch norm's output before a residual add, beside
            # its statistics): saved, SAC would hold them to the module's
            # recomputation, so the op recomputes (views of other buffers,
            # such as updated running statistics, do not
            # count: memplan writes them with the op's policy). memplan keeps
            # the small saved outputs: it predicts a little high there.
            out.append((name, whole, op["op"]))
            continue
        for eager, output in expansion:
            if output is None:
                save = whole
            elif output < 0:
                save = False
            else:
                save = per_output[output] == "save" if per_output else any_save
            out.append((eager, save, op["op"]))
    return out


class _SacPolicy:
    """The policy function of one checkpointed module call: the k-th eager op
    (views left out) gets the k-th entry of the schedule. A mismatch raises
    PlanError naming the module, the position, and both ops."""

    def __init__(self, module, schedule):
        self.module, self.schedule, self.pos = module, schedule, 0

    def __call__(self, ctx, func, *args, **kwargs):
        from torch.utils.checkpoint import CheckpointPolicy
        if _is_shape_op(str(func), func):
            return CheckpointPolicy.PREFER_RECOMPUTE
        name = _sac_name(func)
        if self.pos >= len(self.schedule):
            raise PlanError(f"plan module {self.module!r}: eager runs {func} after the "
                            f"{len(self.schedule)} ops the plan lists for it")
        want, save, op_id = self.schedule[self.pos]
        if name != want:
            raise PlanError(f"plan module {self.module!r}: eager op #{self.pos} is {func}, "
                            f"the plan expects {want} (plan op {op_id})")
        self.pos += 1
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE


def apply_plan(model, plan, target_device="cpu"):
    """Wraps each module the plan lists (`"modules"`, written by `memplan plan
    --granularity module` or `sac`; paths as in model.named_modules()) in
    torch.utils.checkpoint (non-reentrant: parameters get gradients even when
    no input requires one; the saved tensors of the recomputed forward are
    freed after their backward use, as memplan's checkpoint programs assume).
    A sac plan also gives each module a selective activation checkpointing
    policy (torch.utils.checkpoint.create_selective_checkpoint_contexts):
    MUST_SAVE for the ops whose buffers the plan keeps, PREFER_RECOMPUTE for
    the rest, matched to eager's ops by position (views left out; see
    sac_schedule). torch 2.x only. `plan` is a dict or a path. Returns the
    list of wrapped module paths."""
    if not isinstance(plan, dict):
        with open(plan) as f:
            plan = json.load(f)
    from torch.utils.checkpoint import checkpoint
    if plan.get("recomputed") and not plan.get("modules"):
        raise PlanError(
            "this plan decides per tensor (memplan plan --granularity op) and recomputes each "
            "tensor on demand, which neither torch.utils.checkpoint nor a selective "
            "checkpointing policy can express; plan with --granularity sac (op decisions "
            "inside modules) or --granularity module")
    sac = {r["module"]: sac_schedule(r, target_device) for r in plan.get("sac", [])}
    if sac and not TORCH2:
        raise PlanError(f"a sac plan needs torch 2.x (selective activation checkpointing); "
                        f"this is torch {torch.__version__}")
    wrapped = []
    for path in plan.get("modules", []):
        try:
            mod = model.get_submodule(path)
        except AttributeError:
            raise PlanError(f"plan module {path!r} is not a submodule of the model")
        if getattr(mod, "_memplan_checkpointed", False):
            continue
        inner = mod.forward
        context = {}
        if path in sac:
            from torch.utils.checkpoint import create_selective_checkpoint_contexts

            def make_contexts(_path=path, _schedule=sac[path]):
                # A fresh policy per call: each call of the module runs the
                # schedule from its start.
                return create_selective_checkpoint_contexts(
                    _SacPolicy(_path, _schedule), allow_cache_entry_mutation=True)
            context = {"context_fn": make_contexts}

        def fwd(*args, _inner=inner, _context=context, **kwargs):
            # Copy list arguments: the recomputation reads them in the backward,
            # and a caller may have appended to the list since (DenseNet's
            # blocks pass one growing list of features to every layer).
            args = tuple(list(a) if isinstance(a, list) else a for a in args)
            return checkpoint(_inner, *args, use_reentrant=False, **_context, **kwargs)
        mod.forward = fwd
        mod._memplan_checkpointed = True
        wrapped.append(path)
    return wrapped


# --------------------------------------------------------------------------
# Measurement of one eager step (torch.profiler memory events)
# --------------------------------------------------------------------------
def _tensor_bytes(ts):
    seen, n = set(), 0
    for t in ts:
        if id(t) not in seen:
            seen.add(id(t))
            n += t.numel() * t.element_size()
    return n


def _peak_from_kineto(prof):
    """(peak above start, end above start, number of events) from the profiler's
    [memory] events: event.nbytes() is +size on alloc, -size on free, for c10
    CPU allocations made while profiling. (Debian's build has no kineto trace
    export, so the events are read from prof.profiler.kineto_results.)"""
    evs = [e for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    start = (lambda e: e.start_ns()) if evs and hasattr(evs[0], "start_ns") else \
        (lambda e: e.start_us())
    evs.sort(key=start)  # stable: keeps record order on ties
    cur = peak = 0
    for e in evs:
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak, cur, len(evs)


def _peak_stack(prof):
    """Cross-check from the event tree (allocator running total) and the op
    stack around the peak allocation."""
    allocs = []

    def walk(node, stack):
        ef = node.extra_fields
        if hasattr(ef, "total_allocated") and ef.device.type == "cpu":
            allocs.append((node.start_time_ns, ef.total_allocated, ef.alloc_size, stack))
        for c in node.children:
            walk(c, stack + [node.name] if node.name != "[memory]" else stack)

    try:
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except AttributeError:
        return None, None
    for r in roots:
        walk(r, [])
    if not allocs:
        return None, None
    allocs.sort(key=lambda a: a[0])
    start = allocs[0][1] - allocs[0][2]
    top = max(allocs, key=lambda a: a[1])
    return top[1] - start, " > ".join(top[3]) or None


def step_seconds(model, inputs, target, repeats=3):
    """Median wall time of `repeats` eager training steps (grads None,
    forward, loss, backward) after one warm-up step, one intra-op thread."""
    torch.set_num_threads(1)
    times = []
    for _ in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        step_loss(model, inputs, target).backward()
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def measure(model, example_inputs, target=None, plan=None, threads=1):
    """Peak memory of one eager CPU training step (forward, loss, backward,
    .grad None before), after one unmeasured warm-up step. With `plan`, the
    plan's modules are checkpointed first (on the model itself). Returns a
    dict: peak_bytes = resident_bytes (parameters, buffers, inputs) + peak
    above the start of the step."""
    from torch.profiler import ProfilerActivity, profile
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    if target is None:
        target = make_target(model, inputs)
    wrapped = apply_plan(model, plan) if plan is not None else []
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(threads)  # fewer per-thread scratch buffers, stabler numbers
    try:
        def step():
            model.zero_grad(set_to_none=True)
            loss = step_loss(model, inputs, target)
            loss.backward()
            return loss

        torch.manual_seed(SEED + 3)
        step()  # warm-up: lazy initialisation, caches
        model.zero_grad(set_to_none=True)
        gc.collect()
        resident = _tensor_bytes(list(model.parameters()) + list(model.buffers())
                                 + list(inputs) + [target])
        torch.manual_seed(SEED + 3)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss = step()
            del loss
    finally:
        torch.set_num_threads(prev_threads)
    peak, end, n_events = _peak_from_kineto(prof)
    tree_peak, stack = _peak_stack(prof)
    grads = _tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
    return {
        "torch": torch.__version__,
        "peak_bytes": resident + peak,
        "resident_bytes": resident,
        "peak_above_start": peak,
        "end_above_start": end,
        "param_grad_bytes": grads,
        "checkpointed_modules": wrapped,
        "peak_op_stack": stack,
        "memory_events": n_events,
        "event_tree_peak_above_start": tree_peak,
        "method": "torch.profiler(profile_memory=True): running sum of CPU [memory] "
                  f"event sizes, {threads} intra-op thread(s), after 1 warm-up step",
    }


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def _shape(text):
    try:
        return tuple(int(s) for s in text.replace("x", ",").split(",") if s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected e.g. 3,64,64")


def _setup(args):
    meta = getattr(args, "device", "cpu") != "cpu"
    model = load_model(args.model, device="meta" if meta else None)
    inputs = example_inputs(model, args.batch, args.input_shape)
    return model, inputs, make_target(model, inputs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("export", "measure"):
        p = sub.add_parser(name)
        p.add_argument("model", help="torchvision:NAME or package.module:factory")
        p.add_argument("--batch", type=int, required=True)
        p.add_argument("--input-shape", type=_shape, default=None,
                       help="per-sample input shape, e.g. 3,64,64 (default: the model's "
                            "example_input, else 3,224,224)")
    ex = sub.choices["export"]
    ex.add_argument("-o", "--output", required=True)
    ex.add_argument("--style", choices=("joint", "forward"), default="joint")
    ex.add_argument("--static", action="store_true",
                    help="integer shapes at --batch only (default: symbols batch, and seq "
                         "for sequence models, solved from a few exports at nearby sizes)")
    ex.add_argument("--seq", type=int, help="sequence length for sequence models "
                                            "(default: the model's)")
    ex.add_argument("--device", default="cpu", choices=("cpu", "meta", "cuda", "h100", "h200",
                                                        "a100"),
                    help="cpu: traced on this CPU's tensors, for an eager step on the CPU; "
                         "meta: traced without data (nothing allocated, no step run), for the "
                         "CPU; cuda, h100, h200, a100: traced without data, for an eager step "
                         "on that GPU (its dropout kernel; no CPU scratch)")
    ex.add_argument("--measure-workspace", action="store_true",
                    help="per-op scratch measured by replaying the step on this CPU "
                         "(--device cpu only) instead of workspace.py's rules")
    ex.add_argument("--measure-times", action="store_true",
                    help="each op's time_us measured by replaying the step's graphs on this "
                         "CPU, one thread (--device cpu --static only): memplan plans with "
                         "these times instead of its roofline")
    ex.add_argument("--partition", choices=("default", "min_cut"), default="default",
                    help="aot partitioner (joint style): default saves what the backward "
                         "reads; min_cut is PyTorch's rematerializing partitioner")
    ms = sub.choices["measure"]
    ms.add_argument("--plan", help="memplan.plan/1 to apply before measuring: its modules "
                                   "(memplan plan --granularity module) or its selective "
                                   "checkpointing policies (--granularity sac)")
    ms.add_argument("--json", help="write the report here (also printed)")
    for p in (ex, ms):
        p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)
    PROGRESS.enabled = sys.stderr.isatty() and not args.quiet
    try:
        return _run(args)
    except Exception as e:  # noqa: BLE001 - bad input is exit 2 naming the model
        print(f"memplan_torch: {args.model}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def _run(args):
    try:
        return _run_command(args)
    finally:
        PROGRESS.done()


def _run_command(args):
    PROGRESS("building " + args.model)
    model, inputs, target = _setup(args)
    if args.cmd == "export":
        pf = default_partition if args.partition == "default" else min_cut_rematerialization_partition
        parts = args.model.split(":")
        name = ":".join(parts[:2]) if parts[0] == "hf" else parts[-1]
        if args.measure_workspace and args.device != "cpu":
            raise ValueError("--measure-workspace replays the step on this CPU: it needs "
                             "--device cpu")
        kw = {"target_device": "cpu" if args.device in ("cpu", "meta") else "cuda",
              "workspace": "measure" if args.measure_workspace else "rules"}
        if args.measure_times:
            if args.device != "cpu" or not args.static:
                raise ValueError("--measure-times replays the step on this CPU at one size: it "
                                 "needs --device cpu and --static")
            kw["times"] = True
        if args.static:
            if args.seq is not None:
                inputs = example_inputs(model, args.batch, args.input_shape, seq=args.seq)
                target = make_target(model, inputs)
            graph, stats = export(model, inputs, target, style=args.style, name=name,
                                  partition_fn=pf, with_stats=True, **kw)
        else:
            import symbolic
            try:
                graph, stats = export_symbolic(model, args.batch, args.input_shape, seq=args.seq,
                                               name=name, style=args.style, partition_fn=pf,
                                               **kw)
            except (symbolic.SymbolicError, ValueError) as e:
                print(f"memplan_torch: {args.model}: {e} (export --static writes integer "
                      "shapes)", file=sys.stderr)
                return 2
        with open(args.output, "w") as f:
            f.write(dumps(graph))
        fw = sum(1 for o in graph["ops"] if o["phase"] == "forward")
        print(json.dumps({"output": args.output, "ops": len(graph["ops"]), "forward_ops": fw,
                          "tensors": len(graph["tensors"]), **stats}, indent=1))
        return 0
    PROGRESS("measuring one eager step")
    report = measure(model, inputs, target, plan=args.plan)
    report = {"model": args.model, "batch": args.batch, **report}
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
