#!/usr/bin/env bash
# One multilingual model for software messages between English and several languages, in both directions, with a
# target-language tag (Johnson et al. 2017); bilingual models of the same size and time to compare with; zero-shot
# directions never trained. Data: the machine's gettext catalogs (recipes/messages/).
#   bash recipes/multilingual/run.sh
# Env: LANGS ("de fr es ru"), ZERO_SHOT ("de-fr fr-de"), MAX_TIME (10m, for each bilingual model), MULTI_TIME (the
#      multilingual model's budget, MAX_TIME by default; 2 x languages x MAX_TIME is the bilingual models' time
#      together), THREADS (0 = all cores),
#      VOCAB (8000), TEMPERATURE (pair sampling temperature, 1), BASELINES (1: also train a bilingual model per
#      direction), BEAM (5), DATA (data/multilingual), OUT (runs/multilingual). Every step is skipped when its output
#      exists and training resumes, so the recipe can be run again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
langs=${LANGS:-"de fr es ru"}
zero_shot=${ZERO_SHOT:-"de-fr fr-de"}
data=${DATA:-data/multilingual}
out=${OUT:-runs/multilingual}
threads=${THREADS:-0}
vocab=${VOCAB:-8000}
beam=${BEAM:-5}
mkdir -p "$data" "$out"

for lang in $langs; do
  [ -f "$data/en-$lang/stats.json" ] || python "$here/../messages/extract.py" --lang "$lang" --out "$data/en-$lang" \
    --dev 500 --test 1000
done
# shellcheck disable=SC2086  # the lists are words
python "$here/pairs.py" --data "$data" --langs $langs --zero-shot $zero_shot
[ -f "$data/prepared/manifest.json" ] || nmtkit prepare --pairs "$data/pairs.yaml" --vocab-size "$vocab" \
  --out "$data/prepared" > /dev/null

train() {  # train DATA_DIR RUN_DIR BUDGET [options]
  local resume=()
  [ -f "$2/last.pt" ] && resume=(--resume)
  mkdir -p "$2"
  nmtkit train --data "$1" --out "$2" "${resume[@]}" --max-time "$3" --threads "$threads" "${@:4}" \
    > "$2/train.summary.json"
}

score() {  # score MODEL SOURCE REFERENCE TGT_LANG OUTPUT_PREFIX [translate options]
  [ "$5.hyp" -nt "$1" ] || nmtkit translate -m "$1" --beam "$beam" --threads "$threads" --input "$2" "${@:6}" \
    > "$5.hyp"
  nmtkit evaluate --hyp "$5.hyp" --ref "$3" --lang "$4" --json > "$5.json"
}

train "$data/prepared" "$out/multi" "${MULTI_TIME:-${MAX_TIME:-10m}}" --set "train.pair_temperature=${TEMPERATURE:-1}"
for lang in $langs; do
  for direction in "en-$lang" "$lang-en"; do
    src=${direction%-*} tgt=${direction#*-}
    score "$out/multi/model.pt" "$data/en-$lang/test.$src" "$data/en-$lang/test.$tgt" "$tgt" \
      "$out/multi/test.$direction" --tgt-lang "$tgt"
  done
done
for direction in $zero_shot; do
  src=${direction%-*} tgt=${direction#*-}
  score "$out/multi/model.pt" "$data/test.$direction.$src" "$data/test.$direction.$tgt" "$tgt" \
    "$out/multi/test.$direction" --tgt-lang "$tgt"
done

if [ "${BASELINES:-1}" = 1 ]; then
  for lang in $langs; do
    for direction in "en-$lang" "$lang-en"; do
      src=${direction%-*} tgt=${direction#*-} corpus=$data/en-$lang
      [ -f "$data/$direction/manifest.json" ] || nmtkit prepare --vocab-size "$vocab" --src-lang "$src" \
        --tgt-lang "$tgt" --out "$data/$direction" --train-src "$corpus/train.$src" --train-tgt "$corpus/train.$tgt" \
        --dev-src "$corpus/dev.$src" --dev-tgt "$corpus/dev.$tgt" > /dev/null
      train "$data/$direction" "$out/$direction" "${MAX_TIME:-10m}"
      score "$out/$direction/model.pt" "$corpus/test.$src" "$corpus/test.$tgt" "$tgt" "$out/$direction/test"
    done
  done
fi
# shellcheck disable=SC2086
python "$here/report.py" --runs "$out" --langs $langs --zero-shot $zero_shot | tee "$out/results.md"
