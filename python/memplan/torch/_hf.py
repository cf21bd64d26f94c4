"""`hf:ARCH[:key=value,...]` model specs: a transformers causal LM built from
its config class with overrides, randomly initialised, nothing downloaded.

    hf:gpt2                                   GPT2Config() defaults
    hf:llama:hidden_size=512,num_hidden_layers=4
    hf:llama:...,seq=4096                     `seq` is the example length, not a config key

The step's loss is the model's own (labels = the input ids, shifted inside
the model), so what it allocates (the shifted logits copy, the float upcast)
is part of the step. Dropout and attention follow the config (transformers'
default attention implementation: SDPA where the model has it).
"""
from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn as nn

DEFAULT_SEQ = 128


def _value(text):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text in ("true", "True", "false", "False"):
        return text in ("true", "True")
    return text


def parse(spec: str) -> Tuple[str, Dict[str, Any], Optional[int]]:
    """"llama:hidden_size=512,seq=64" -> ("llama", {"hidden_size": 512}, 64)."""
    arch, _, rest = spec.partition(":")
    if not arch:
        raise ValueError("expected hf:ARCH[:key=value,...], e.g. hf:gpt2")
    overrides, seq = {}, None
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if not eq or not key:
            raise ValueError(f"{item!r}: expected key=value")
        if key == "seq":
            seq = int(val)
        else:
            overrides[key] = _value(val)
    return arch, overrides, seq


class CausalLM(nn.Module):
    """A transformers causal LM: forward(ids, labels) -> its LM loss."""

    memplan_returns_loss = True

    def __init__(self, lm, seq):
        super().__init__()
        self.lm, self.seq = lm, seq
        self.vocab = lm.config.vocab_size

    def forward(self, ids, labels=None):
        if labels is None:  # make_target's probe: logits
            return self.lm(input_ids=ids, use_cache=False).logits
        return self.lm(input_ids=ids, labels=labels, use_cache=False).loss

    def example_input(self, batch, seq=None):
        return torch.randint(0, self.vocab, (batch, seq or self.seq))


def build(spec: str, device: Optional[str] = None) -> nn.Module:
    """The model of `spec` (on `device`, e.g. "meta": no weights allocated)."""
    import transformers
    arch, overrides, seq = parse(spec)
    try:
        config = transformers.AutoConfig.for_model(arch, **overrides)
    except ValueError as e:
        raise ValueError(f"transformers has no config for {arch!r} ({e})") from None
    unknown = [k for k in overrides if not hasattr(config, k)]
    if unknown:
        raise ValueError(f"{type(config).__name__} has no {', '.join(unknown)}")
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    seq = seq or min(DEFAULT_SEQ, limit or DEFAULT_SEQ)
    if device is not None:
        with torch.device(device):
            lm = transformers.AutoModelForCausalLM.from_config(config)
    else:
        lm = transformers.AutoModelForCausalLM.from_config(config)
    return CausalLM(lm, seq)
