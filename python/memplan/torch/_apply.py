"""Plans applied back: torch.utils.checkpoint around the plan's modules, with a
selective activation checkpointing policy when the plan has one."""
import json
from typing import Any, Dict, List, Tuple, Union

import torch
import torch.nn as nn

from ._common import TORCH2


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


# Parts of the names of ops that draw from an RNG (dropout's noise,
# bernoulli, rand*, normal, ...). A policy module with none of them runs
# checkpoint(preserve_rng_state=False): the RNG state it would otherwise hold
# from its forward to its backward (5,056 bytes on the CPU, which memplan
# does not count) restores nothing. Safe because _SacPolicy matches every
# eager op of the module to the plan's: a random op the plan does not list is
# a PlanError. Substrings, so a false match only keeps the state.
RANDOM_OP_PARTS = ("rand", "dropout", "bernoulli", "normal", "uniform", "multinomial",
                   "poisson", "binomial", "gamma", "exponential", "geometric", "cauchy", "rrelu")


def _draws_random(region: Dict[str, Any]) -> bool:
    """Whether any op of a plan region ({"module", "ops"}) may draw from an RNG."""
    return any(part in _sac_name(op["type"]) for op in region["ops"]
               for part in RANDOM_OP_PARTS)


def _sac_name(op_type: Any) -> str:
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


def sac_schedule(region: Dict[str, Any],
                 target_device: str = "cpu") -> List[Tuple[str, bool, str]]:
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


def apply_plan(model: nn.Module, plan: Union[str, Dict[str, Any]],
               target_device: str = "cpu") -> List[str]:
    """Wraps each module the plan lists (`"modules"`, written by `memplan plan
    --granularity module` or `sac`; paths as in model.named_modules()) in
    torch.utils.checkpoint (non-reentrant: parameters get gradients even when
    no input requires one; the saved tensors of the recomputed forward are
    freed after their backward use, as memplan's checkpoint programs assume).
    A sac plan also gives each module a selective activation checkpointing
    policy (torch.utils.checkpoint.create_selective_checkpoint_contexts):
    MUST_SAVE for the ops whose buffers the plan keeps, PREFER_RECOMPUTE for
    the rest, matched to eager's ops by position (views left out; see
    sac_schedule); a policy module whose ops draw nothing random does not
    keep the RNG state (see RANDOM_OP_PARTS). torch 2.x only. `plan` is a
    dict or a path. Returns the list of wrapped module paths."""
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
    random = {r["module"] for r in plan.get("sac", []) if _draws_random(r)}
    if sac and not TORCH2:
        raise PlanError(f"a sac plan needs torch 2.x (selective activation checkpointing); "
                        f"this is torch {torch.__version__}")
    wrapped = []
    for path in plan.get("modules", []):
        try:
            mod = model.get_submodule(path)
        except AttributeError:
            raise PlanError(f"plan module {path!r} is not a submodule of the model") from None
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
            if path not in random:
                context["preserve_rng_state"] = False

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
