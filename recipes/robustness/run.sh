#!/usr/bin/env bash
# Robustness of a model to messy input: nmtkit robustness writes messy versions of a test set (title, upper, punct,
# typos, merge, inline-noise) beside the clean one; each is translated, and all are scored side by side.
#   bash recipes/robustness/run.sh MODEL SRC REF [OUT]
#     MODEL  a checkpoint (model.pt) or a directory written by nmtkit export
#     SRC    the test set's source file; REF its reference translations
#     OUT    where the sets, translations and scores go (default: MODEL's directory/robustness)
# Env: BEAM (5), THREADS (0 = all cores), SEED (1), SETS (all: title,upper,punct,typos,merge,inline-noise).
# Each translation continues where an interrupted run stopped (translate --resume); the table is OUT/scores.txt and
# OUT/scores.json.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
model=$1 src=$2 ref=$3
out=${4:-$(dirname "$model")/robustness}
sets_option=()
[ -n "${SETS+x}" ] && sets_option=(--sets "$SETS")
mkdir -p "$out/hyp"
nmtkit robustness --src "$src" --ref "$ref" --out "$out/sets" --seed "${SEED:-1}" "${sets_option[@]}" > /dev/null
for set_src in "$out"/sets/*.src; do
  name=$(basename "$set_src" .src)
  nmtkit translate -m "$model" --beam "${BEAM:-5}" --threads "${THREADS:-0}" --input "$set_src" \
    --output "$out/hyp/$name.hyp" --resume > /dev/null
done
nmtkit evaluate --sets "$out/sets" --hyp "$out/hyp" --json > "$out/scores.json"
nmtkit evaluate --sets "$out/sets" --hyp "$out/hyp" | tee "$out/scores.txt"
