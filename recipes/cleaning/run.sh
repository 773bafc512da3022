#!/usr/bin/env bash
# Cleaning a noisy crawl (see README.md): English -> German software messages with 40% of the training pairs spoiled
# in seven known ways (benchmarks/noisy_corpus.py), then the same model and budget trained on the clean pairs alone,
# on the noisy corpus with no cleaning, with prepare's default filters, and with the crawl settings after
# dual conditional cross-entropy filtering (nmtkit score-pairs, two models trained on a clean seed).
#   bash recipes/cleaning/run.sh                  (make recipe-cleaning)
#   SYSTEMS="clean full" MAX_STEPS=1000 bash recipes/cleaning/run.sh
# Env: SYSTEMS ("clean noisy defaults full"), MAX_STEPS (3000 updates a system), SEED_STEPS (2000: each seed model),
#      SEED_LINES (10000 clean pairs for the seed models), KEEP (0.85: the share of scored pairs score-pairs keeps),
#      SHARE (0.4: spoiled pairs in the noisy corpus), OTHERS ("fr es it nl pt ru pl sv": the catalogs the
#      wrong-language pairs come from), THREADS (1: each system's torch threads), SEED (1: training seed),
#      CONFIG (recipes/bible/transformer.yaml), LOCALE_DIR (/usr/share/locale), DATA (data/cleaning),
#      OUT (runs/cleaning). Every step is skipped when its output exists.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
data=${DATA:-data/cleaning}
out=${OUT:-runs/cleaning}
locale_dir=${LOCALE_DIR:-/usr/share/locale}
threads=${THREADS:-1}
config=${CONFIG:-$here/../bible/transformer.yaml}
systems=${SYSTEMS:-"clean noisy defaults full"}
# prepare as it was before issue 64: empty lines, length, length ratio and exact duplicates only
off=(--set data.langid=false --set data.script_share=0 --set data.links=false --set data.max_repeat=0
     --set data.max_word_chars=0)
# the crawl settings: every rule filter on, language identification down to 3 letters, a tighter length ratio
crawl=(--set data.numbers=true --set data.copies=0.8 --set data.near_dedup=true --set data.symbols_only=true
       --set data.langid_min_letters=3 --set data.max_ratio=2)
mkdir -p "$data" "$out"

extract() {  # extract LANG DIR [split sizes]
  [ -f "$2/stats.json" ] || python "$here/../messages/extract.py" --lang "$1" --code "$1" --out "$2" \
    --locale-dir "$locale_dir" "${@:3}" 2> /dev/null
}
extract de "$data/en-de"
for lang in ${OTHERS:-fr es it nl pt ru pl sv}; do extract "$lang" "$data/others/en-$lang" --dev 0 --test 0; done
[ -f "$data/noisy/stats.json" ] || python "$root/benchmarks/noisy_corpus.py" build --clean "$data/en-de" \
  --others "$data/others" --out "$data/noisy" --share "${SHARE:-0.4}" > /dev/null

prepare() {  # prepare OUT TRAIN_PREFIX [options]: English -> German, the clean dev and test sets
  [ -f "$1/manifest.json" ] || nmtkit prepare --src-lang en --tgt-lang de --out "$1" \
    --train-src "$2.en" --train-tgt "$2.de" --dev-src "$data/en-de/dev.en" --dev-tgt "$data/en-de/dev.de" \
    --test-src "$data/en-de/test.en" --test-tgt "$data/en-de/test.de" "${@:3}" > "$1.json"
}

train() {  # train DATA RUN STEPS: resumes a run that is there
  local resume=()
  [ -f "$2/last.pt" ] && resume=(--resume)
  mkdir -p "$2"
  nmtkit train --data "$1" --config "$config" --out "$2" "${resume[@]}" --max-steps "$3" --threads "$threads" \
    --seed "${SEED:-1}" > "$2/train.summary.json"
}

# the seed models of dual conditional cross-entropy: en -> de and de -> en on SEED_LINES clean pairs
if [[ " $systems " == *" full "* ]]; then
  [ -f "$data/seed/train.de" ] || python "$root/benchmarks/noisy_corpus.py" seed --clean "$data/en-de" \
    --lines "${SEED_LINES:-10000}" --out "$data/seed" > /dev/null
  for direction in en-de de-en; do
    src=${direction%-*} tgt=${direction#*-}
    [ -f "$data/seed-$direction/manifest.json" ] || nmtkit prepare --src-lang "$src" --tgt-lang "$tgt" \
      --out "$data/seed-$direction" --train-src "$data/seed/train.$src" --train-tgt "$data/seed/train.$tgt" \
      --dev-src "$data/en-de/dev.$src" --dev-tgt "$data/en-de/dev.$tgt" > /dev/null
    [ -f "$out/seed-$direction/model.pt" ] || train "$data/seed-$direction" "$out/seed-$direction" \
      "${SEED_STEPS:-2000}"
  done
  mkdir -p "$data/scored"
  [ -f "$data/scored/summary.json" ] || nmtkit score-pairs --src "$data/noisy/train.en" \
    --tgt "$data/noisy/train.de" -m "$out/seed-en-de/model.pt" --reverse-model "$out/seed-de-en/model.pt" \
    --threads "$threads" --keep "${KEEP:-0.85}" --out-src "$data/scored/train.en" --out-tgt "$data/scored/train.de" \
    --output "$data/scored/scores" > "$data/scored/summary.json"
fi

for system in $systems; do
  case $system in
    clean) prepare "$data/prepared-clean" "$data/en-de/train" "${off[@]}" ;;
    noisy) prepare "$data/prepared-noisy" "$data/noisy/train" "${off[@]}" ;;
    defaults) prepare "$data/prepared-defaults" "$data/noisy/train" ;;
    full) prepare "$data/prepared-full" "$data/scored/train" "${crawl[@]}" ;;
    *) echo "error: unknown system $system (clean, noisy, defaults, full)" >&2; exit 1 ;;
  esac
  [ "$system" = clean ] || python "$root/benchmarks/noisy_corpus.py" score --noisy "$data/noisy" \
    --prepared "$data/prepared-$system" --json > "$out/$system.removed.json"
  run=$out/$system
  train "$data/prepared-$system" "$run" "${MAX_STEPS:-3000}"
  [ "$run/test.hyp" -nt "$run/model.pt" ] || nmtkit translate -m "$run/model.pt" --threads "$threads" \
    --input "$data/en-de/test.en" > "$run/test.hyp"
  nmtkit evaluate --hyp "$run/test.hyp" --ref "$data/en-de/test.de" --metrics bleu,chrf --json > "$run/test.json"
done
python "$root/benchmarks/noisy_corpus.py" report --runs "$out" | tee "$out/results.md"
