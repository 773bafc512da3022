#!/usr/bin/env bash
# Back-translation for software messages X -> en (see README.md): for each X, the messages recipe's X <-> en pairs,
# the English of the machine's other gettext catalogs (monolingual.py) translated into X by an en -> X model, and
# three X -> en systems trained for the same time: bilingual only, + untagged and + tagged back-translations.
#   bash recipes/backtranslation/run.sh              (make recipe-backtranslation)
#   SMOKE=1 bash recipes/backtranslation/run.sh      the whole workflow in a few minutes: tiny model, capped data
# Env: LANGS ("de ru"; SMOKE: "de"; locale directories), MAX_TIME (each X -> en system's budget: 15m; SMOKE 45s),
#      MAX_STEPS (a budget in updates instead, the same for every model: equal work whatever else the machine
#      runs), BT_TIME (the en -> X model's, MAX_TIME), BT_DECODE (beam | sample: how the back-translations are made),
#      BT_ARGS (more translate options for them, e.g. "--top-k 10"), BT_SHARE (0.5: the back-translations' share
#      of target tokens), FINETUNE (0.2: the share of updates spent on bilingual data alone at the end; 0 = one
#      stage), BEAM (5), VOCAB (8000; SMOKE 2000), MONO_LINES (0 = all; SMOKE 1500), BI_LINES (bilingual training
#      pairs, 0 = all; SMOKE 4000), DEV and TEST (1000 each; SMOKE 200), CONFIG (recipes/bible/transformer.yaml;
#      none = nmtkit's defaults), TRAIN_ARGS (more train options; SMOKE: a 1-layer d64 Transformer), THREADS
#      (0 = all cores), LOCALE_DIR (/usr/share/locale), DATA (data/backtranslation[-smoke]),
#      OUT (runs/backtranslation[-smoke]).
#      Every step is skipped when its output exists and training resumes, so the recipe can be run again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${SMOKE:-0}" = 1 ]; then
  suffix=-smoke langs=${LANGS:-de} max_time=${MAX_TIME:-45s} vocab=${VOCAB:-2000} mono_lines=${MONO_LINES:-1500}
  bi_lines=${BI_LINES:-4000} dev=${DEV:-200} test=${TEST:-200}
  # a model that learns something in seconds (else its back-translations are empty lines), float32 without the
  # bf16 probe, greedy validation on 50 dev lines
  train_args=${TRAIN_ARGS:-"--set model.encoder_layers=1 --set model.decoder_layers=1 --set model.d_model=64
    --set model.ffn=256 --set train.warmup=30 --set train.lr=3e-3 --set train.amp=none
    --set train.valid_max_sentences=50 --set decode.beam=1"}
else
  suffix= langs=${LANGS:-"de ru"} max_time=${MAX_TIME:-15m} vocab=${VOCAB:-8000} mono_lines=${MONO_LINES:-0}
  bi_lines=${BI_LINES:-0} dev=${DEV:-1000} test=${TEST:-1000} train_args=${TRAIN_ARGS:-}
fi
data_root=${DATA:-data/backtranslation$suffix}
out_root=${OUT:-runs/backtranslation$suffix}
bt_decode=${BT_DECODE:-beam}
threads=${THREADS:-0}
beam=${BEAM:-5}
config=${CONFIG:-$here/../bible/transformer.yaml}
locale_dir=${LOCALE_DIR:-/usr/share/locale}
case $bt_decode in
  beam) decode_args=(--beam "$beam") ;;
  sample) decode_args=(--sample) ;;
  *) echo "error: BT_DECODE=$bt_decode: give beam or sample" >&2; exit 1 ;;
esac

train() {  # train DATA_DIR RUN_DIR BUDGET CONFIG: resumes a run that is there
  local resume=() config_args=()
  [ -f "$2/last.pt" ] && resume=(--resume)
  [ "$4" != none ] && config_args=(--config "$4")
  mkdir -p "$2"
  # shellcheck disable=SC2086  # TRAIN_ARGS are words
  local budget=(--max-time "$3")
  [ -n "${MAX_STEPS:-}" ] && budget=(--max-steps "$MAX_STEPS")
  nmtkit train --data "$1" --out "$2" "${resume[@]}" "${config_args[@]}" "${budget[@]}" --threads "$threads" \
    $train_args > "$2/train.summary.json"
}

score() {  # score MODEL SOURCE REFERENCE LANG OUTPUT_PREFIX: translate again when the model changed
  [ "$5.hyp" -nt "$1" ] || nmtkit translate -m "$1" --beam "$beam" --threads "$threads" --input "$2" > "$5.hyp"
  nmtkit evaluate --hyp "$5.hyp" --ref "$3" --lang "$4" --json > "$5.json"
}

for lang in $langs; do
  code=${lang%%[_@]*}
  data=$data_root/$code out=$out_root/$code bi=$data_root/$code/bilingual
  mkdir -p "$data" "$out"
  # the bilingual corpus and its split, as the messages recipe makes them
  [ -f "$bi/stats.json" ] || python "$here/../messages/extract.py" --lang "$lang" --code "$code" --out "$bi" \
    --dev "$dev" --test "$test" --locale-dir "$locale_dir"
  train_src=$bi/train.$code train_tgt=$bi/train.en
  if [ "$bi_lines" -gt 0 ]; then
    mkdir -p "$data/capped"
    head -n "$bi_lines" "$bi/train.$code" > "$data/capped/train.$code"
    head -n "$bi_lines" "$bi/train.en" > "$data/capped/train.en"
    train_src=$data/capped/train.$code train_tgt=$data/capped/train.en
  fi
  [ -f "$data/mono/mono.stats.json" ] || python "$here/monolingual.py" --lang "$lang" --bilingual "$bi" \
    --out "$data/mono" --max-lines "$mono_lines" --locale-dir "$locale_dir"

  # the en -> X model and the back-translations
  [ -f "$data/en-$code/manifest.json" ] || nmtkit prepare --src-lang en --tgt-lang "$code" --vocab-size "$vocab" \
    --out "$data/en-$code" --train-src "$train_tgt" --train-tgt "$train_src" \
    --dev-src "$bi/dev.en" --dev-tgt "$bi/dev.$code" > /dev/null
  train "$data/en-$code" "$out/en-$code" "${BT_TIME:-$max_time}" "$config"
  score "$out/en-$code/model.pt" "$bi/test.en" "$bi/test.$code" "$code" "$out/en-$code/test"
  if [ ! "$data/bt.$code" -nt "$out/en-$code/model.pt" ]; then
    # shellcheck disable=SC2086  # BT_ARGS are words
    nmtkit translate -m "$out/en-$code/model.pt" "${decode_args[@]}" --threads "$threads" ${BT_ARGS:-} \
      --input "$data/mono/mono.en" > "$data/bt.$code.partial"
    mv "$data/bt.$code.partial" "$data/bt.$code"
  fi

  # one data directory, one vocabulary: bilingual, bt and bt_tagged (the same pairs, each source with <bt>)
  if [ ! -f "$data/mixed/manifest.json" ]; then
    python "$here/systems.py" corpora --train "$train_src" "$train_tgt" --dev "$bi/dev.$code" "$bi/dev.en" \
      --test "$bi/test.$code" "$bi/test.en" --back-translated "$data/bt.$code" "$data/mono/mono.en" \
      --out "$data/corpora.yaml"
    nmtkit prepare --corpora "$data/corpora.yaml" --src-lang "$code" --tgt-lang en --vocab-size "$vocab" \
      --out "$data/mixed" > /dev/null
  fi

  # three X -> en systems, the same budget each; the mixes leave bilingual data alone for the last FINETUNE
  # of the updates the bilingual-only system made
  python "$here/systems.py" config --base "$config" --out "$out/bilingual.yaml"
  train "$data/mixed" "$out/bilingual" "$max_time" "$out/bilingual.yaml"
  updates=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["steps"])' \
    "$out/bilingual/train.summary.json")
  for system in bt-untagged:bt bt-tagged:bt_tagged; do
    name=${system%:*} corpus=${system#*:}
    python "$here/systems.py" config --base "$config" --bt "$corpus" --bt-share "${BT_SHARE:-0.5}" \
      --finetune "${FINETUNE:-0.2}" --updates "$updates" --out "$out/$name.yaml"
    train "$data/mixed" "$out/$name" "$max_time" "$out/$name.yaml"
  done
  for name in bilingual bt-untagged bt-tagged; do
    score "$out/$name/model.pt" "$bi/test.$code" "$bi/test.en" en "$out/$name/test"
  done
  python "$here/report.py" --runs "$out" --data "$data" --lang "$code" --decode "$bt_decode" | tee "$out/results.md"
done
