#!/usr/bin/env bash
# Start from a pretrained model, offline: a small OPUS-MT-style MarianMTModel is built here in Hugging Face format
# (build_hf.py: SentencePiece models, vocab.json, briefly trained with transformers, saved with save_pretrained),
# imported with `nmtkit import`, checked against transformers' generate, fine-tuned with nmtkit on English ->
# Spanish software messages (the machine's gettext catalogs, recipes/messages/), exported to CTranslate2 int8, and
# each stage scored on the held-out messages. A real OPUS-MT or NLLB model takes the same road (README.md).
#   bash recipes/pretrained/run.sh            (make recipe-pretrained)
# Env: DATA (data/pretrained), OUT (runs/pretrained), HF_STEPS (300 updates with transformers), MAX_TIME (5m of
#      fine-tuning), THREADS (2), BEAM (4), BUILD_ARGS (more build_hf.py options, e.g. "--d-model 512"),
#      PREPARE_ARGS and FINETUNE_ARGS (more prepare and train options). Each step is skipped when its output
#      exists; training resumes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=${DATA:-data/pretrained}
out=${OUT:-runs/pretrained}
threads=${THREADS:-2}
beam=${BEAM:-4}
mkdir -p "$data" "$out"

[ -f "$data/raw/stats.json" ] || python "$here/../messages/extract.py" --lang es --code es --out "$data/raw"
# shellcheck disable=SC2086  # BUILD_ARGS is words
[ -f "$data/hf/config.json" ] || python "$here/build_hf.py" --train-src "$data/raw/train.en" \
  --train-tgt "$data/raw/train.es" --out "$data/hf" --steps "${HF_STEPS:-300}" --threads "$threads" \
  ${BUILD_ARGS:-} > "$out/build_hf.json"

# the two commands a user runs for a downloaded checkpoint
[ -f "$out/imported/model.pt" ] || nmtkit import "$data/hf" --out "$out/imported" > "$out/import.json"

# the same greedy translations from transformers and from the imported checkpoint
[ -f "$out/hf.greedy.hyp" ] || python "$here/generate.py" --model "$data/hf" --input "$data/raw/test.en" \
  --beam 1 --max-new-tokens 64 --threads "$threads" > "$out/hf.greedy.hyp"
[ -f "$out/imported.greedy.hyp" ] || nmtkit translate -m "$out/imported/model.pt" --beam 1 --max-len-a 0 \
  --max-len-b 64 --threads "$threads" --input "$data/raw/test.en" > "$out/imported.greedy.hyp"

# fine-tuning: the imported vocabulary encodes the corpus, training starts from the imported weights
# shellcheck disable=SC2086  # PREPARE_ARGS are words
[ -f "$data/prepared/manifest.json" ] || nmtkit prepare --subword-model "$out/imported/model.pt" \
  --src-lang en --tgt-lang es --out "$data/prepared" --train-src "$data/raw/train.en" \
  --train-tgt "$data/raw/train.es" --dev-src "$data/raw/dev.en" --dev-tgt "$data/raw/dev.es" \
  ${PREPARE_ARGS:-} > /dev/null
resume=()
[ -f "$out/tuned/last.pt" ] && resume=(--resume)
# shellcheck disable=SC2086  # FINETUNE_ARGS are words
nmtkit train --data "$data/prepared" --init-from "$out/imported/model.pt" --out "$out/tuned" "${resume[@]}" \
  --max-time "${MAX_TIME:-5m}" --threads "$threads" ${FINETUNE_ARGS:-} > "$out/train.summary.json"
[ -f "$out/ct2/model.bin" ] || nmtkit export -m "$out/tuned/model.pt" --out "$out/ct2" --quantization int8 \
  > "$out/export.json"

for name in imported tuned ct2; do
  model=$out/$name/model.pt
  [ $name = ct2 ] && model=$out/ct2
  [ -f "$out/$name.hyp" ] || nmtkit translate -m "$model" --beam "$beam" --threads "$threads" \
    --input "$data/raw/test.en" > "$out/$name.hyp"
  nmtkit evaluate --hyp "$out/$name.hyp" --ref "$data/raw/test.es" --lang es --json > "$out/$name.json"
done
python - "$out" <<'PY'
import json, sys
out = sys.argv[1]
hf, ours = (open(f"{out}/{name}.greedy.hyp", encoding="utf-8").read().splitlines() for name in ("hf", "imported"))
same = sum(a.strip() == b.strip() for a, b in zip(hf, ours))
rows = [f"transformers' generate and the imported checkpoint, greedy: {same} of {len(hf)} test lines identical\n",
        "| model | BLEU | chrF |", "|---|---|---|"]
for name, label in (("imported", "imported (transformers-trained)"), ("tuned", "fine-tuned with nmtkit"),
                    ("ct2", "fine-tuned, CTranslate2 int8")):
    scores = json.load(open(f"{out}/{name}.json"))
    rows.append(f"| {label} | {scores['bleu']['score']:.2f} | {scores['chrf']['score']:.2f} |")
table = "\n".join(rows) + "\n"
open(f"{out}/results.md", "w", encoding="utf-8").write(table)
print(table, end="")
PY
