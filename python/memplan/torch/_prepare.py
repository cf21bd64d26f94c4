"""The step a user trains, from a model spec: precision, frozen weights, LoRA
and gradient checkpointing applied to the model before it is exported or
measured (`memplan export --dtype/--trainable/--lora/--hf-gradient-
checkpointing`, memplan.torch.prepare_model).

Each option is the call the user's own script would make (model.to(dtype),
requires_grad_, peft.inject_adapter_in_model, the model's own
gradient_checkpointing_enable), so the exported step is the one they run.
Bad values raise ValueError naming the value and what was expected; a missing
optional package raises ImportError naming the extra that installs it.
"""
import re
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.nn as nn

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
LORA_KEYS = ("r", "alpha", "targets", "dropout")


def dtype_of(name: Optional[str], what: str = "dtype") -> Optional[torch.dtype]:
    """"bfloat16" -> torch.bfloat16; None stays None; anything else is a ValueError."""
    if name is None:
        return None
    if isinstance(name, torch.dtype) and name in DTYPES.values():
        return name
    if name not in DTYPES:
        raise ValueError(f"{what} {name!r}: expected one of {', '.join(DTYPES)}")
    return DTYPES[name]


@dataclass(frozen=True)
class LoraSpec:
    """LoRA as `r=R,alpha=A,targets=q_proj,v_proj[,dropout=P]`."""

    r: int
    alpha: float
    targets: Tuple[str, ...]
    dropout: float = 0.0

    @staticmethod
    def parse(text: str) -> "LoraSpec":
        """Parses the --lora text. A comma-separated item without '=' continues
        the list of the key before it (targets=q_proj,v_proj)."""
        values: Dict[str, Any] = {}
        key = None
        for item in filter(None, (s.strip() for s in text.split(","))):
            k, eq, v = item.partition("=")
            if eq:
                key = k.strip()
                if key not in LORA_KEYS:
                    raise ValueError(f"--lora {text!r}: unknown key {key!r}; expected "
                                     "r=R,alpha=A,targets=NAME[,NAME...][,dropout=P]")
                values[key] = [v.strip()] if key == "targets" else v.strip()
            elif key == "targets":
                values["targets"].append(item)
            else:
                raise ValueError(f"--lora {text!r}: {item!r} is not key=value; expected "
                                 "r=R,alpha=A,targets=NAME[,NAME...][,dropout=P]")
        missing = [k for k in ("r", "targets") if k not in values]
        if missing:
            raise ValueError(f"--lora {text!r}: missing {', '.join(missing)}; expected "
                             "r=R,alpha=A,targets=NAME[,NAME...][,dropout=P]")
        try:
            r = int(values["r"])
            alpha = float(values.get("alpha", r))
            dropout = float(values.get("dropout", 0.0))
        except ValueError:
            raise ValueError(f"--lora {text!r}: r is an integer, alpha and dropout "
                             "numbers") from None
        if r < 1 or not 0.0 <= dropout < 1.0:
            raise ValueError(f"--lora {text!r}: expected r >= 1 and 0 <= dropout < 1")
        return LoraSpec(r, alpha, tuple(values["targets"]), dropout)


def _require_peft():
    try:
        import peft
    except ImportError:
        raise ImportError("LoRA needs PEFT: pip install 'memplan[hf]'") from None
    return peft


def _lora_base(model: nn.Module) -> nn.Module:
    """The module LoRA is injected into: an hf: spec's transformers model,
    else the model itself."""
    return getattr(model, "lm", model) if getattr(model, "memplan_hf", False) else model


def apply_lora(model: nn.Module, lora: LoraSpec) -> nn.Module:
    """Injects LoRA adapters into the modules named by lora.targets (PEFT's
    suffix match); only the adapters train. Returns the model."""
    peft = _require_peft()
    base = _lora_base(model)
    leaves = {n.rsplit(".", 1)[-1] for n, m in base.named_modules()
              if isinstance(m, (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d))
              or type(m).__name__ == "Conv1D"}
    missing = [t for t in lora.targets
               if not any(n == t or n.endswith("." + t) for n, _ in base.named_modules())]
    if missing:
        raise ValueError(f"--lora targets {','.join(missing)}: no module of the model is named "
                         f"so; expected names of its layers, e.g. {', '.join(sorted(leaves)[:8])}")
    config = peft.LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=list(lora.targets))
    peft.inject_adapter_in_model(config, base)
    return model


def set_trainable(model: nn.Module, pattern: str) -> int:
    """Parameters whose name matches `pattern` (re.search) train, the rest are
    frozen. Returns how many train; none is a ValueError."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"--trainable {pattern!r}: not a regular expression ({e})") from None
    names = [n for n, _ in model.named_parameters()]
    hits = 0
    for n, p in model.named_parameters():
        p.requires_grad_(bool(rx.search(n)))
        hits += p.requires_grad
    if not hits:
        raise ValueError(f"--trainable {pattern!r} matches no parameter; expected a regular "
                         f"expression over names such as {', '.join(names[:4])}")
    return hits


def enable_gradient_checkpointing(model: nn.Module) -> nn.Module:
    """The transformers model's own gradient_checkpointing_enable(), non-
    reentrant (transformers 5's default; 4.x defaults to the reentrant
    checkpoint, which AOTAutograd cannot trace: its backward refuses
    torch.autograd.grad)."""
    lm = getattr(model, "lm", None) if getattr(model, "memplan_hf", False) else model
    enable = getattr(lm, "gradient_checkpointing_enable", None)
    if enable is None or not getattr(lm, "supports_gradient_checkpointing", False):
        raise ValueError("--hf-gradient-checkpointing: expected a transformers model that "
                         "supports gradient checkpointing (an hf: spec)")
    enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def prepare_model(model: nn.Module, dtype: Optional[str] = None,
                  trainable: Optional[str] = None, lora: Optional[str] = None,
                  gradient_checkpointing: bool = False) -> nn.Module:
    """The model as the user trains it, changed in place and returned:
    weights and buffers in `dtype` ("bfloat16", "float16"), LoRA adapters
    (`lora`: "r=8,alpha=16,targets=q_proj,v_proj"), only the parameters
    matching `trainable` training (applied after LoRA), and the transformers
    model's own gradient checkpointing."""
    if dtype is not None:
        model.to(dtype_of(dtype))
    if lora is not None:
        apply_lora(model, LoraSpec.parse(lora))
        if dtype is not None:  # adapters are made in float32
            model.to(dtype_of(dtype))
    if trainable is not None:
        set_trainable(model, trainable)
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model


def cast_inputs(inputs: Sequence[Any], dtype: Optional[str]) -> Tuple[Any, ...]:
    """Floating-point inputs in `dtype` (a bfloat16 model reads bfloat16
    inputs); integer inputs (token ids) unchanged."""
    dt = dtype_of(dtype)
    return tuple(x.to(dt) if dt is not None and isinstance(x, torch.Tensor)
                 and x.is_floating_point() else x for x in inputs)
