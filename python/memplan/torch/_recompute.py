"""Activation checkpointing as eager runs it, written into the exported graph.

AOTAutograd traces a step that calls torch.utils.checkpoint as if nothing
were checkpointed (its saved-tensor hooks do not reach the trace). The
exporter instead runs each checkpointed call plainly while tracing, tags the
ops made inside it with the call's region (CHECKPOINT_KEY), and this pass
rewrites the graph to what eager runs:

* forward: a region's ops run as traced; what its backward reads from them
  is no longer kept (only the region's inputs are, which its recompute reads);
* backward: right before the first backward op that reads a tensor made in a
  region, the region's forward ops run again, up to the last one that makes
  such a tensor (torch.utils.checkpoint's early stop), and the backward reads
  those copies. The region's inputs stay alive until the last of those reads
  (the checkpoint holds its function's arguments). Tensors a region returns
  (read by forward ops outside it) stay as they were: the ops after the
  region save them themselves.

Recipe: O(ops + tensors) per region. Falls short on: a region output that an
op inside the region also saves (eager keeps both the original and the
recomputed copy; here only the original), and reentrant checkpoints, which
run the region's backward inside the recompute (same ops, other order).
"""
from typing import Any, Dict, List

SUFFIX = "@recompute"


def inline_recompute(graph: Dict[str, Any], region_of: Dict[str, int]) -> int:
    """Rewrites `graph` (memplan.graph/1) in place for the checkpoint
    regions in `region_of` (forward op id -> region). Returns the number of
    recomputed ops inserted."""
    inserted = 0
    for region in sorted(set(region_of.values())):
        inserted += _inline_region(graph, {k for k, r in region_of.items() if r == region})
    return inserted


def _inline_region(graph: Dict[str, Any], region_ops: set) -> int:
    ops: List[Dict[str, Any]] = graph["ops"]
    tensors = {t["id"]: t for t in graph["tensors"]}
    members = [i for i, op in enumerate(ops) if op["id"] in region_ops]
    made = {t for i in members for t in ops[i]["outputs"]}
    member_set = set(members)
    escaping = {t for i, op in enumerate(ops) if op["phase"] == "forward" and i not in member_set
                for t in op["inputs"] if t in made}
    escaping |= {t for t in graph["outputs"] if t in made}
    escaping |= _aliases_of(escaping, made, tensors)
    inner = made - escaping
    readers = [i for i, op in enumerate(ops)
               if op["phase"] == "backward" and any(t in inner for t in op["inputs"])]
    if not readers:
        return 0
    needed = {t for i in readers for t in ops[i]["inputs"] if t in inner}
    last = max(i for i in members if any(t in needed for t in ops[i]["outputs"]))
    rerun = [i for i in members if i <= last]
    copy_of = {t: t + SUFFIX for i in rerun for t in ops[i]["outputs"]}
    new_tensors = []
    for t, c in copy_of.items():
        nt = dict(tensors[t], id=c, kind="activation")
        if "alias_of" in nt and nt["alias_of"] in copy_of:
            nt["alias_of"] = copy_of[nt["alias_of"]]
        nt.pop("grad_of", None)
        new_tensors.append(nt)
    new_ops = []
    for i in rerun:
        op = dict(ops[i], id=ops[i]["id"] + SUFFIX, phase="backward")
        op["inputs"] = [copy_of.get(t, t) for t in ops[i]["inputs"]]
        op["outputs"] = [copy_of[t] for t in ops[i]["outputs"]]
        new_ops.append(op)
    for i in readers:
        ops[i]["inputs"] = [copy_of[t] if t in inner and t in copy_of else t
                            for t in ops[i]["inputs"]]
    # Backward views of what the backward now reads recomputed view the copies.
    for op in ops:
        if op["phase"] == "backward":
            for t in op["outputs"]:
                base = tensors[t].get("alias_of")
                if base in inner and base in copy_of:
                    tensors[t]["alias_of"] = copy_of[base]
    # The checkpoint holds the region's inputs (its function's arguments)
    # until the region's backward is done: they join the last reader's inputs.
    resident = ("input", "parameter", "buffer")
    args = [t for i in members for t in ops[i]["inputs"]
            if t not in made and tensors[t]["kind"] not in resident]
    last_reader = ops[readers[-1]]
    for t in dict.fromkeys(args):
        if t not in last_reader["inputs"]:
            last_reader["inputs"].append(t)
    at = readers[0]
    ops = ops[:at] + new_ops + ops[at:]
    # The views the backward read (AOT's detach of a saved output) are now
    # read by nothing: dropped, so they hold no base alive.
    read = {t for op in ops for t in op["inputs"]} | set(graph["outputs"])
    dead = {ops[i]["id"] for i in members
            if ops[i]["outputs"] and all(t not in read and "alias_of" in tensors[t]
                                         for t in ops[i]["outputs"])}
    graph["ops"] = [op for op in ops if op["id"] not in dead]
    gone = {t for i in members if ops[i]["id"] in dead for t in ops[i]["outputs"]}
    graph["tensors"] = [t for t in graph["tensors"] if t["id"] not in gone] + new_tensors
    return len(new_ops)


def _aliases_of(ids: set, made: set, tensors: Dict[str, Dict[str, Any]]) -> set:
    """The region's tensors that share storage with `ids` (views of them, or
    the bases they view)."""
    roots = {tensors[t].get("alias_of", t) for t in ids}
    return {t for t in made if t in roots or tensors[t].get("alias_of") in roots}


def drop_gradients(graph: Dict[str, Any], params: List[str]) -> int:
    """Removes the gradients of `params` (frozen weights the trace made
    trainable, see _capture._unfreeze_input_grad_modules) and the ops that
    make them. The gradient those ops read is what eager accumulates into the
    leaf output of the module: it joins the graph's outputs (a leaf's .grad
    lives as long as the step). Returns the number of ops removed."""
    if not params:
        return 0
    tensors = {t["id"]: t for t in graph["tensors"]}
    grads = {t for t, v in tensors.items() if v.get("grad_of") in params}
    dead = [op for op in graph["ops"] if op["outputs"] and set(op["outputs"]) <= grads]
    for op in dead:
        for t in op["inputs"]:
            if tensors[t]["kind"] == "gradient" and t not in graph["outputs"]:
                graph["outputs"].append(t)
    gone = {op["id"] for op in dead}
    graph["ops"] = [op for op in graph["ops"] if op["id"] not in gone]
    graph["tensors"] = [t for t in graph["tensors"] if t["id"] not in grads]
    return len(dead)
