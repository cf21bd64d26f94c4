#!/usr/bin/env bash
# The 7B meta export (issue 13): a Llama-2-7B-shaped transformers model
# (LlamaConfig with 7B dimensions, fp32), batch 1, seq 4096, symbolic batch and
# seq, traced on the meta device. Records wall time and max RSS (GNU time) and
# the predicted peaks in bench/results/llama7b_meta.json.
# Usage: bench/llama7b_meta.sh   (needs .venv: scripts/install-deps.sh --test)
set -euo pipefail
cd "$(dirname "$0")/.."
spec="hf:llama:hidden_size=4096,intermediate_size=11008,num_hidden_layers=32,num_attention_heads=32,num_key_value_heads=32,vocab_size=32000,max_position_embeddings=4096,seq=4096"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/time -v -o "$tmp/time.txt" env PYTHONPATH=python .venv/bin/python -m memplan export \
  "$spec" --batch 1 --device meta -o "$tmp/g.json" -q >"$tmp/stats.json" 2>"$tmp/stderr.txt" ||
  { echo "llama7b_meta: the export failed:" >&2; cat "$tmp/stderr.txt" "$tmp/time.txt" >&2; exit 1; }
build/cli/memplan analyze "$tmp/g.json" --json "$tmp/b1.json" -q
build/cli/memplan analyze "$tmp/g.json" --set batch=4 --set seq=2048 --json "$tmp/b4.json" -q
python3 - "$tmp" "$spec" <<'PY'
import json, re, sys, os
tmp, spec = sys.argv[1], sys.argv[2]
t = open(os.path.join(tmp, "time.txt")).read()
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1)
parts = [float(x) for x in wall.split(":")]
secs = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
stats = json.loads(open(os.path.join(tmp, "stats.json")).read())
b1 = json.load(open(os.path.join(tmp, "b1.json")))
b4 = json.load(open(os.path.join(tmp, "b4.json")))
doc = {"model": spec, "device": "meta", "export_wall_seconds": secs, "max_rss_bytes": rss_kb * 1024,
       "cores": os.cpu_count(), "ops": stats["ops"], "tensors": stats["tensors"],
       "symbols": stats["symbols"], "symbolic_dims": stats["symbolic_dims"],
       "predicted_peak_bytes": {"batch=1,seq=4096": b1["peak_bytes"],
                                "batch=4,seq=2048": b4["peak_bytes"]},
       "resident_bytes": b1["resident_bytes"],
       "targets": {"export_wall_seconds": 600, "max_rss_bytes": 8 << 30}}
os.makedirs("bench/results", exist_ok=True)
with open("bench/results/llama7b_meta.json", "w") as f:
    json.dump(doc, f, indent=1)
print(json.dumps(doc, indent=1))
PY
