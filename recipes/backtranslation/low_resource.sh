#!/usr/bin/env bash
# Back-translation where the literature says it pays (see README.md, "Low resource"): X -> en with 10,000 genuine
# pairs and the rest of the corpus' English side as monolingual text, every model trained until its dev BLEU stops
# improving: bilingual only, + back-translation (beam), + tagged back-translation, + sampled back-translation.
#   bash recipes/backtranslation/low_resource.sh          (LANG_DIR=de)
# Env: LANG_DIR (de: a locale directory), LINES (10000 genuine pairs), SHARE (0.5: back-translated share of a mixed
#      system's target tokens), MAX_STEPS (20000: the cap), PATIENCE (4 validations of VALID_EVERY 500 updates),
#      THREADS (1), CONFIG (recipes/bible/transformer.yaml, its schedule set to inverse_sqrt), LOCALE_DIR,
#      DATA (data/backtranslation-low/X), OUT (runs/backtranslation-low/X). Every step is skipped when its output
#      exists, and a training run interrupted resumes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lang=${LANG_DIR:-de} code=${LANG_DIR:-de}; code=${code%%[_@]*}
data=${DATA:-data/backtranslation-low/$code}
out=${OUT:-runs/backtranslation-low/$code}
threads=${THREADS:-1}
config=${CONFIG:-$here/../bible/transformer.yaml}
bi=$data/bilingual
mkdir -p "$data" "$out"

[ -f "$bi/stats.json" ] || python "$here/../messages/extract.py" --lang "$lang" --code "$code" --out "$bi" \
  --locale-dir "${LOCALE_DIR:-/usr/share/locale}" 2> /dev/null
[ -f "$data/split.json" ] || python "$here/low_resource.py" split --bilingual "$bi" --lang "$code" \
  --lines "${LINES:-10000}" --out "$data" > /dev/null

converge() {  # converge DATA RUN [train options]: until dev BLEU stops improving (greedy, every VALID_EVERY updates)
  [ -s "$2/train.summary.json" ] && return  # written when the run ends
  local resume=()
  [ -f "$2/last.pt" ] && resume=(--resume)
  mkdir -p "$2"
  nmtkit train --data "$1" --config "$config" --out "$2" "${resume[@]}" --max-steps "${MAX_STEPS:-20000}" \
    --threads "$threads" \
    --set train.lr_schedule=inverse_sqrt --set "train.valid_every=${VALID_EVERY:-500}" \
    --set "train.patience=${PATIENCE:-4}" --set train.best_metric=bleu "${@:3}" > "$2/train.summary.json"
}

# the en -> X model on the genuine pairs, and the monolingual English back-translated with beam 5 and by sampling
[ -f "$data/en-$code/manifest.json" ] || nmtkit prepare --src-lang en --tgt-lang "$code" --out "$data/en-$code" \
  --train-src "$data/genuine.en" --train-tgt "$data/genuine.$code" --dev-src "$bi/dev.en" \
  --dev-tgt "$bi/dev.$code" > /dev/null
converge "$data/en-$code" "$out/en-$code"
for decode in beam:--beam=5 sample:--sample; do
  [ -f "$data/bt.${decode%%:*}.$code" ] || nmtkit translate -m "$out/en-$code/model.pt" "${decode#*:}" \
    --threads "$threads" --input "$data/mono.en" --output "$data/bt.${decode%%:*}.$code" --resume > /dev/null
done

# one data directory for the four X -> en systems: one vocabulary, they differ only in what they draw
if [ ! -f "$data/mixed/manifest.json" ]; then
  python "$here/low_resource.py" corpora --data "$data" --bilingual "$bi" --lang "$code" --out "$data/corpora.yaml"
  nmtkit prepare --corpora "$data/corpora.yaml" --src-lang "$code" --tgt-lang en --out "$data/mixed" > /dev/null
fi
for system in bilingual bt bt-tagged bt-sample; do
  converge "$data/mixed" "$out/$system" \
    --set "train.stages=$(python "$here/low_resource.py" stages --system "$system" --share "${SHARE:-0.5}")"
  [ "$out/$system/test.hyp" -nt "$out/$system/model.pt" ] || nmtkit translate -m "$out/$system/model.pt" \
    --threads "$threads" --input "$bi/test.$code" > "$out/$system/test.hyp"
  nmtkit evaluate --hyp "$out/$system/test.hyp" --ref "$bi/test.en" --lang en --json > "$out/$system/test.json"
done
python "$here/low_resource.py" report --runs "$out" --data "$data" --lang "$code" | tee "$out/results.md"
