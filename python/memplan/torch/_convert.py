"""Conversion of the captured fx graphs to memplan.graph/1 tensors and ops."""

import contextlib
import operator
import sys
import time

import torch
import torch.fx

from ._capture import _packet_name
from ._common import (
    CHECKPOINT_KEY,
    DTYPES,
    EXPORTER,
    EXTRA_VIEWS,
    HELD_KEY,
    INPLACE_KEY,
    NODE_KEY,
    SCOPE_KEY,
    SEED,
    TORCH2,
    WORKSPACE_MIN,
    ExportError,
)


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


def layout(t):
    """How a tensor's strides lay it out, where that is not the plain
    row-major (contiguous) one: "channels_last" (a dense NHWC / NDHWC tensor,
    t.is_contiguous(memory_format=torch.channels_last[_3d])) or "strided"
    (any other: a permuted or sliced view, an expanded one); None when
    t.is_contiguous(). The CPU scratch rules read it (_workspace.py): which
    layout oneDNN runs a convolution in, which inputs a kernel copies first.
    On the meta device the strides are those torch's meta functions give."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_contiguous():
        return None
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    if fmt is not None and t.is_contiguous(memory_format=fmt):
        return "channels_last"
    return "strided"


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
    its first argument when that is a placeholder of the same shape. A cast
    (`_to_copy`: a bfloat16 model's float32 running statistics) maps as
    the value it casts."""
    res = {}
    phs = set(placeholders)
    for out in nodes:
        node = out
        while (node.op == "call_function" and str(node.target) == "aten._to_copy.default"
               and isinstance(node.args[0], torch.fx.Node)):
            node = node.args[0]
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
            raise ExportError(f"{out.name}: the forward updates an input the exporter cannot "
                             f"name (produced by {getattr(src, 'target', src)})")
        res[out] = target
    return res


def _conv_groups(node):
    t = str(node.target)
    k = {"aten.convolution.default": 8, "aten.convolution_backward.default": 9}.get(t)
    if k is None or len(node.args) <= k or not isinstance(node.args[k], int):
        return 1
    return node.args[k]


def convert(graphs, primals, name, style="joint", target_device="cpu", measure_workspace=True,
            measure_times=False, outputs_held=None, compiled=None):
    """memplan.graph/1 of the captured graphs, and stats. outputs_held: the
    loop holds the model's output (the forward nodes tagged HELD_KEY join the
    graph's outputs, alive to the end), drops it (False), or not stated (None).
    compiled: the torch.compile backend that runs the graphs ("aot_eager",
    "inductor"): the graphs are written as they run, each value freed after
    its last reader, without the passes that model eager's kernels and
    autograd engine (hold_to_node_end, fuse_silu_backward, eager_cpu_dropout)."""
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
    # Compiled, they are new tensors the forward returns and its epilogue
    # copies into the buffers (small: running statistics), not views.
    updated = {} if compiled else buffer_updates(fw_out_nodes[:n_mut], fw_ph)
    fw_out_nodes = fw_out_nodes[n_mut:]
    bw_out_nodes = list(next(n for n in bw_gm.graph.nodes if n.op == "output").args[0])

    tensors, ops = {}, []
    tid = {}            # fx Node or (fx Node, index) -> tensor id
    storage_owner = {}  # storage ptr -> owning (non-alias) tensor id
    renames = {}        # fx Node -> preferred tensor id

    # The loss, then (a compiled model that computes its own loss) its other
    # outputs, whose gradients are the zeros the compiled backward receives.
    user_ids = ["loss"] + [f"out{i}" for i in range(1, n_user)]
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
        lay = layout(value)
        if lay is not None:
            t["layout"] = lay  # for _workspace.py's CPU rules
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

    regions = {}  # forward op id -> torch.utils.checkpoint region
    autograd_node = {}  # backward op id -> the autograd node it ran in

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
                print(f"memplan export: warning: {node.name} ({node.target}) has no ATen "
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
                op["groups"] = groups  # for _workspace.py's rules
            if measure_times and node.name in secs[phase]:
                op["time_us"] = round(secs[phase][node.name] * 1e6, 3)
            ws = (ws_fw if phase == "forward" else ws_bw).get(node.name, 0)
            if ws >= WORKSPACE_MIN:
                op["workspace_bytes"] = ws
                op["workspace_source"] = "measured"  # _workspace.py's sources
                stats["workspace_ops"] += 1
            if phase == "forward" and CHECKPOINT_KEY in node.meta:
                regions[op_id] = node.meta[CHECKPOINT_KEY]
            if phase == "backward" and NODE_KEY in node.meta:
                autograd_node[op_id] = node.meta[NODE_KEY]
            if (phase == "backward" and str(node.target) == "aten.add.Tensor"
                    and len(in_nodes) == 2 and all(a in grad_flow for a in in_nodes)):
                op["accumulate"] = True
            ops.append(op)

    emit(fw_gm, "forward")
    held = []
    if outputs_held:
        for node in fw_gm.graph.nodes:
            if node.meta.get(HELD_KEY) and node in tid:
                t = root(tid[node])
                if t not in held and t not in user_ids:
                    held.append(t)
    stats["held_outputs"] = held
    stats["checkpoint_regions"] = regions
    if style == "joint":
        for ph, fw_node in zip(bw_ph[:n_saved], fw_out_nodes[n_user:]):
            tid[ph] = tid[fw_node]
        for ph, uid, tv in zip(bw_ph[n_saved:], user_ids, tangents):
            gid = uid + ".grad"
            gid = add_tensor(ph, gid, tv, "gradient")["id"]
            grad_flow.add(ph)
            if uid == "loss":
                ops.append({"id": gid + ".seed", "type": "ones_like", "inputs": [uid],
                            "outputs": [gid], "phase": "backward", "scope": "loss"})
            else:
                ops.append({"id": gid + ".seed", "type": "zeros", "inputs": [],
                            "outputs": [gid], "phase": "backward", "scope": "loss"})
        emit(bw_gm, "backward")
    # torch.autograd.backward holds the loss's seed gradient (its ones) until
    # the backward returns. Compiled steps say so; eager exports keep their
    # published figures (4 bytes under, docs/accuracy.md).
    seed = ["loss.grad"] if compiled and style == "joint" and "loss.grad" in tensors else []
    stats["inplace_clones_hoisted"] = 0
    ops = hoist_inplace_clones(ops, tensors, overwritten, stats)
    if not compiled:
        ops = fuse_silu_backward(ops, tensors, stats)
    ops = sink_backward_views(ops, tensors)
    if target_device == "cpu" and not compiled:
        stats["dropout_noise_as_eager_cpu"] = eager_cpu_dropout(ops, tensors)
    if not compiled:
        stats["held_to_node_end"] = hold_to_node_end(ops, tensors, autograd_node)
    graph = {
        "format": "memplan.graph/1",
        "name": name,
        "source": {"framework": "pytorch", "version": torch.__version__,
                   "exporter": EXPORTER, "style": style,
                   "target_device": target_device,
                   **({"compile": compiled} if compiled else {})},
        "symbols": {},
        "tensors": list(tensors.values()),
        "ops": ops,
        "outputs": user_ids[:1] + (user_ids[1:] if outputs_held else []) + held + seed,
    }
    if outputs_held is not None:
        graph["source"]["outputs_held"] = bool(outputs_held)
    return graph, stats


def hold_to_node_end(ops, tensors, node_of):
    """Eager's engine releases what an autograd node read (its saved tensors,
    its incoming gradient) when the node returns, not after the op that last
    read it: each tensor a node's ops read from outside the node becomes an
    input of the node's last op as well. Views are not that op (they cost
    nothing and are moved to their first reader); gradient-summing ops (the
    engine runs them between nodes) and what they read are left alone.
    Returns the number of inputs added."""
    def view_only(op):
        return op["outputs"] and all("alias_of" in tensors[t] for t in op["outputs"])

    members = {}
    for i, op in enumerate(ops):
        if op["phase"] == "backward" and not op.get("accumulate") and op["id"] in node_of:
            members.setdefault(node_of[op["id"]], []).append(i)
    added = 0
    for idx in members.values():
        compute = [i for i in idx if not view_only(ops[i])]
        if len(idx) < 2 or not compute:
            continue
        made = {t for i in idx for t in ops[i]["outputs"]}
        last = ops[compute[-1]]
        have = set(last["inputs"])
        for i in idx:
            for t in ops[i]["inputs"]:
                if t not in made and t not in have:
                    last["inputs"].append(t)
                    have.add(t)
                    added += 1
    return added


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
        gop.pop("workspace_source", None)
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
