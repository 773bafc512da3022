#!/usr/bin/env bash
# Domain adaptation: the Bible recipe's Spanish -> English model fine-tuned on Spanish -> English software messages
# (the machine's Spanish gettext catalogs, recipes/messages/, sides swapped). BLEU on a held-out messages test set
# and on the Bible test set (Acts), before and after: how much is gained, how much is forgotten.
#   bash recipes/finetune/run.sh          (after make recipe-bible)
# Env: BASE (runs/bible-es-en/transformer/model.pt), MAX_TIME (10m), THREADS (0 = all cores), BEAM (5),
#      BIBLE (data/bible/raw), DATA (data/finetune-es-en), OUT (runs/finetune-es-en), and any train option through
#      FINETUNE_ARGS (e.g. "--set train.lr=5e-4"). Every step is skipped when its output exists and training
#      resumes, so the recipe can be run again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${BASE:-runs/bible-es-en/transformer/model.pt}
bible=${BIBLE:-data/bible/raw}
data=${DATA:-data/finetune-es-en}
out=${OUT:-runs/finetune-es-en}
threads=${THREADS:-0}
beam=${BEAM:-5}
[ -f "$base" ] || { echo "error: $base not found: run make recipe-bible first (or set BASE)" >&2; exit 1; }
mkdir -p "$data" "$out"

# the messages are extracted English -> Spanish; the model translates Spanish -> English
[ -f "$data/raw/stats.json" ] || python "$here/../messages/extract.py" --lang es --code es --out "$data/raw"
# the base model's vocabulary encodes the new data (the weights mean nothing with another one)
[ -f "$data/prepared/manifest.json" ] || nmtkit prepare --subword-model "$base" --src-lang es --tgt-lang en \
  --out "$data/prepared" --train-src "$data/raw/train.es" --train-tgt "$data/raw/train.en" \
  --dev-src "$data/raw/dev.es" --dev-tgt "$data/raw/dev.en" > /dev/null

resume=()
[ -f "$out/run/last.pt" ] && resume=(--resume)
# shellcheck disable=SC2086  # FINETUNE_ARGS are words
nmtkit train --data "$data/prepared" --init-from "$base" --out "$out/run" "${resume[@]}" \
  --max-time "${MAX_TIME:-10m}" --threads "$threads" ${FINETUNE_ARGS:-} > "$out/train.summary.json"

score() {  # score MODEL NAME: translate and score both test sets
  local model=$1 name=$2
  for set in messages bible; do
    if [ $set = messages ]; then src=$data/raw/test.es ref=$data/raw/test.en; else src=$bible/test.es ref=$bible/test.en; fi
    [ "$out/$name.$set.hyp" -nt "$model" ] || nmtkit translate -m "$model" --beam "$beam" --threads "$threads" \
      --input "$src" > "$out/$name.$set.hyp"
    nmtkit evaluate --hyp "$out/$name.$set.hyp" --ref "$ref" --lang en --json > "$out/$name.$set.json"
  done
}
score "$base" before
score "$out/run/model.pt" after
python - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = ["| model | messages BLEU | messages chrF | Bible (Acts, KJV) BLEU | Bible chrF |", "|---|---|---|---|---|"]
for name, label in (("before", "Bible model"), ("after", "fine-tuned on messages")):
    scores = {s: json.load(open(f"{out}/{name}.{s}.json")) for s in ("messages", "bible")}
    rows.append(f"| {label} | " + " | ".join(f"{scores[s][m]['score']:.2f}" for s in ("messages", "bible")
                                            for m in ("bleu", "chrf")) + " |")
table = "\n".join(rows) + "\n"
open(f"{out}/results.md", "w", encoding="utf-8").write(table)
print(table, end="")
PY
