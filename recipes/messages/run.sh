#!/usr/bin/env bash
# Software messages: English -> one language, from the gettext catalogs of this machine (see README.md).
#   LANG_DIR=ja bash recipes/messages/run.sh    extract, prepare, train, translate the test set, score, roundtrip
# Env: LANG_DIR (zh_CN: a directory of LOCALE_DIR, default /usr/share/locale), CODE (LANG_DIR before _ or @),
#      MAX_TIME (10m), THREADS (0 = all cores), DATA (data/messages/en-$CODE), OUT (runs/messages/en-$CODE),
#      TOKENIZE (BLEU tokenizer; default: nmtkit evaluate's for the language, e.g. zh, ja-mecab, char for Thai),
#      CONFIG (training config; default recipes/bible/transformer.yaml; CONFIG=none trains with nmtkit's bare
#      defaults).
#      Every step is skipped when its output exists, and training resumes from last.pt, so
#      running it twice is safe.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lang_dir=${LANG_DIR:-zh_CN}
code=${CODE:-${lang_dir%%[_@]*}}
data=${DATA:-data/messages/en-$code}
out=${OUT:-runs/messages/en-$code}
threads=${THREADS:-0}
prepared=$data/prepared
tokenize=()
[ -n "${TOKENIZE:-}" ] && tokenize=(--tokenize "$TOKENIZE")

# stats.json is written last: without it the extraction did not finish
[ -f "$data/stats.json" ] || python "$here/extract.py" --lang "$lang_dir" --code "$code" --out "$data" \
  --locale-dir "${LOCALE_DIR:-/usr/share/locale}"
[ -f "$prepared/manifest.json" ] || nmtkit prepare --src-lang en --tgt-lang "$code" --out "$prepared" \
  --train-src "$data/train.en" --train-tgt "$data/train.$code" \
  --dev-src "$data/dev.en" --dev-tgt "$data/dev.$code" \
  --test-src "$data/test.en" --test-tgt "$data/test.$code" > /dev/null

config=${CONFIG:-$here/../bible/transformer.yaml}
config_args=()
[ "$config" != none ] && config_args=(--config "$config")
resume=()
[ -f "$out/last.pt" ] && resume=(--resume)
mkdir -p "$out"
nmtkit train --data "$prepared" "${config_args[@]}" "${resume[@]}" --out "$out" \
  --max-time "${MAX_TIME:-10m}" --threads "$threads" > "$out/train.summary.json"

# a model that training improved since the last translation is translated again
if [ ! "$out/test.hyp" -nt "$out/model.pt" ]; then
  nmtkit translate -m "$out/model.pt" --threads "$threads" --input "$data/test.en" > "$out/test.hyp.partial"
  mv "$out/test.hyp.partial" "$out/test.hyp"
fi
nmtkit evaluate --hyp "$out/test.hyp" --ref "$data/test.$code" --lang "$code" "${tokenize[@]}" --json | tee "$out/test.json"
# does the subword model give the raw references back byte for byte? (and their BLEU as a "translation": 100)
python "$here/roundtrip.py" --data "$prepared" --ref "$data/test.$code" --side tgt --output "$out/roundtrip.txt" \
  | tee "$out/roundtrip.json"
nmtkit evaluate --hyp "$out/roundtrip.txt" --ref "$data/test.$code" --lang "$code" "${tokenize[@]}" --json \
  > "$out/roundtrip.scores.json"
