"""`hf:ARCH[:key=value,...]` and `hf:path/to/config.json[:key=value,...]`
model specs: a transformers model with a language-modelling head, built from
its config with overrides, randomly initialised, nothing downloaded.

    hf:gpt2                                   GPT2Config() defaults
    hf:llama:hidden_size=512,num_hidden_layers=4
    hf:llama:...,seq=4096                     `seq` is the example length, not a config key
    hf:bert:...,task=masked                   task: causal, masked or seq2seq
    hf:models/my-llama/config.json:num_hidden_layers=2
                                              a local config.json (or its folder)

The head follows the task: encoder-decoder configs (T5, BART) train as
seq2seq LMs, encoder-only ones (BERT, RoBERTa, ...) as masked LMs, the rest
as causal LMs; `task=` overrides. The step's loss is the model's own (labels
= the input ids; the model shifts them), so what it allocates (the shifted
logits copy, the float upcast) is part of the step. Dropout and attention
follow the config (transformers' default attention implementation: SDPA
where the model has it). Weights are float32 unless the export asks for
another dtype (the config's torch_dtype is not applied: mixed-precision
training keeps float32 weights).
"""
import json
import os
from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn as nn

DEFAULT_SEQ = 128
TASKS = ("causal", "masked", "seq2seq")
_AUTO = {"causal": "AutoModelForCausalLM", "masked": "AutoModelForMaskedLM",
         "seq2seq": "AutoModelForSeq2SeqLM"}


def require_transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError("hf: models need transformers: pip install 'memplan[hf]'") from None
    return transformers


def _value(text):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text in ("true", "True", "false", "False"):
        return text in ("true", "True")
    return text


def _split(spec: str) -> Tuple[str, str]:
    """"path/config.json:k=v" -> ("path/config.json", "k=v"); a path may hold
    no ':' of its own."""
    arch, _, rest = spec.partition(":")
    return arch, rest


def parse(spec: str) -> Tuple[str, Dict[str, Any], Optional[int], Optional[str]]:
    """"llama:hidden_size=512,seq=64" -> ("llama", {"hidden_size": 512}, 64, None);
    the last item is the task= override."""
    arch, rest = _split(spec)
    if not arch:
        raise ValueError("expected hf:ARCH[:key=value,...], e.g. hf:gpt2, or "
                         "hf:path/to/config.json")
    overrides, seq, task = {}, None, None
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if not eq or not key:
            raise ValueError(f"{item!r}: expected key=value")
        if key == "seq":
            seq = int(val)
        elif key == "task":
            if val not in TASKS:
                raise ValueError(f"task={val}: expected one of {', '.join(TASKS)}")
            task = val
        else:
            overrides[key] = _value(val)
    return arch, overrides, seq, task


def is_config_path(arch: str) -> bool:
    return arch.endswith(".json") or os.sep in arch or os.path.isdir(arch)


def load_config_file(path: str, transformers, overrides: Dict[str, Any]) -> Any:
    """The transformers config in `path` (a config.json or its folder), with
    `overrides` applied as the config's own arguments."""
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        with open(file) as f:
            doc = json.load(f)
    except OSError as e:
        raise ValueError(f"{file}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{file}: not JSON ({e.msg} at line {e.lineno}); expected a "
                         "transformers config.json") from None
    model_type = doc.get("model_type") if isinstance(doc, dict) else None
    if not isinstance(model_type, str):
        raise ValueError(f"{file}: no \"model_type\"; expected a transformers config.json")
    try:
        cls = transformers.AutoConfig.for_model(model_type).__class__
    except ValueError:
        raise ValueError(f"{file}: model_type {model_type!r} is not a transformers model type "
                         f"(transformers {transformers.__version__})") from None
    return cls.from_dict({**doc, **overrides})


def default_task(config) -> str:
    """seq2seq for encoder-decoders, masked for encoder-only models that have
    a masked-LM head and no causal one of their own, else causal."""
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    from transformers.models.auto import modeling_auto as ma
    causal = ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    masked = ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(config.model_type)
    if masked and (not causal or getattr(config, "is_decoder", None) is False
                   and "LMHead" in str(causal)):
        return "masked"
    return "causal"


class HFModel(nn.Module):
    """A transformers model with its LM head: forward(ids, labels) -> its
    output (with .loss); forward(ids) -> the logits (make_target's probe)."""

    memplan_returns_loss = True
    memplan_hf = True

    def __init__(self, lm, seq, task):
        super().__init__()
        self.lm, self.seq, self.task = lm, seq, task
        self.vocab = lm.config.vocab_size

    def forward(self, ids, labels=None):
        kw = {} if self.task == "masked" else {"use_cache": False}
        if labels is None:
            return self.lm(input_ids=ids, **kw).logits
        return self.lm(input_ids=ids, labels=labels, **kw)

    def example_input(self, batch, seq=None):
        return torch.randint(0, self.vocab, (batch, seq or self.seq))


CausalLM = HFModel  # the name scopes and older scripts know


def build(spec: str, device: Optional[str] = None) -> nn.Module:
    """The model of `spec` (on `device`, e.g. "meta": no weights allocated)."""
    transformers = require_transformers()
    arch, overrides, seq, task = parse(spec)
    if is_config_path(arch):
        config = load_config_file(arch, transformers, overrides)
    else:
        try:
            config = transformers.AutoConfig.for_model(arch, **overrides)
        except ValueError as e:
            raise ValueError(f"transformers has no config for {arch!r} ({e})") from None
    unknown = [k for k in overrides if not hasattr(config, k)]
    if unknown:
        raise ValueError(f"{type(config).__name__} has no {', '.join(unknown)}")
    task = task or default_task(config)
    if task == "seq2seq" and getattr(config, "decoder_start_token_id", None) is None:
        # T5's config leaves it unset; its checkpoints start decoding at the pad id.
        config.decoder_start_token_id = config.pad_token_id or 0
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    seq = seq or min(DEFAULT_SEQ, limit or DEFAULT_SEQ)
    auto = getattr(transformers, _AUTO[task])
    try:
        if device is not None:
            with torch.device(device):
                lm = auto.from_config(config)
        else:
            lm = auto.from_config(config)
    except ValueError as e:
        raise ValueError(f"{type(config).__name__} has no {task} LM head in transformers "
                         f"{transformers.__version__} ({str(e).splitlines()[0]}); expected "
                         f"task= one of {', '.join(TASKS)}") from None
    if task == "causal" and getattr(lm, "loss_type", "") is None:
        # transformers 5 names the loss by the class name, which does not say
        # ForCausalLM for some causal LMs (GPT2LMHeadModel): its fallback is the
        # same loss, behind a logger.warning_once that torch.compile cannot
        # trace (a graph break). Named, the step compiles as one graph.
        lm.loss_type = "ForCausalLM"
    return HFModel(lm.float(), seq, task)
