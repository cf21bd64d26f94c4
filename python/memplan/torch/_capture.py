"""Capture: one training step traced by AOTAutograd into forward and backward fx graphs,
with each node's module scope and eager in-place origin recorded."""

import contextlib
import copy

import torch
import torch.fx
import torch.nn.functional as F

from ._common import (
    CHECKPOINT_KEY,
    HELD_KEY,
    INPLACE_KEY,
    NODE_KEY,
    SCOPE_KEY,
    SEED,
    TORCH2,
    ExportError,
    FunctionalTensor,
    FunctionalTensorMode,
    aot_function,
    aot_module,
    data_dependent,
    data_dependent_message,
    default_partition,
    make_boxed_func,
    non_fake_input,
    non_fake_message,
    plain_tensor_attributes,
)
from ._spec import WithLoss, output_tensors


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
    * backward ops made between two grad_fn post-hooks ran in one autograd
      node: they carry its count (meta[NODE_KEY]), so the exporter can keep
      what the node read until the node ends, as eager's engine does.
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
        self.region, self.regions = None, 0  # torch.utils.checkpoint call being traced
        self.autograd_nodes = 0  # grad_fn post-hooks fired so far
        self.handles = []
        self.inplace_sources = 0

    def __enter__(self):
        st = self
        self.orig_create = torch.fx.Graph.create_node
        self.orig_run_node = torch.fx.Interpreter.run_node

        def create_node(graph, *a, **k):
            node = st.orig_create(graph, *a, **k)
            if st.region is not None:
                node.meta[CHECKPOINT_KEY] = st.region
            node.meta[NODE_KEY] = st.autograd_nodes
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
        self.patched = _patch_checkpoint(self)
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
        _unpatch(self.patched)
        self.tagged.clear()

    @contextlib.contextmanager
    def checkpoint_region(self):
        """Ops traced inside are tagged with one region (the outermost call's)."""
        if self.region is not None:
            yield
            return
        self.region = self.regions
        self.regions += 1
        try:
            yield
        finally:
            self.region = None

    def _walk(self, tensors):
        """Untagged autograd nodes reachable from `tensors` (stops at tagged ones)."""
        seen, todo = set(), [t.grad_fn for t in output_tensors(tensors)]
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

    def hook_all(self, loss):
        """A post-hook on every autograd node behind `loss` that has none, so
        each node's backward ops get a count of their own (NODE_KEY)."""
        seen, todo = set(), [loss.grad_fn]
        while todo:
            fn = todo.pop()
            if fn is None or fn in seen or type(fn).__name__ == "AccumulateGrad":
                continue
            seen.add(fn)
            if fn not in self.tagged:
                self.tagged[fn] = None
                fn.register_hook(self._count_hook)
            todo.extend(f for f, _ in fn.next_functions)

    def _count_hook(self, grad_inputs, grad_outputs):
        self.autograd_nodes += 1

    def _pre(self, mod, inputs):
        if self.stack:
            self._tag(self._walk(inputs), self.stack[-1])
        self.stack.append(self.names[mod])

    def _post(self, mod, inputs, output):
        scope = self.stack.pop()
        self._tag(self._walk(output), scope)

    def _bw_hook(self, scope):
        def hook(grad_inputs, grad_outputs):
            self.autograd_nodes += 1
            for node in self.pending:
                node.meta.setdefault(SCOPE_KEY, scope)
            self.pending.clear()
        return hook


def _patch_checkpoint(recorder):
    """torch.utils.checkpoint runs the checkpointed function plainly while
    tracing, inside recorder.checkpoint_region() (AOTAutograd would trace it
    as if uncheckpointed anyway; _recompute.py writes eager's recompute).
    Both variants: reentrant (CheckpointFunction.apply) and not (the
    generator around the call). Returns what to restore."""
    import torch.utils.checkpoint as ckpt
    saved = []

    class Plain:
        @staticmethod
        def apply(function, preserve, *args):
            with recorder.checkpoint_region():
                return function(*args)

    def generator(*args, **kwargs):
        with recorder.checkpoint_region():
            yield

    for name, value in (("CheckpointFunction", Plain),
                        ("_checkpoint_without_reentrant_generator_impl", generator),
                        ("_checkpoint_without_reentrant_generator", generator)):
        if hasattr(ckpt, name):
            saved.append((ckpt, name, getattr(ckpt, name)))
            setattr(ckpt, name, value)
    return saved


def _unpatch(saved):
    for obj, name, value in saved:
        setattr(obj, name, value)


def held_tensors(x, depth=0, seen=None):
    """The tensors an output object keeps alive: in tensors, lists, tuples
    and dicts (transformers' ModelOutput), and in the attributes of other
    plain objects (a transformers KV cache in `past_key_values`), modules
    excepted, four levels deep."""
    seen = set() if seen is None else seen
    if isinstance(x, torch.Tensor):
        return [x]
    if id(x) in seen or depth > 4 or x is None or isinstance(x, (str, bytes, int, float, bool,
                                                                 torch.nn.Module)):
        return []
    seen.add(id(x))
    if isinstance(x, dict):
        items = list(x.values())
    elif isinstance(x, (list, tuple)):
        items = list(x)
    elif hasattr(x, "__dict__"):
        items = list(vars(x).values())
    else:
        return []
    return [t for e in items for t in held_tensors(e, depth + 1, seen)]


def _tensor_attributes_as_buffers(module):
    """Registers each plain tensor attribute (plain_tensor_attributes) of
    `module`, the exporter's copy, as a non-persistent buffer: the trace then
    takes it as an input, as it takes buffers, where it would otherwise meet a
    real tensor among its fake ones, and the graph counts it as the resident
    buffer it is on the device."""
    for path, value in plain_tensor_attributes(module):
        mod_name, _, name = path.rpartition(".")
        mod = module.get_submodule(mod_name)
        delattr(mod, name)
        mod.register_buffer(name, value, persistent=False)


def _named(module, what):
    """Named parameters/buffers in aot_module's primal order (duplicates kept)."""
    try:
        return list(getattr(module, "named_" + what)(remove_duplicate=False))
    except TypeError:  # torch 1.13
        from functorch._src.named_members_polyfill import _named_buffers, _named_parameters
        fn = _named_parameters if what == "parameters" else _named_buffers
        return list(fn(module, remove_duplicate=False))


def mark_held(output):
    """Tags the fx nodes of the model's output tensors with meta[HELD_KEY]
    while AOTAutograd traces (torch 2.x: the proxy of each tensor's
    functional value). Passes where no proxy mode runs (AOT's metadata pass)
    tag nothing."""
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY)
    if mode is None:
        return
    from torch.fx.experimental.proxy_tensor import get_proxy_slot
    for t in held_tensors(output):
        inner = t
        if FunctionalTensor is not None and isinstance(t, FunctionalTensor):
            torch._sync(t)
            inner = torch._from_functional_tensor(t.elem)
        slot = get_proxy_slot(inner, mode.tracer, None)
        proxy = getattr(slot, "proxy", None)
        if proxy is not None:
            proxy.node.meta[HELD_KEY] = True


def _trace(traced, args, wrapped, names, record_inplace, on_meta, real_values,
           identity_saved=False):
    """One forward and backward of the AOT-compiled step (the compilers
    record the graphs). real_values: data-dependent values from the real
    tensors (_real_values). A data-dependent error carries the module stack
    it happened in (memplan_stack). identity_saved: what the step saves goes
    through identity hooks (a compiled step's partition may save a buffer
    the forward then updates)."""
    torch.manual_seed(SEED + 3)
    recorder = ScopeRecorder(wrapped, names, record_inplace)
    wrapped.on_loss = recorder.hook_all
    context = (_meta_patches() if on_meta else _real_values() if real_values
               else contextlib.nullcontext())
    with recorder, context as fake:
        if fake is not None:  # static shapes: fakified here, real data behind
            args = [fake.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor)
                    else a for a in args]
        try:
            # Identity hooks on what the step saves: a buffer the forward
            # updates (batch norm's running statistics, written back after
            # the graph) may be saved for a backward that recomputes from it,
            # which autograd's version check would refuse. Only the graphs
            # are wanted here, not the gradients.
            hooks = (torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
                     if identity_saved else contextlib.nullcontext())
            with hooks:
                out = traced(*args)
            (out[0] if isinstance(out, (tuple, list)) else out).backward()
        except Exception as e:  # noqa: BLE001 - annotated and re-raised
            e.memplan_stack = list(recorder.stack)
            raise


def capture(model, inputs, target, partition_fn=default_partition, record_inplace=True,
            user_loss=None, autocast=None, hold_outputs=True, decompositions=None,
            compiled=False):
    """Traces a copy of model + loss with aot_module. Returns ({"fw", "bw"}:
    (GraphModule, example args)), [(primal name, kind)]. target None: the
    loss is user_loss(output) and the step has no target input. autocast:
    the step under torch.autocast(dtype=autocast). hold_outputs: the model's
    output tensors are tagged (meta[HELD_KEY]) as held through the backward.
    decompositions: AOTAutograd's decomposition table (torch 2.x; inductor's
    for a step compiled with it). compiled: the graphs as torch.compile runs
    them: ops whose results nothing reads are kept (eager never runs them), a
    model that computes its own loss also returns its other outputs
    (WithLoss model_outputs), and what the step saves goes through identity
    hooks (_trace)."""
    if hold_outputs and not TORCH2:
        raise ValueError("hold_outputs needs torch 2.x (this is torch "
                         f"{torch.__version__}); export with hold_outputs=False "
                         "(--no-hold-outputs)")
    wrapped = WithLoss(copy.deepcopy(model), user_loss, has_target=target is not None,
                       autocast=autocast, on_output=mark_held if hold_outputs else None,
                       model_outputs=compiled)
    _tensor_attributes_as_buffers(wrapped)
    targets = [] if target is None else [target]
    unfrozen = _unfreeze_input_grad_modules(wrapped)
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

        traced = aot_function(step_fn, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                              partition_fn=partition_fn, decompositions=decompositions)
        args = [t for _, t in params + buffers] + list(inputs) + targets
    else:
        traced = aot_module(wrapped, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                            partition_fn=partition_fn)
        args = list(inputs) + targets
        params, buffers = _named(wrapped, "parameters"), _named(wrapped, "buffers")
    on_meta = inputs[0].is_meta
    try:
        _trace(traced, args, wrapped, names, record_inplace, on_meta, real_values=False,
               identity_saved=compiled)
    except Exception as e:  # noqa: BLE001 - only data-dependent ops are handled
        if non_fake_input(e):
            raise ExportError(non_fake_message(e, getattr(e, "memplan_stack", []))) from None
        if not data_dependent(e):
            raise
        if on_meta:
            raise ExportError(data_dependent_message(e, e.memplan_stack)) from None
        # Traced again with the real values behind the fake tensors.
        _trace(traced, args, wrapped, names, record_inplace, on_meta, real_values=True,
               identity_saved=compiled)

    for gm, _ in graphs.values():
        if not compiled:
            remove_dead_code(gm)

    def strip(n):
        return n[len("model."):] if n.startswith("model.") else n

    primals = [(strip(n), "parameter") for n, _ in params]
    primals += [(strip(n), "buffer") for n, _ in buffers]
    in_names = ["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))]
    primals += [(n, "input") for n in in_names] + [("target", "input") for _ in targets]
    # The forward graph is replayed on the real tensors in primal order (torch
    # 2.x hands the compiler fake tensors).
    real = [t for _, t in params + buffers] + list(inputs) + targets
    graphs["fw"] = (graphs["fw"][0], real)
    graphs["unfrozen"] = [strip(n) for n in unfrozen]
    return graphs, primals


def _unfreeze_input_grad_modules(wrapped):
    """transformers' enable_input_require_grads (gradient checkpointing on
    transformers 5, PEFT) hooks the input embeddings: their output becomes a
    leaf that requires grad, so eager backpropagates into it. AOTAutograd
    differentiates only its primals, so the copy's frozen weights of such a
    module train while tracing; the exporter drops their gradient again
    (drop_gradients). Returns their names."""
    names = []
    for mod_name, mod in wrapped.named_modules():
        hooks = getattr(mod, "_forward_hooks", {}).values()
        if not any(getattr(h, "__name__", "") == "make_inputs_require_grads" for h in hooks):
            continue
        for p_name, p in mod.named_parameters():
            if not p.requires_grad:
                p.requires_grad_(True)
                names.append(f"{mod_name}.{p_name}")
    return names


@contextlib.contextmanager
def _real_values():
    """Data-dependent values (`.item()`, `bool(t.all())`: transformers 5's
    packed-sequence check) answered from the real tensors: the step is traced
    on this CPU's data, so AOTAutograd's fake tensors carry real ones
    (functorch's fake_tensor_propagate_real_tensors) and the branch eager
    takes is the branch traced. Needs a shape environment for the unbacked
    values; shapes stay static."""
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    with torch._functorch.config.patch(fake_tensor_propagate_real_tensors=True):
        mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True,
                              allow_non_fake_inputs=True)
        with tracing(TracingContext(mode)), _quiet("torch.fx.experimental.symbolic_shapes"):
            yield mode


@contextlib.contextmanager
def _quiet(logger):
    """Silences a logger's warnings (propagate_real_tensors logs every guard
    it answers from real values)."""
    import logging
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _meta_patches():
    """What tracing on the meta device needs to give the CPU trace's graph:
    * F.cross_entropy as the ops it decomposes to on the CPU (log_softmax,
      nll_loss_forward): on meta, aten.nll_loss has a Python meta kernel and
      no autograd kernel, so AOT's backward trace would stop at the loss;
    * torch.autocast(device_type="meta") (transformers' RoPE disables
      autocast on its input's device) as the CPU's;
    * transformers 5's packed-sequence check answers "not packed" (the
      exporter's inputs never pack sequences; the CPU trace reads the value);
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
        if query.is_meta:
            from torch.utils._python_dispatch import _disable_current_modes
            gqa = {"enable_gqa": True} if enable_gqa else {}  # the CPU flash kernel takes GQA
            with _disable_current_modes():  # a question, not a traced op
                choice = torch._fused_sdp_choice(stand_in(query), stand_in(key),
                                                 stand_in(value), stand_in(attn_mask), dropout_p,
                                                 is_causal, scale=scale, **gqa)
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
    packed = _unpacked_sequences()
    try:
        yield
    finally:
        F.cross_entropy, torch.autocast = orig, orig_autocast
        F.scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention = orig_sdpa
        if packed is not None:
            packed[0].find_packed_sequence_indices = packed[1]


def _unpacked_sequences():
    """transformers checks whether a causal LM's position ids pack several
    sequences per row, a question about values. The exporter's inputs never
    pack (one sequence per row, positions 0..seq-1), so on meta the check's
    truth test answers "not packed", as it does on the CPU. Returns (module, original)
    to restore, or None when transformers has no such check."""
    import sys
    module = sys.modules.get("transformers.masking_utils")
    original = getattr(module, "find_packed_sequence_indices", None)
    if original is None:
        return None

    def find_packed_sequence_indices(position_ids):
        if not position_ids.is_meta:
            return original(position_ids)
        # Its ops traced as on the CPU, its question about values answered.
        classes = [c for c in (torch.Tensor, FunctionalTensor) if c is not None]
        own = [c.__dict__.get("__bool__") for c in classes]  # None: inherited
        truths = [c.__bool__ for c in classes]
        for c, truth in zip(classes, truths):
            c.__bool__ = (lambda t, truth=truth: True if t.is_meta else truth(t))
        try:
            return original(position_ids)
        finally:
            for c, mine in zip(classes, own):
                if mine is None:
                    del c.__bool__
                else:
                    c.__bool__ = mine

    module.find_packed_sequence_indices = find_packed_sequence_indices
    return module, original


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
