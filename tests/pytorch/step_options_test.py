#!/usr/bin/env python3
"""The steps users train, against measured eager CPU steps (memplan.torch.measure):

* `memplan export` + `memplan measure` from the shell with --dtype bfloat16,
  --autocast bfloat16, --trainable, --lora (PEFT), --hf-gradient-checkpointing
  (with the output held and dropped), a local transformers config.json as the
  model spec, and both loop conventions (--hold-outputs, --no-hold-outputs)
  on a Mistral-style model whose logits are most of the step: each predicted
  within TOLERANCE (gradient checkpointing within CHECKPOINT_TOLERANCE), the
  graph and `memplan analyze` naming the convention assumed;
* six transformers architectures (encoder, decoder, encoder-decoder) and
  three torchvision models through the Python API (memplan.torch.estimate);
* bad input exits 2 with one line naming the value and what was expected,
  and a missing PEFT or transformers names the extra that installs it.

Fails (does not skip) when torch, transformers or PEFT is missing.
Usage: step_options_test.py --memplan PATH [--require-torch 2.15.0]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import Checks  # noqa: E402

# Measured: every option within 0.0009% but gradient checkpointing (-0.09%
# on the llama below, -0.07% on gpt2; up to +-0.3% on one-layer variants:
# the RNG state checkpoint saves and Python locals of the checkpointed
# forward are not modelled).
TOLERANCE = 1e-4
CHECKPOINT_TOLERANCE = 5e-3
# estimate() uses the scratch rules (memplan/torch/_workspace.py), measured
# -0.32% on mobilenet_v3_small and -0.19% on efficientnet_b0 (0.00% resnet18).
RULES_TOLERANCE = 5e-3

LLAMA = ("hf:llama:hidden_size=128,intermediate_size=344,num_hidden_layers=2,"
         "num_attention_heads=4,num_key_value_heads=2,vocab_size=1000,seq=64")
GPT2 = "hf:gpt2:n_layer=2,n_embd=128,n_head=4,vocab_size=1000,n_positions=128,seq=64"
MISTRAL = ("hf:mistral:hidden_size=128,intermediate_size=344,num_hidden_layers=2,"
           "num_attention_heads=4,num_key_value_heads=2,vocab_size=4096,seq=128")
# (name, model spec, batch, export/measure options, tolerance)
CLI_CASES = [
    ("llama bfloat16 weights", LLAMA, 2, ["--dtype", "bfloat16"], TOLERANCE),
    ("llama under autocast(bfloat16)", LLAMA, 2, ["--autocast", "bfloat16"], TOLERANCE),
    ("llama, only layer 1 trains", LLAMA, 2, ["--trainable", r"layers\.1\."], TOLERANCE),
    ("llama + LoRA r=8 on q_proj,v_proj, bfloat16", LLAMA, 2,
     ["--lora", "r=8,alpha=16,targets=q_proj,v_proj,dropout=0.1", "--dtype", "bfloat16"],
     TOLERANCE),
    ("llama, HF gradient checkpointing", LLAMA, 2, ["--hf-gradient-checkpointing"],
     CHECKPOINT_TOLERANCE),
    ("llama + LoRA + HF gradient checkpointing (QLoRA's recipe, float32)", LLAMA, 2,
     ["--lora", "r=8,alpha=16,targets=q_proj,v_proj", "--hf-gradient-checkpointing"],
     CHECKPOINT_TOLERANCE),
    ("gpt2, HF gradient checkpointing, output dropped", GPT2, 2,
     ["--hf-gradient-checkpointing", "--no-hold-outputs"], CHECKPOINT_TOLERANCE),
    # The scratch rules are float32's (bfloat16 convolutions: -4.2% with them).
    # Its bytes depend on the CPU: oneDNN picks bfloat16 convolution kernels,
    # and their scratch, by instruction set (CPU_DEPENDENT below).
    ("resnet18 bfloat16, scratch measured", "torchvision:resnet18", 2,
     ["--dtype", "bfloat16", "--input-shape", "3,64,64", "--measure-workspace"], TOLERANCE),
    ("mistral, output held (default)", MISTRAL, 2, [], TOLERANCE),
    ("mistral, output dropped", MISTRAL, 2, ["--no-hold-outputs"], TOLERANCE),
]
# Rows whose bytes (not their error) change with the CPU's instruction set.
# The torchvision rows too: their convolutions' scratch (rules and
# measurement alike) follows the CPU's oneDNN kernels (AVX-512 or AVX2).
CPU_DEPENDENT = {"resnet18 bfloat16, scratch measured", "torchvision:resnet18",
                 "torchvision:mobilenet_v3_small", "torchvision:efficientnet_b0"}
# Through the Python API: (spec, batch, per-sample input shape)
API_CASES = [
    ("hf:bert:hidden_size=128,intermediate_size=256,num_hidden_layers=2,num_attention_heads=4,"
     "vocab_size=1000,max_position_embeddings=128,seq=64", 2, None),
    (GPT2, 2, None),
    (LLAMA, 2, None),
    ("hf:qwen2:hidden_size=128,intermediate_size=344,num_hidden_layers=2,num_attention_heads=4,"
     "num_key_value_heads=2,vocab_size=1000,seq=64", 2, None),
    ("hf:bart:d_model=128,encoder_ffn_dim=256,decoder_ffn_dim=256,encoder_layers=2,"
     "decoder_layers=2,encoder_attention_heads=4,decoder_attention_heads=4,vocab_size=1000,"
     "max_position_embeddings=128,seq=64", 2, None),
    # T5 on transformers 4.57: functional_call misses its tied lm_head
    # (a real Parameter reaches the trace); exports on 5.x.
    ("hf:t5:d_model=128,d_ff=256,num_layers=2,num_heads=4,d_kv=32,vocab_size=1000,seq=64", 2,
     "5."),
    ("torchvision:resnet18", 2, (3, 64, 64)),
    ("torchvision:mobilenet_v3_small", 2, (3, 64, 64)),
    ("torchvision:efficientnet_b0", 2, (3, 64, 64)),
]


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "python"),
                                                    e.get("PYTHONPATH")]))
    return e


def memplan_py(*args, timeout=600):
    """`memplan export|measure ...` (the package's Python side)."""
    return subprocess.run([sys.executable, "-m", "memplan", *args], capture_output=True,
                          text=True, env=env(), timeout=timeout)


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)


def err(pred, meas):
    return (pred - meas) / meas


def cli_cases(check, binary, tmp, results):
    held = {}
    for name, spec, batch, opts, tol in CLI_CASES:
        graph = os.path.join(tmp, name.replace(" ", "_").replace(",", "") + ".graph.json")
        p = memplan_py("export", spec, "--batch", str(batch), "--static", "-q", "-o", graph,
                       *opts)
        if not check(f"{name}: memplan export exits 0", p.returncode == 0, p.stderr[-800:]):
            continue
        export_only = ("--measure-workspace",)
        m = memplan_py("measure", spec, "--batch", str(batch), "-q",
                       *[o for o in opts if o not in export_only])
        if not check(f"{name}: memplan measure exits 0", m.returncode == 0, m.stderr[-800:]):
            continue
        measured = json.loads(m.stdout)["peak_bytes"]
        a = run(binary, "analyze", graph, "--json", graph + ".rep.json")
        if not check(f"{name}: memplan analyze exits 0", a.returncode == 0, a.stderr[-500:]):
            continue
        predicted = json.load(open(graph + ".rep.json"))["peak_bytes"]
        e = err(predicted, measured)
        results.append({"case": name, "spec": spec, "options": opts, "predicted": predicted,
                        "measured": measured, "error": e})
        check(f"{name}: within {100 * tol:g}% of the measured step", abs(e) <= tol,
              f"predicted {predicted} B, measured {measured} B, error {100 * e:+.4f}%")
        holds = "--no-hold-outputs" not in opts
        doc = json.load(open(graph))
        line = ("  loop      output held through the backward (source.outputs_held)" if holds
                else "  loop      output freed once the loss is computed "
                     "(source.outputs_held false)")
        check(f"{name}: the graph and the summary name the loop convention",
              doc["source"].get("outputs_held") is holds and line in a.stdout.splitlines(),
              f"source {doc['source']}, summary:\n{a.stdout[:400]}")
        if spec == MISTRAL:
            held[holds] = (predicted, measured, doc)
    if len(held) == 2:
        (ph, mh, doc), (pd, md, _) = held[True], held[False]
        logits = next(t for t in doc["tensors"] if t["id"] == doc["outputs"][1])
        size = 4 * math.prod(logits["shape"])
        check("mistral: holding the output costs its logits (batch x seq x 4096 float32), "
              "predicted as measured",
              ph - pd == mh - md == size == 2 * 128 * 4096 * 4,
              f"predicted +{ph - pd} B, measured +{mh - md} B, logits {logits['shape']}")


def config_file_case(check, binary, tmp, results):
    import transformers
    folder = os.path.join(tmp, "my-llama")
    transformers.LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2,
                             vocab_size=512).save_pretrained(folder)
    spec = f"hf:{folder}/config.json:num_hidden_layers=2,seq=32"
    graph = os.path.join(tmp, "config_json.graph.json")
    p = memplan_py("export", spec, "--batch", "2", "--static", "-q", "-o", graph)
    m = memplan_py("measure", spec, "--batch", "2", "-q")
    if not check("hf:path/config.json: export and measure exit 0",
                 p.returncode == 0 and m.returncode == 0, (p.stderr + m.stderr)[-800:]):
        return
    a = run(binary, "analyze", graph, "--json", graph + ".rep.json", "-q")
    predicted = json.load(open(graph + ".rep.json"))["peak_bytes"]
    measured = json.loads(m.stdout)["peak_bytes"]
    layers = {o["scope"].split(".")[3] for o in json.load(open(graph))["ops"]
              if o["scope"].startswith("lm.model.layers.")}
    e = err(predicted, measured)
    results.append({"case": "config.json", "spec": spec, "options": [], "predicted": predicted,
                    "measured": measured, "error": e})
    check("hf:path/config.json with an override: 2 layers, within 0.01%",
          a.returncode == 0 and layers == {"0", "1"} and abs(e) <= TOLERANCE,
          f"layers {sorted(layers)}, error {100 * e:+.4f}%")


# Options through the Python API: (name, spec, prepare_model arguments,
# estimate/measure arguments, tolerance)
API_OPTION_CASES = [
    ("api: llama + LoRA, bfloat16, output dropped", LLAMA,
     {"lora": "r=8,alpha=16,targets=q_proj,v_proj", "dtype": "bfloat16"},
     {"hold_outputs": False}, TOLERANCE),
    ("api: llama under autocast(bfloat16)", LLAMA, {}, {"autocast": "bfloat16"}, TOLERANCE),
    # transformers 5's enable_input_require_grads: eager backpropagates into
    # the frozen embedding's output (-5.2% before the exporter modelled it).
    ("api: llama, HF gradient checkpointing, layer 0 and embeddings frozen", LLAMA,
     {"gradient_checkpointing": True, "trainable": r"layers\.1\.|lm_head"}, {},
     CHECKPOINT_TOLERANCE),
    ("api: gpt2, HF gradient checkpointing", GPT2, {"gradient_checkpointing": True}, {},
     CHECKPOINT_TOLERANCE),
]


def api_option_cases(check, results):
    import memplan.torch as mt
    for name, spec, prepare, step, tol in API_OPTION_CASES:
        try:
            model = mt.prepare_model(mt.load_model(spec), **prepare)
            inputs = mt.cast_inputs(mt.example_inputs(model, 2), prepare.get("dtype"))
            target = mt.make_target(model, inputs)
            est = mt.estimate(model, inputs, target=target, **step)
            measured = mt.measure(model, inputs, target, **step)["peak_bytes"]
        except Exception as e:  # noqa: BLE001 - report and count
            check(f"{name}: estimate and measure run", False, f"{type(e).__name__}: {e}")
            continue
        e = err(est.peak_bytes, measured)
        opts = [f"{k}={v}" for k, v in {**prepare, **step}.items()]
        results.append({"case": name, "spec": spec, "options": opts,
                        "predicted": est.peak_bytes, "measured": measured, "error": e})
        check(f"{name}: within {100 * tol:g}% of the measured step, report names the loop",
              abs(e) <= tol and est.report["graph"]["outputs_held"] is
              step.get("hold_outputs", True),
              f"predicted {est.peak_bytes} B, measured {measured} B, error {100 * e:+.4f}%")


def cache_case(check, results):
    """A transformers model called as a user's loop calls it, use_cache at its
    default: in train mode the output carries a KV cache, which a loop that
    holds the output keeps through the backward (+460 B of 2.2 MB measured
    beyond it: 0.02%)."""
    import torch
    import torch.nn.functional as F
    import transformers

    import memplan.torch as mt
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512,
                                  n_positions=64)
    torch.manual_seed(0)
    lm, ids = transformers.GPT2LMHeadModel(cfg), torch.randint(0, 512, (2, 32))

    def lm_loss(out, y):
        return F.cross_entropy(out.logits.flatten(0, 1), y.flatten())

    peaks = {}
    for hold in (True, False):
        est = mt.estimate(lm, (ids,), loss_fn=lm_loss, target=ids, hold_outputs=hold)
        measured = mt.measure(lm, (ids,), target=ids, loss_fn=lm_loss,
                              hold_outputs=hold)["peak_bytes"]
        e = err(est.peak_bytes, measured)
        peaks[hold] = (est.peak_bytes, measured)
        kept = "held" if hold else "dropped"
        name = f"api: gpt2 called plainly, use_cache default, output {kept}"
        results.append({"case": name, "spec": "transformers.GPT2LMHeadModel", "options":
                        [f"hold_outputs={hold}", "loss_fn"], "predicted": est.peak_bytes,
                        "measured": measured, "error": e})
        check(f"{name}: within 0.1%", abs(e) <= 1e-3,
              f"predicted {est.peak_bytes} B, measured {measured} B, error {100 * e:+.4f}%")
    held = peaks[True][1] - peaks[False][1]
    check("gpt2 called plainly: the held output's logits and KV cache predicted as measured",
          peaks[True][0] - peaks[False][0] == held > 0, f"{peaks}")


def api_cases(check, results):
    import memplan.torch as mt
    import transformers
    for spec, batch, shape in API_CASES:
        name = spec.split(":")[1] if spec.startswith("hf:") else spec
        if isinstance(shape, str):  # only on these transformers releases
            if not transformers.__version__.startswith(shape):
                print(f"note {name}: not exported on transformers {transformers.__version__} "
                      "(see API_CASES)")
                continue
            shape = None
        try:
            model = mt.load_model(spec)
            inputs = mt.example_inputs(model, batch, shape)
            target = mt.make_target(model, inputs)
            est = mt.estimate(model, inputs, target=target)
            measured = mt.measure(model, inputs, target)["peak_bytes"]
        except Exception as e:  # noqa: BLE001 - report and count
            check(f"{name}: estimate and measure run", False, f"{type(e).__name__}: {e}")
            continue
        e = err(est.peak_bytes, measured)
        results.append({"case": name, "spec": spec, "options": ["api"],
                        "predicted": est.peak_bytes, "measured": measured, "error": e})
        task = getattr(model, "task", "-")
        tol = RULES_TOLERANCE if spec.startswith("torchvision:") else TOLERANCE
        check(f"{name} ({task}): estimate within {100 * tol:g}% of the measured step",
              abs(e) <= tol,
              f"predicted {est.peak_bytes} B, measured {measured} B, error {100 * e:+.4f}%")


def one_line_error(p, expected):
    lines = p.stderr.strip().splitlines()
    return p.returncode == 2 and lines == [expected], f"exit {p.returncode}: {p.stderr[-600:]}"


def error_cases(check, tmp):
    import memplan.torch as mt
    notjson = os.path.join(tmp, "notes.json")
    with open(notjson, "w") as f:
        json.dump({"hidden_size": 4}, f)
    cases = [
        ("--trainable matching nothing",
         ["export", "models:mlp", "--batch", "2", "--trainable", "^decoder", "-o", "x.json"],
         "memplan export: models:mlp: ValueError: --trainable '^decoder' matches no parameter; "
         "expected a regular expression over names such as fc1.weight, fc1.bias, fc2.weight, "
         "fc2.bias"),
        ("--lora targets naming no module",
         ["export", LLAMA, "--batch", "2", "--lora", "r=4,targets=q_prj", "-o", "x.json"],
         f"memplan export: {LLAMA}: ValueError: --lora targets q_prj: no module of the model "
         "is named so; expected names of its layers, e.g. down_proj, embed_tokens, gate_proj, "
         "k_proj, lm_head, o_proj, q_proj, up_proj"),
        ("--lora without r",
         ["measure", LLAMA, "--batch", "2", "--lora", "targets=q_proj"],
         f"memplan measure: {LLAMA}: ValueError: --lora 'targets=q_proj': missing r; expected "
         "r=R,alpha=A,targets=NAME[,NAME...][,dropout=P]"),
        ("a JSON file that is no transformers config",
         ["export", f"hf:{notjson}", "--batch", "2", "-o", "x.json"],
         f"memplan export: hf:{notjson}: ValueError: {notjson}: no \"model_type\"; expected a "
         "transformers config.json"),
        ("--hf-gradient-checkpointing on a model that is not transformers'",
         ["export", "models:mlp", "--batch", "2", "--hf-gradient-checkpointing", "-o", "x.json"],
         "memplan export: models:mlp: ValueError: --hf-gradient-checkpointing: expected a "
         "transformers model that supports gradient checkpointing (an hf: spec)"),
        ("--autocast for a GPU step",
         ["export", "models:mlp", "--batch", "2", "--autocast", "bfloat16", "--device", "cuda",
          "--static", "-o", "x.json"],
         "memplan export: models:mlp: ValueError: autocast 'bfloat16' with target_device "
         "'cuda': the step is traced with the CPU's autocast policy, which casts other ops "
         "than CUDA's; export autocast steps for the CPU"),
    ]
    for name, args, expected in cases:
        p = memplan_py(*args)
        ok, detail = one_line_error(p, expected)
        check(f"bad input, {name}: exit 2, one line", ok, detail)
    p = memplan_py("export", "models:mlp", "--batch", "2", "--dtype", "int3", "-o", "x.json")
    check("bad input, --dtype int3: exit 2 naming the value and the choices",
          p.returncode == 2 and "argument --dtype: invalid choice: 'int3'" in p.stderr
          and "bfloat16" in p.stderr, p.stderr[-400:])
    try:
        mt.prepare_model(mt.load_model("models:mlp"), dtype="int3")
        text = "no error"
    except ValueError as e:
        text = str(e)
    check("prepare_model(dtype='int3') names the value and what is expected",
          text == "dtype 'int3': expected one of bfloat16, float16, float32", text)
    for package, spec, extra, expected in (
            ("peft", LLAMA, ["--lora", "r=4,targets=q_proj"],
             "LoRA needs PEFT: pip install 'memplan[hf]'"),
            ("transformers", GPT2, [], "hf: models need transformers: pip install 'memplan[hf]'")):
        code = (f"import sys; sys.modules[{package!r}] = None; from memplan.torch import _cli; "
                f"sys.exit(_cli.main(['export', {spec!r}, '--batch', '2', '-o', 'x.json', "
                f"*{extra!r}]))")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env(), timeout=300)
        ok, detail = one_line_error(p, f"memplan export: {spec}: ImportError: {expected}")
        check(f"{package} missing: one line naming the extra", ok, detail)


def version_case(check):
    """A torch outside the tested range: one warning naming the range."""
    import warnings

    from memplan.torch import _common
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _common.warn_untested("torch", "2.9.1", _common.TESTED_TORCH)
        _common.warn_untested("torch", "2.9.1", _common.TESTED_TORCH)
        _common.warn_untested("torch", "2.15.0", _common.TESTED_TORCH)
    texts = [str(w.message) for w in caught]
    check("torch 2.9.1: one warning naming the tested range, none for 2.15.0",
          texts == ["memplan.torch is tested on torch 2.14.1 to 2.15.0; torch 2.9.1 may "
                    "export a step that differs from the eager one"], texts)


def data_dependent_cases(check, binary, tmp, results):
    """A forward that branches on a value: on the CPU the real value is
    traced (within TOLERANCE of the measured step); on --device meta it is a
    clear error naming the op, the module and the way around."""
    graph = os.path.join(tmp, "data_dependent.graph.json")
    p = memplan_py("export", "models:data_dependent", "--batch", "4", "--static", "-q",
                   "-o", graph)
    m = memplan_py("measure", "models:data_dependent", "--batch", "4", "-q")
    if check("a branch on data exports and measures on the CPU",
             p.returncode == 0 and m.returncode == 0, (p.stderr + m.stderr)[-600:]):
        run(binary, "analyze", graph, "--json", graph + ".rep.json", "-q")
        predicted = json.load(open(graph + ".rep.json"))["peak_bytes"]
        measured = json.loads(m.stdout)["peak_bytes"]
        e = err(predicted, measured)
        relu = any(o["type"].startswith("aten.relu") for o in json.load(open(graph))["ops"])
        results.append({"case": "a branch on a tensor's value", "spec": "models:data_dependent",
                        "options": [], "predicted": predicted, "measured": measured,
                        "error": e})
        # A 24 KB step: the usual 4 bytes apart is 0.017%.
        check("a branch on data: the branch eager takes is traced, within 8 bytes",
              relu and abs(predicted - measured) <= 8,
              f"relu traced {relu}, predicted {predicted} B, measured {measured} B")
    p = memplan_py("export", "models:data_dependent", "--batch", "4", "--device", "meta",
                   "--static", "-o", "x.json")
    expected = ("memplan export: models:data_dependent: ExportError: "
                "Tensor.item() in module 'gate' needs a tensor's value "
                "(data-dependent), which a trace without data (--device meta) does not have; "
                "export on --device cpu, with a smaller config if the model does not fit this "
                "machine")
    ok, detail = one_line_error(p, expected)
    check("--device meta, a data-dependent op: exit 2 naming op, module and the way around",
          ok, detail)


DOCS = os.path.join(ROOT, "docs", "training-steps.md")


def cpu_kernels():
    """The CPU features oneDNN picks bfloat16 kernels by, e.g. 'AVX512 avx512_bf16'."""
    import torch
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    extra = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    return " ".join([torch.backends.cpu.get_cpu_capability(), *extra])


def docs_table(torch_version, transformers_version, kernels, results):
    rows = [f"torch {torch_version}, transformers {transformers_version}, "
            f"CPU kernels {kernels}:", "",
            "| case | options | predicted | measured | error |", "|---|---|---|---|---|"]
    for r in results:
        opts = " ".join(r["options"]).replace("|", "\\|") or "-"
        rows.append(f"| {r['case']} | `{opts}` | {r['predicted']:,} B | {r['measured']:,} B | "
                    f"{100 * r['error']:+.4f}% |")
    return "\n".join(rows)


def without_cpu_bytes(table):
    """The table with the CPU named in its header and the CPU_DEPENDENT rows'
    byte columns blanked (the versions in the header still compared)."""
    lines = table.split("\n")
    lines[0] = re.sub(r", CPU kernels [^:]*:$", ", CPU kernels (any):", lines[0])
    for i, line in enumerate(lines):
        cells = line.split(" | ")
        if cells[0].lstrip("| ") in CPU_DEPENDENT and len(cells) == 5:
            cells[2] = cells[3] = "(CPU)"
            lines[i] = " | ".join(cells)
    return "\n".join(lines)


def docs_block(torch_version):
    """(text before, the block's table, text after) in DOCS for this torch."""
    text = open(DOCS).read()
    begin = f"<!-- step-options torch={torch_version} begin -->\n"
    end = f"<!-- step-options torch={torch_version} end -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    return text[:i], text[i:j].strip(), text[j:]


def docs_check(check, results, write):
    """The docs table equals this run's; on a CPU other than the one the docs
    name, the CPU_DEPENDENT rows' bytes are left out of the comparison (their
    error is not)."""
    import torch
    import transformers
    version = torch.__version__.split("+")[0]
    kernels = cpu_kernels()
    table = docs_table(version, transformers.__version__, kernels, results)
    try:
        before, shown, after = docs_block(version)
    except ValueError:
        check(f"docs/training-steps.md has a block for torch {version}", False)
        return
    if write:
        with open(DOCS, "w") as f:
            f.write(before + table + "\n" + after)
        print(f"wrote the torch {version} table into {DOCS}")
        return
    same_cpu = shown.split("\n")[0].endswith(f", CPU kernels {kernels}:")
    if not same_cpu:
        print(f"docs measured on another CPU ({shown.splitlines()[0]}); this one: {kernels}; "
              f"the bytes of {sorted(CPU_DEPENDENT)} are not compared")
    equal = shown == table if same_cpu else without_cpu_bytes(shown) == without_cpu_bytes(table)
    check(f"docs/training-steps.md shows what torch {version} measures (regenerate: "
          "step_options_test.py --write-docs)", equal,
          f"docs:\n{shown}\nmeasured:\n{table}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--require-torch", help="fail unless torch's version starts with this")
    ap.add_argument("--json", help="write every case's predicted, measured and error here")
    ap.add_argument("--write-docs", action="store_true",
                    help="write the measured table into docs/training-steps.md")
    args = ap.parse_args()
    args.memplan = os.path.abspath(args.memplan)
    check = Checks()
    try:
        import peft  # noqa: F401
        import torch
        import transformers
    except ImportError as e:
        check(f"torch, transformers and peft import ({e})", False)
        return check.summary()
    if args.require_torch:
        check(f"torch {torch.__version__} is {args.require_torch}",
              torch.__version__.startswith(args.require_torch))
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"peft {peft.__version__}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            cli_cases(check, args.memplan, tmp, results)
            config_file_case(check, args.memplan, tmp, results)
            api_cases(check, results)
            api_option_cases(check, results)
            cache_case(check, results)
            error_cases(check, tmp)
            data_dependent_cases(check, args.memplan, tmp, results)
            version_case(check)
        finally:
            os.chdir(cwd)
    for r in results:
        print(f"  {100 * r['error']:+.4f}%  {r['case']}")
    docs_check(check, results, args.write_docs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                       "cases": results}, f, indent=1)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
