#!/usr/bin/env bash
# The Bible recipe: Reina-Valera 1909 (es) -> King James Version (en), World English Bible as a second reference.
#   bash recipes/bible/run.sh        data, training, translation of the test set (Acts), scores
#   bash recipes/bible/run.sh data   only the data (with the gold word alignments of Acts)
#   bash recipes/bible/run.sh gold   only the gold word alignments (needs the extracted text)
# Env: MODEL (transformer), MAX_TIME (54m), THREADS (0 = all cores), VOCAB (8000), CONFIG (recipes/bible/$MODEL.yaml),
#      DATA (data/bible), OUT (runs/bible-es-en/$MODEL), BEAM (5). Every step is skipped when its output exists,
#      and training resumes from last.pt, so an interrupted recipe continues where it stopped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
model=${MODEL:-transformer}
data=${DATA:-data/bible}
vocab=${VOCAB:-8000}
config=${CONFIG:-$here/$model.yaml}
out=${OUT:-runs/bible-es-en/$model}
beam=${BEAM:-5}
prepared=$data/bpe$vocab

install_sword() {
  local missing=()
  for pair in sparv:spaRV1909eb kjv:engKJV2006eb web:engWEB2015eb; do
    ls /usr/share/sword/mods.d/ 2>/dev/null | grep -qi "^${pair#*:}.conf$" || missing+=("sword-text-${pair%%:*}")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "installing ${missing[*]}" >&2
  command -v apt-get >/dev/null || { echo "error: need Debian packages ${missing[*]} (apt-get not found)" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

# gold word alignments of the test book from Strong's numbers (see README.md): test.words.{es,en}, test.gold
make_gold() {
  [ -f "$data/raw/test.gold" ] || python "$here/gold.py" --data "$data/raw"
}

make_data() {
  install_sword
  [ -f "$data/raw/test.web" ] || python "$here/extract.py" --out "$data/raw"
  make_gold
  [ -f "$prepared/manifest.json" ] || nmtkit prepare --vocab-size "$vocab" --out "$prepared" \
    --train-src "$data/raw/train.es" --train-tgt "$data/raw/train.en" \
    --dev-src "$data/raw/dev.es" --dev-tgt "$data/raw/dev.en" \
    --test-src "$data/raw/test.es" --test-tgt "$data/raw/test.en" > /dev/null
}

if [ "${1:-}" = gold ]; then make_gold; exit 0; fi
make_data
[ "${1:-}" = data ] && exit 0

config_args=()
[ -f "$config" ] && config_args=(--config "$config")
resume=()
[ -f "$out/last.pt" ] && resume=(--resume)
mkdir -p "$out"
nmtkit train --data "$prepared" --model "$model" "${config_args[@]}" "${resume[@]}" --out "$out" \
  --max-time "${MAX_TIME:-54m}" --threads "${THREADS:-0}" > "$out/train.summary.json"

start=$(date +%s.%N)
nmtkit translate -m "$out/model.pt" --beam "$beam" --threads "${THREADS:-0}" --input "$data/raw/test.es" > "$out/test.hyp"
end=$(date +%s.%N)
nmtkit evaluate --hyp "$out/test.hyp" --ref "$data/raw/test.en" --json > "$out/test.kjv.json"
nmtkit evaluate --hyp "$out/test.hyp" --ref "$data/raw/test.en" --ref "$data/raw/test.web" --json > "$out/test.kjv+web.json"
python "$here/report.py" --run "$out" --data "$data/raw" --translate-start "$start" --translate-end "$end" \
  --beam "$beam" | tee "$out/results.md"
# word alignments from attention against the Strong's-number gold (models without attention skip this)
nmtkit align -m "$out/model.pt" --src "$data/raw/test.words.es" --tgt "$data/raw/test.words.en" \
  --gold "$data/raw/test.gold" --threads "${THREADS:-0}" > "$out/test.align.json" \
  || echo "no word alignments from $model (it has no attention)" >&2
