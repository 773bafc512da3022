#!/usr/bin/env bash
# Sequence reversal end to end through the CLI: make data -> prepare -> train -> translate -> evaluate.
# Env: MODEL (default transformer), CONFIG (recipes/reverse/$MODEL.yaml if it exists, else config.yaml, the
# Transformer's), DATA (default data/reverse), OUT (default runs/reverse/$MODEL). Each model trains in about a
# minute or less on a CPU. Safe to run again, with the same or another MODEL: the data (the same every time) is
# prepared once, and the model's run directory is trained anew.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
model=${MODEL:-transformer}
data=${DATA:-data/reverse}
out=${OUT:-runs/reverse/$model}
config=${CONFIG:-$here/$model.yaml}
[ -f "$config" ] || config=$here/config.yaml
python "$here/make_data.py" --out "$data/raw"
[ -f "$data/prepared/manifest.json" ] || nmtkit -q prepare --subword word --vocab-size 100 --out "$data/prepared" \
  --train-src "$data/raw/train.src" --train-tgt "$data/raw/train.tgt" \
  --dev-src "$data/raw/dev.src" --dev-tgt "$data/raw/dev.tgt" \
  --test-src "$data/raw/test.src" --test-tgt "$data/raw/test.tgt" > /dev/null
rm -rf "$out"
mkdir -p "$(dirname "$out")"
nmtkit train --data "$data/prepared" --config "$config" --model "$model" --out "$out" > "$out.summary.json"
nmtkit translate -m "$out/model.pt" --input "$data/raw/test.src" > "$out/test.hyp"
python - "$out/test.hyp" "$data/raw/test.tgt" <<'PY'
import sys
hyps, refs = (open(path, encoding="utf-8").read().splitlines() for path in sys.argv[1:])
print(f"exact match: {sum(h == r for h, r in zip(hyps, refs)) / len(refs):.3f} ({len(refs)} sentences)")
PY
nmtkit evaluate --hyp "$out/test.hyp" --ref "$data/raw/test.tgt"
