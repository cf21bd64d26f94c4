#!/usr/bin/python3
"""Layer folding on transformers architectures it was not written against:
each model, narrow (hidden 64) and 12 layers deep, exported symbolically with
--fold-layers auto and never in one run; whether it folded (or why not) and
whether the two graphs are byte-identical. Folding is meant to refuse
(gemma2's alternating sliding windows, smollm3's no-RoPE layers) rather than
ever give another graph.

    bench/fold_archs.py [--archs qwen2,mistral,...]   (the repository's .venv)

Writes bench/results/fold_archs.{json,md}.
"""
import argparse
import datetime
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402

RESULTS = os.path.join(REPO, "bench", "results")
# Narrow, 12 layers; vocab and heads small enough for a quick trace.
ARCHS = {
    "qwen2": "num_attention_heads=4,num_key_value_heads=2",
    "qwen3": "num_attention_heads=4,num_key_value_heads=2,head_dim=16",
    "mistral": "num_attention_heads=4,num_key_value_heads=2",
    "gemma": "num_attention_heads=4,num_key_value_heads=1,head_dim=16",
    "gemma2": "num_attention_heads=4,num_key_value_heads=2,head_dim=16",
    "phi3": "num_attention_heads=4,num_key_value_heads=4,pad_token_id=0",
    "olmo2": "num_attention_heads=4,num_key_value_heads=4",
    "smollm3": "num_attention_heads=4,num_key_value_heads=2,pad_token_id=0",
    "gpt_neox": "num_attention_heads=4",
}
# Not exported on the meta device, with or without folding (their errors, in
# transformers 4.57.6): mixtral and opt need a tensor's value (aten.nonzero in
# the MoE router, _local_scalar_dense in OPT's positions: ExportError, exit 2);
# falcon reads a tensor made outside the trace in its attention (ExportError
# naming aten.index.Tensor and the module, exit 2; it exports on the CPU).


def spec(arch):
    return (f"{arch}:hidden_size=64,intermediate_size=128,num_hidden_layers=12,"
            f"{ARCHS[arch]},vocab_size=128,max_position_embeddings=64,seq=16")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", default=",".join(ARCHS))
    a = ap.parse_args()
    import transformers
    from memplan.torch import _hf
    from memplan.torch._export import export_symbolic
    doc = {"format": "memplan.bench.fold_archs/1",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": provenance.commit(), "transformers": transformers.__version__, "rows": []}
    for arch in a.archs.split(","):
        row = {"arch": arch, "spec": "hf:" + spec(arch)}
        try:
            model = _hf.build(spec(arch), device="meta")
            t = time.time()
            g1, s1 = export_symbolic(model, 2, name=arch)
            row["folded_s"] = round(time.time() - t, 1)
            t = time.time()
            g0, _ = export_symbolic(model, 2, name=arch, fold_layers="never")
            row["never_s"] = round(time.time() - t, 1)
            row["fold"] = s1["fold_layers"]
            row["ops"] = len(g0["ops"])
            row["identical"] = json.dumps(g1) == json.dumps(g0)
        except Exception as e:  # noqa: BLE001 - a row says what failed
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        print(json.dumps(row), flush=True)
        doc["rows"].append(row)
    with open(os.path.join(RESULTS, "fold_archs.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["# Layer folding across transformers architectures", "",
             f"{doc['date']}, transformers {doc['transformers']}, commit {doc['commit']}. "
             "`bench/fold_archs.py`; raw data: `bench/results/fold_archs.json`. Each model "
             "hidden 64, 12 layers, seq 16, symbolic batch and seq.", "",
             "| architecture | ops | folded | why not | same graph | folded s | every layer s |",
             "|---|---:|:---:|---|:---:|---:|---:|"]
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['arch']} | | | error: {r['error']} | | | |")
            continue
        f = r["fold"]
        lines.append(f"| {r['arch']} | {r['ops']} | {'yes' if f['folded'] else 'no'} | "
                     f"{f.get('why', '')} | {'yes' if r['identical'] else 'NO'} | "
                     f"{r['folded_s']} | {r['never_s']} |")
    with open(os.path.join(RESULTS, "fold_archs.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r.get("identical") for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
