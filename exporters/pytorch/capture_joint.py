#!/usr/bin/python3
"""Capture a real joint (forward + backward) graph of one PyTorch training step
and write it as memplan.graph/1 JSON (see SPEC.md sections 1 and 2).

Prototype for torch 1.13 (functorch.compile.aot_module, default partitioner):

    /usr/bin/python3 exporters/pytorch/capture_joint.py --model cnn_small --batch 8 -o OUT.json

How it works
  1. aot_module traces the model + cross-entropy loss into a joint graph (ATen
     ops, functionalized), the default partitioner splits it into a forward and
     a backward fx graph; our fw/bw "compilers" just record them.
  2. Both graphs are re-run on real tensors (torch.fx.Interpreter) to get the
     shape/dtype of every value, including tuple outputs nobody reads, and the
     storage of every value (to confirm views).
  3. fx nodes become memplan tensors/ops. The forward's saved-tensor outputs
     and the backward's placeholders are mapped to the same tensor ids.
  4. Module scopes are recorded during tracing with module hooks (forward) and
     autograd-node post-hooks (backward), see ScopeRecorder.
"""
import argparse
import copy
import json
import operator
import os
import sys

import torch
import torch.fx
from functorch.compile import aot_module, default_partition, make_boxed_func
# The same helpers aot_module uses to order its primals (1.13 private module).
from functorch._src.named_members_polyfill import _named_buffers, _named_parameters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

SCOPE_KEY = "memplan_scope"
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


# --------------------------------------------------------------------------
# Scope recording
# --------------------------------------------------------------------------
class ScopeRecorder:
    """Tags every fx node created while tracing with meta[SCOPE_KEY].

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
      inherits the scope of the node being interpreted.
    """

    def __init__(self, root, names):
        self.root, self.names = root, names  # names: module -> scope string
        self.stack, self.pending, self.cur_src = [], [], None
        self.tagged = {}  # grad_fn -> scope (holds refs so ids stay valid)
        self.handles = []

    def __enter__(self):
        st = self
        self.orig_create = torch.fx.Graph.create_node
        self.orig_run_node = torch.fx.Interpreter.run_node

        def create_node(graph, *a, **k):
            node = st.orig_create(graph, *a, **k)
            if st.cur_src is not None:
                if SCOPE_KEY in st.cur_src.meta:
                    node.meta[SCOPE_KEY] = st.cur_src.meta[SCOPE_KEY]
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

        torch.fx.Graph.create_node = create_node
        torch.fx.Interpreter.run_node = run_node
        for mod in self.root.modules():
            self.handles.append(mod.register_forward_pre_hook(self._pre))
            self.handles.append(mod.register_forward_hook(self._post))
        return self

    def __exit__(self, *exc):
        torch.fx.Graph.create_node = self.orig_create
        torch.fx.Interpreter.run_node = self.orig_run_node
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
        # Untagged nodes behind the inputs were made by the enclosing module's
        # own code (e.g. a functional relu between two child modules).
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


# --------------------------------------------------------------------------
# Capture
# --------------------------------------------------------------------------
class Recorder(torch.fx.Interpreter):
    """Runs a graph on real tensors and keeps every node's value."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        v = super().run_node(n)
        self.values[n] = v
        return v


def capture(model_name, batch):
    model, x, target = models.build(model_name, batch)
    wrapped = models.WithLoss(copy.deepcopy(model))
    # Scope names: wrapper-level ops are the loss, model root is "model".
    names = {m: ("loss" if n == "" else n) for n, m in wrapped.named_modules()}

    graphs = {}

    def fw_compiler(gm, args):
        graphs["fw"] = (gm, list(args))
        return make_boxed_func(gm.forward)

    def bw_compiler(gm, args):
        graphs["bw"] = (gm, list(args))  # copy: aot steals the arg list
        return make_boxed_func(gm.forward)

    compiled = aot_module(wrapped, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                          partition_fn=default_partition)
    with ScopeRecorder(wrapped, names):
        loss = compiled(x, target)
        loss.backward()

    # Primal order of aot_module: parameters, buffers (both with duplicates),
    # then the flattened call arguments.
    strip = lambda n: n[len("model."):] if n.startswith("model.") else n
    primals = [(strip(n), "parameter") for n, _ in _named_parameters(wrapped, remove_duplicate=False)]
    primals += [(strip(n), "buffer") for n, _ in _named_buffers(wrapped, remove_duplicate=False)]
    primals += [("x", "input"), ("target", "input")]
    return graphs, primals


# --------------------------------------------------------------------------
# Conversion to memplan.graph/1
# --------------------------------------------------------------------------
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
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return None
    return t.storage().data_ptr()


def _flops(node, ins, outs):
    """FLOPs for the big ops; others are left to memplan's estimator."""
    t = str(node.target)
    try:
        if t in ("aten.mm.default", "aten.bmm.default"):
            a, b = ins[0], ins[1]
            return 2 * a.numel() * b.shape[-1]
        if t == "aten.addmm.default":
            a, b = ins[1], ins[2]
            return 2 * a.numel() * b.shape[-1]
        if t == "aten.convolution.default":
            w, y = ins[1], outs[0]
            return 2 * y.numel() * w[0].numel()
        if t == "aten.convolution_backward.default":
            grad_out, w = ins[0], ins[2]
            per = 2 * grad_out.numel() * w[0].numel()  # one conv's worth
            return per * sum(1 for o in outs[:2] if o is not None)
    except (AttributeError, IndexError, TypeError):
        pass
    return None


def convert(graphs, primals, name):
    fw_gm, fw_args = graphs["fw"]
    bw_gm, _ = graphs["bw"]
    fw_ph = [n for n in fw_gm.graph.nodes if n.op == "placeholder"]
    if len(fw_ph) != len(primals):
        raise SystemExit(f"expected {len(primals)} primals, got {len(fw_ph)} "
                         "(tied weights are deduplicated by aot; not handled)")

    with torch.no_grad():
        fw_run = Recorder(fw_gm)
        fw_outs = fw_run.run(*fw_args)
        bw_ph = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
        n_saved = sum(1 for n in bw_ph if not n.name.startswith("tangents"))
        n_user = len(fw_outs) - n_saved
        tangents = [torch.ones_like(o) for o in fw_outs[:n_user]]
        bw_run = Recorder(bw_gm)
        bw_run.run(*(list(fw_outs[n_user:]) + tangents))
    values = {**fw_run.values, **bw_run.values}

    fw_out_nodes = list(next(n for n in fw_gm.graph.nodes if n.op == "output").args[0])
    bw_out_nodes = list(next(n for n in bw_gm.graph.nodes if n.op == "output").args[0])

    tensors, ops = {}, []
    tid = {}          # (fx Node) or (fx Node, index) -> tensor id
    storage_owner = {}  # storage ptr -> owning (non-alias) tensor id
    renames = {}      # fx Node -> preferred tensor id

    # Preferred names: graph outputs, parameter gradients.
    user_ids = ["loss"] if n_user == 1 else [f"out{i}" for i in range(n_user)]
    for node, uid in zip(fw_out_nodes[:n_user], user_ids):
        renames[node] = uid
    grad_of = {}
    for node, (pname, kind) in zip(bw_out_nodes, primals):
        if node is None:
            continue
        if kind != "parameter" or node.op != "call_function" or node in renames:
            raise SystemExit(f"unsupported backward output {node} for {pname}")
        renames[node] = pname + ".grad"
        grad_of[node] = pname

    def root(t):
        while "alias_of" in tensors[t]:
            t = tensors[t]["alias_of"]
        return t

    def add_tensor(key, tensor_id, value, kind, base=None):
        if tensor_id in tensors:
            raise SystemExit(f"duplicate tensor id {tensor_id}")
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

    # Resident tensors.
    for node, (pname, kind) in zip(fw_ph, primals):
        add_tensor(node, pname, values[node], kind)

    grad_flow = set()  # backward values derived from the tangent
    stats = {"views_by_schema": 0, "views_by_storage": 0, "schema_alias_copied": 0}

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
                else:
                    raise SystemExit(f"{node.name}: input {a.name} has no tensor")
            in_vals = [values[a] for a in in_nodes]
            flow = phase == "backward" and any(a in grad_flow for a in in_nodes)
            if flow:
                grad_flow.add(node)
            aliases = _schema_aliases(node)
            out_ids = []
            for i, v in enumerate(outs):
                if not isinstance(v, torch.Tensor):
                    continue  # None (masked-out gradient) or a non-tensor
                fx_out = getitems.get((node, i)) if multi else node
                key = (node, i) if multi else node
                tensor_id = renames.get(fx_out) or (fx_out.name if fx_out is not None
                                                    else f"{node.name}.{i}")
                # A view: schema says it aliases an input, confirmed by storage.
                base, ptr = None, _storage(v)
                if i in aliases and ptr is not None and ptr == _storage(values[aliases[i]]):
                    base = tid[aliases[i]] if aliases[i] in tid else None
                    stats["views_by_schema"] += 1
                elif i in aliases:
                    stats["schema_alias_copied"] += 1
                elif ptr is not None and ptr in storage_owner and any(
                        _storage(x) == ptr for x in in_vals):
                    base = storage_owner[ptr]
                    stats["views_by_storage"] += 1
                if phase == "forward":
                    kind = "activation"
                else:
                    kind = "gradient" if flow else "temporary"
                t = add_tensor(key, tensor_id, v, kind, base)
                if fx_out is not None:
                    tid[fx_out] = tensor_id
                    if flow:
                        grad_flow.add(fx_out)
                if fx_out in grad_of:
                    t["kind"] = "gradient"
                    t["grad_of"] = grad_of[fx_out]
                out_ids.append(tensor_id)
            op = {"id": "op." + node.name, "type": str(node.target), "inputs": inputs,
                  "outputs": out_ids, "phase": phase,
                  "scope": node.meta.get(SCOPE_KEY, phase)}
            fl = _flops(node, in_vals, outs)
            if fl:
                op["flops"] = fl
            if (phase == "backward" and str(node.target) == "aten.add.Tensor"
                    and len(in_nodes) == 2 and all(a in grad_flow for a in in_nodes)):
                op["accumulate"] = True
            ops.append(op)

    emit(fw_gm, "forward")
    # Backward placeholders: saved tensors are the forward's outputs (same ids),
    # tangents are produced by the seed op.
    for ph, fw_node in zip(bw_ph[:n_saved], fw_out_nodes[n_user:]):
        tid[ph] = tid[fw_node]
    for ph, uid, tv in zip(bw_ph[n_saved:], user_ids, tangents):
        gid = uid + ".grad"
        add_tensor(ph, gid, tv, "gradient")
        grad_flow.add(ph)
        ops.append({"id": gid + ".seed", "type": "ones_like", "inputs": [uid],
                    "outputs": [gid], "phase": "backward", "scope": "loss"})
    emit(bw_gm, "backward")

    graph = {
        "format": "memplan.graph/1",
        "name": name,
        "source": {"framework": "pytorch", "version": torch.__version__,
                   "exporter": "memplan_torch capture (prototype)"},
        "symbols": {},
        "tensors": list(tensors.values()),
        "ops": ops,
        "outputs": user_ids,
    }
    return graph, stats


# --------------------------------------------------------------------------
# Self-check and a baseline estimate (SPEC section 2, file order, eager frees)
# --------------------------------------------------------------------------
RESIDENT = {"input", "parameter", "buffer", "optimizer_state"}


def nbytes(t):
    n = DTYPE_SIZE[t["dtype"]]
    for s in t["shape"]:
        n *= s
    return n


def validate(g):
    """Returns a list of problems (empty when the graph is well formed)."""
    errs = []
    tensors = {}
    for t in g["tensors"]:
        if t["id"] in tensors:
            errs.append(f"duplicate tensor id {t['id']}")
        tensors[t["id"]] = t
        if t["dtype"] not in DTYPE_SIZE:
            errs.append(f"{t['id']}: bad dtype {t['dtype']}")
        if not all(isinstance(s, int) and s >= 0 for s in t["shape"]):
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


def baseline_peak(g):
    """Peak of the baseline program (file order, free after last reader)."""
    tensors = {t["id"]: t for t in g["tensors"]}
    base = lambda i: tensors[i].get("alias_of", i)
    keep = {base(o) for o in g["outputs"]}
    keep |= {base(i) for i, t in tensors.items() if "grad_of" in t}
    last = {}
    for k, op in enumerate(g["ops"]):
        for i in op["inputs"] + op["outputs"]:
            last[base(i)] = k
    live = sum(nbytes(t) for t in tensors.values() if t["kind"] in RESIDENT)
    peak, peak_op = live, None
    for k, op in enumerate(g["ops"]):
        new = [o for o in op["outputs"] if "alias_of" not in tensors[o]]
        live += sum(nbytes(tensors[o]) for o in new)
        if live > peak:
            peak, peak_op = live, op["id"]
        for b in {base(i) for i in op["inputs"] + op["outputs"]}:
            if last[b] == k and b not in keep and tensors[b]["kind"] not in RESIDENT:
                live -= nbytes(tensors[b])
    resident = sum(nbytes(t) for t in tensors.values() if t["kind"] in RESIDENT)
    return {"baseline_peak_bytes": peak, "peak_op": peak_op, "resident_bytes": resident}


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(models.MODELS), default="cnn_small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    graphs, primals = capture(args.model, args.batch)
    graph, stats = convert(graphs, primals, args.model)
    errs = validate(graph)
    for e in errs:
        print("self-check:", e, file=sys.stderr)
    with open(args.output, "w") as f:
        f.write(dumps(graph))
    fw = sum(1 for o in graph["ops"] if o["phase"] == "forward")
    summary = {"output": args.output, "ops": len(graph["ops"]), "forward_ops": fw,
               "backward_ops": len(graph["ops"]) - fw, "tensors": len(graph["tensors"]),
               "accumulate_ops": sum(1 for o in graph["ops"] if o.get("accumulate")),
               **stats, **baseline_peak(graph), "self_check": "ok" if not errs else "FAILED"}
    print(json.dumps(summary, indent=1))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
