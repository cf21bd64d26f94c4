"""Model specs, example inputs and the training step every export and measurement runs."""
import contextlib
import copy
import importlib
import inspect
from types import ModuleType
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._common import SEED, ExportError, data_dependent, data_dependent_message, module_stack


def load_model(spec: str, device: Optional[str] = None) -> nn.Module:
    """`torchvision:NAME`, `hf:ARCH[:k=v,...]` or `package.module:factory` ->
    nn.Module (seeded, train mode); built on `device` when given ("meta": no
    weights allocated, nothing initialised for real)."""
    if device is not None:
        with torch.device(device):
            return load_model(spec)
    if ":" not in spec:
        raise ValueError("expected torchvision:NAME, hf:ARCH or package.module:factory")
    mod_name, attr = spec.split(":", 1)
    torch.manual_seed(SEED)
    if mod_name == "hf":
        from . import _hf
        return _hf.build(attr).train()
    if mod_name == "torchvision":
        import torchvision
        factory = getattr(torchvision.models, attr, None)
        if factory is None:
            raise ValueError(f"torchvision.models has no {attr}")
        model = factory(weights=None)
    else:
        module = _import_spec_module(mod_name)
        factory = getattr(module, attr, None)
        if factory is None:
            raise ValueError(f"{mod_name} has no {attr}")
        model = factory()
    return model.train()


def _import_spec_module(mod_name: str) -> ModuleType:
    """The module a `module:factory` spec names. `models` is the user's own
    module of that name when one is importable, else memplan's bundled test
    models (memplan.torch.models)."""
    try:
        return importlib.import_module(mod_name)
    except ImportError as e:
        if mod_name == "models" and getattr(e, "name", None) == "models":
            return importlib.import_module("memplan.torch.models")
        raise ValueError(f"cannot import {mod_name}: {e}") from None


def has_seq(model: nn.Module) -> bool:
    """True when model.example_input takes a sequence length (`seq`)."""
    fn = getattr(model, "example_input", None)
    return fn is not None and "seq" in inspect.signature(fn).parameters


def example_inputs(model: nn.Module, batch: int, input_shape: Optional[Sequence[int]] = None,
                   seq: Optional[int] = None) -> Tuple[torch.Tensor, ...]:
    """The step's input tuple: model.example_input(batch[, seq]), else
    randn(batch, *shape); on the model's device (meta for a meta model)."""
    p = next(model.parameters(), None)
    if p is not None and p.is_meta:
        with torch.device("meta"):
            return _example_inputs(model, batch, input_shape, seq)
    return _example_inputs(model, batch, input_shape, seq)


def _example_inputs(model: nn.Module, batch: int, input_shape: Optional[Sequence[int]],
                    seq: Optional[int]) -> Tuple[torch.Tensor, ...]:
    torch.manual_seed(SEED + 1)
    if input_shape is None and hasattr(model, "example_input"):
        x = model.example_input(batch, seq=seq) if seq is not None else model.example_input(batch)
        return x if isinstance(x, tuple) else (x,)
    shape = tuple(input_shape or (3, 224, 224))
    return (torch.randn(batch, *shape),)


def make_target(model: nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Random class targets shaped like the output without its last dimension
    (found with a no-grad forward of a copy on the first sample); for models
    with their own LM loss, the labels: the input ids."""
    if getattr(model, "memplan_returns_loss", False):
        return inputs[0].clone()
    probe = copy.deepcopy(model).eval()
    on = torch.device("meta") if inputs[0].is_meta else contextlib.nullcontext()
    with torch.no_grad(), on, module_stack(probe) as stack:
        try:
            out = probe(*[x[:1] for x in inputs])
        except Exception as e:  # noqa: BLE001 - only data-dependent ops on meta are translated
            if inputs[0].is_meta and data_dependent(e):
                raise ExportError(data_dependent_message(e, stack)) from None
            raise
    shape = (inputs[0].shape[0],) + tuple(out.shape[1:-1])
    torch.manual_seed(SEED + 2)
    return torch.randint(0, out.shape[-1], shape, device=inputs[0].device)


def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def _loss_of(out: Any) -> torch.Tensor:
    """The loss a loss-returning model gives: a tensor, or an output with .loss
    (transformers' ModelOutput)."""
    return out if isinstance(out, torch.Tensor) else out["loss"]


def autocast_context(autocast: Optional[str], inputs: Sequence[Any]):
    """torch.autocast(dtype=autocast) on the inputs' device type (meta and CPU
    tensors: the CPU's autocast), or nothing when autocast is None."""
    if autocast is None:
        return contextlib.nullcontext()
    from ._prepare import dtype_of
    dt = dtype_of(autocast, "autocast")
    first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
    device = "cuda" if first is not None and first.is_cuda else "cpu"
    return torch.autocast(device_type=device, dtype=dt)


def forward_and_loss(model: nn.Module, inputs: Sequence[torch.Tensor],
                     target: Optional[torch.Tensor],
                     user_loss: Optional[Callable[..., torch.Tensor]] = None,
                     autocast: Optional[str] = None) -> Tuple[Any, torch.Tensor]:
    """The step's forward: (the model's output, the loss). With `user_loss`:
    user_loss(output, target), or user_loss(output) when target is None. Else
    the model's own loss when it computes one (hf: models take the labels and
    return their output with its LM loss), else cross-entropy of its output
    against target. Under torch.autocast(autocast) when given, the loss too
    (as `with torch.autocast(...): loss = ...` in a training loop)."""
    with autocast_context(autocast, inputs):
        if user_loss is not None:
            out = model(*inputs)
            return out, (user_loss(out) if target is None else user_loss(out, target))
        if getattr(model, "memplan_returns_loss", False):
            out = model(*inputs, target)
            return out, _loss_of(out)
        out = model(*inputs)
        return out, loss_fn(out, target)


def step_loss(model: nn.Module, inputs: Sequence[torch.Tensor], target: Optional[torch.Tensor],
              user_loss: Optional[Callable[..., torch.Tensor]] = None,
              autocast: Optional[str] = None) -> torch.Tensor:
    """The step's loss, its output dropped (forward_and_loss)."""
    return forward_and_loss(model, inputs, target, user_loss, autocast)[1]


class WithLoss(nn.Module):
    """model + loss as one module, so the loss is inside the traced graph.
    forward(*inputs, target) or, with has_target False, forward(*inputs).
    on_output(output) is called with the model's output (the exporter marks
    what a loop that holds it keeps alive), on_loss(loss) with the loss.
    model_outputs: also return the model's other output tensors that require
    grad, after the loss (a model that computes its own loss, compiled: its
    compiled graph returns them too, and their unused gradients are zeros
    the compiled backward receives)."""

    def __init__(self, model, user_loss=None, has_target=True, autocast=None, on_output=None,
                 on_loss=None, model_outputs=False):
        super().__init__()
        self.model_outputs = model_outputs
        self.on_loss = on_loss
        self.model = model
        self.user_loss = user_loss
        self.has_target = has_target
        self.autocast = autocast
        self.on_output = on_output

    def forward(self, *args):
        if self.has_target:
            *inputs, target = args
        else:
            inputs, target = args, None
        out, loss = forward_and_loss(self.model, inputs, target, self.user_loss, self.autocast)
        if self.on_output is not None:
            self.on_output(out)
        if self.on_loss is not None:
            self.on_loss(loss)
        if self.model_outputs and getattr(self.model, "memplan_returns_loss", False):
            extra = [t for t in output_tensors(out) if t is not loss and t.requires_grad]
            return (loss, *extra)
        return loss


def output_tensors(x: Any) -> List[torch.Tensor]:
    """The tensors of a model output (tensor, sequence or dict/ModelOutput)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in output_tensors(e)]
    if isinstance(x, dict):
        return [t for e in x.values() for t in output_tensors(e)]
    return []
