#!/usr/bin/env bash
# Sequence-level knowledge distillation (Kim & Rush 2016): the Bible recipe's Spanish -> English Transformer (the
# teacher) translates its own training source; students with a deep encoder and a shallow decoder learn from those
# translations plus the original pairs, for a fixed time each, and are exported to int8 with a vocabulary shortlist.
# The same first student trained on the original pairs alone, for the same time, shows what distillation adds.
# recipes/distill/report.py then times and scores every model in one run: recipes/distill/README.md.
#   bash recipes/distill/run.sh              (trains the Bible teacher first if it is missing: make recipe-bible)
#   SMOKE=1 bash recipes/distill/run.sh      minutes end to end: a 2-minute teacher, a few hundred lines
# Env: TEACHER (runs/bible-es-en/transformer/model.pt; several paths: an ensemble, translated with PyTorch), STUDENTS
#      (student-6-1 student-tiny: recipes/distill/NAME.yaml; one that sets train.init_layers or init_width, e.g.
#      student-3-1, starts from the teacher's weights, and one with a "# init-from: NAME" line from that student's,
#      trained before it, e.g. student-3-1-d128; both need SHARED_VOCAB=1), TIME (15m per student), THREADS (0 = all
#      cores; the speed table always uses 2), DISTILL_ENGINE (int8: the teacher's int8 export translates, the fastest;
#      pytorch: the checkpoint itself), FILTER_ARGS (e.g. "--drop-worst 0.05"), BIBLE (data/bible), DATA
#      (data/distill-SRC-TGT), OUT (runs/distill-SRC-TGT), SHARED_VOCAB (0: the students' data trains its own
#      vocabulary; 1: it is encoded with the teacher's, prepare --subword-model, into $DATA/prepared-teacher-vocab, the
#      students train into $OUT/NAME-teacher-vocab and the table goes to $OUT/teacher-vocab). Every step is skipped when
#      its output exists, and the distillation and training resume, so an interrupted recipe continues where it stopped.
#      Another corpus (recipes/distill/messages.sh does this for software messages): RAW (a directory with
#      train/dev/test.SRC and .TGT; default $BIBLE/raw), SRC_LANG (es), TGT_LANG (en), TEACHER (required then),
#      TEST_NAME (what the test set is, under the table). SHORTLIST ("10 100": the students' export shortlist,
#      candidate target pieces per source piece and most frequent pieces; with SHARED_VOCAB=1 the teacher is timed
#      with it too, as "teacher int8 + shortlist"). BEST_OF (0; N > 1: the teacher writes its N best translations
#      of each training line and the one closest to the reference by chrF is kept, nmtkit best-of; DATA and OUT
#      default to directories of their own, suffix -bestN, so the table compares with the run without). MONO (a
#      file of extra source-language text, one sentence a line: the teacher translates it too, and the students
#      learn from it as a third corpus, "monolingual"). ORIGINAL (1; 0 skips the first student's second training on
#      the original pairs alone, e.g. when another run of the recipe has measured it already).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
smoke=${SMOKE:-0}
bible=${BIBLE:-data/bible}
raw=${RAW:-$bible/raw}
src=${SRC_LANG:-es} tgt=${TGT_LANG:-en}
best_of=${BEST_OF:-0}
original=${ORIGINAL:-1}
[[ "$original" =~ ^[01]$ ]] || { echo "error: ORIGINAL is 0 or 1 (got '$original')" >&2; exit 1; }
suffix=""
[ "$best_of" -gt 1 ] && suffix=-best$best_of
data=${DATA:-data/distill-$src-$tgt$suffix}
out=${OUT:-runs/distill-$src-$tgt$suffix}
mono=${MONO:-}
[ -z "$mono" ] || [ -f "$mono" ] || { echo "error: MONO file $mono not found" >&2; exit 1; }
threads=${THREADS:-0}
students=${STUDENTS:-student-6-1 student-tiny}
engine=${DISTILL_ENGINE:-int8}
read -r -a shortlist_size <<< "${SHORTLIST:-10 100}"  # candidates a source piece, most frequent pieces always in
if [ ${#shortlist_size[@]} -ne 2 ]; then
  echo "error: SHORTLIST takes two numbers, candidates a source piece and most frequent pieces (got '${SHORTLIST:-}')" >&2
  exit 1
fi
shortlist=(--shortlist-size "${shortlist_size[0]}" --shortlist-frequent "${shortlist_size[1]}")
variant="" tables=$out  # SHARED_VOCAB=1: its own data directory, students and table, beside the others
if [ "${SHARED_VOCAB:-0}" = 1 ]; then variant=-teacher-vocab tables=$out/teacher-vocab; fi
prepared=$data/prepared$variant
# smoke: no dev BLEU (an untrained model's dev translations run to the length limit), no amp trial (seconds each)
quick=()
if [ "$smoke" = 1 ]; then
  time=${TIME:-30s} lines=${LINES:-400} vocab=${VOCAB:-1000} test_lines=100
  quick=(--set train.valid_bleu=false --set train.amp=none)
else
  time=${TIME:-15m} lines=0 vocab=${VOCAB:-8000} test_lines=0
fi
mkdir -p "$data" "$out" "$tables"

if [ -n "${RAW:-}" ]; then
  [ -f "$raw/train.$src" ] || { echo "error: $raw/train.$src not found (RAW)" >&2; exit 1; }
  [ -n "${TEACHER:-}" ] || { echo "error: RAW needs TEACHER (the Bible teacher is for the Bible data)" >&2; exit 1; }
else
  [ -f "$raw/train.es" ] || DATA="$bible" bash "$here/../bible/run.sh" data
fi

# the teacher: given, the Bible recipe's model, or (smoke) a narrow Transformer trained for two minutes: enough
# updates to write words (a few dozen updates of the recipe's model write nothing but the end of the sentence)
teacher=${TEACHER:-}
if [ -z "$teacher" ] && [ "$smoke" = 1 ]; then
  teacher=$out/teacher/model.pt resume=()
  [ -f "$out/teacher/last.pt" ] && resume=(--resume)
  [ -f "$teacher" ] || nmtkit train --data "$bible/bpe8000" --config "$here/../bible/transformer.yaml" \
    --out "$out/teacher" "${resume[@]}" --max-time 2m --threads "$threads" "${quick[@]}" \
    --set model.d_model=128 --set model.ffn=512 --set train.warmup=20 > /dev/null
elif [ -z "$teacher" ]; then
  teacher=runs/bible-es-en/transformer/model.pt
  [ -f "$teacher" ] || DATA="$bible" bash "$here/../bible/run.sh"
fi
read -r -a teachers <<< "$teacher"
for path in "${teachers[@]}"; do [ -f "$path" ] || { echo "error: teacher $path not found" >&2; exit 1; }; done
if [ ${#teachers[@]} -eq 1 ]; then
  [ -f "$out/teacher-int8/nmtkit.json" ] || nmtkit export -m "$teacher" --out "$out/teacher-int8" \
    --quantization int8 > /dev/null
fi

parent_student() {  # the student a config names on its "# init-from: NAME" line (it starts from that one's weights)
  sed -n 's/^# init-from: *\([A-Za-z0-9_.-]*\).*/\1/p' "$1"
}
starts_from() {  # the checkpoint a student config starts from: its parent student's (trained before it), the
  # teacher's when it sets train.init_layers or train.init_width, none otherwise
  local parent
  parent=$(parent_student "$1")
  if [ -n "$parent" ]; then echo "$out/$parent$variant/model.pt"
  elif grep -Eq '^ *init_(layers|width): *[a-z]' "$1"; then echo "${teachers[0]}"; fi
}
before=" "
for student in $students; do  # checked before the long steps
  config=$here/$student.yaml
  [ -f "$config" ] || { echo "error: no student config $config (STUDENTS)" >&2; exit 1; }
  if [ -n "$(starts_from "$config")" ] && [ -z "$variant" ]; then
    echo "error: $student starts from the teacher's weights (train.init_layers/init_width): it needs the" \
      "teacher's vocabulary, SHARED_VOCAB=1" >&2
    exit 1
  fi
  parent=$(parent_student "$config")
  if [ -n "$parent" ] && [ ! -f "$(starts_from "$config")" ] && [[ "$before" != *" $parent "* ]]; then
    echo "error: $student starts from $parent (its '# init-from' line): put $parent before it in STUDENTS" >&2
    exit 1
  fi
  before="$before$student "
done

# the source side to distil (smoke: its first lines), the teacher's scored translations, the outliers filtered out
for side in "$src" "$tgt"; do
  [ -f "$data/train.$side" ] && continue
  if [ "$lines" -gt 0 ]; then head -n "$lines" "$raw/train.$side" > "$data/train.$side"
  else cp "$raw/train.$side" "$data/train.$side"; fi
done
models=()
for path in "${teachers[@]}"; do models+=(-m "$path"); done
[ "$engine" = int8 ] && [ ${#teachers[@]} -eq 1 ] && models=(-m "$out/teacher-int8")
if [ ! -f "$data/distill.summary.json" ] && [ "$best_of" -gt 1 ]; then
  # the teacher's N best (an n-best output cannot resume: the step runs whole), the one closest to the reference
  nmtkit translate "${models[@]}" --beam "$best_of" --nbest "$best_of" --threads "$threads" \
    --input "$data/train.$src" --output "$data/distilled.nbest.$tgt" > "$data/distill.summary.part"
  nmtkit best-of --nbest "$data/distilled.nbest.$tgt" --ref "$data/train.$tgt" --scores \
    --output "$data/distilled.scored.$tgt" > "$data/best-of.json"
  mv "$data/distill.summary.part" "$data/distill.summary.json"
elif [ ! -f "$data/distill.summary.json" ]; then
  nmtkit translate "${models[@]}" --beam 5 --scores --threads "$threads" --input "$data/train.$src" \
    --output "$data/distilled.scored.$tgt" --resume > "$data/distill.summary.part"
  mv "$data/distill.summary.part" "$data/distill.summary.json"
fi
# shellcheck disable=SC2086  # FILTER_ARGS are words
nmtkit filter-distilled --src "$data/train.$src" --hyp "$data/distilled.scored.$tgt" \
  --out-src "$data/distilled.$src" --out-tgt "$data/distilled.$tgt" --report "$data/filter.json" \
  ${FILTER_ARGS:-} > /dev/null
mix="{distilled: 1, original: 1}"
if [ -n "$mono" ]; then  # extra source text: the teacher's translations of it, filtered as the others
  [ -f "$data/mono.$src" ] || cp "$mono" "$data/mono.$src"
  if [ ! -f "$data/mono.summary.json" ]; then
    nmtkit translate "${models[@]}" --beam 5 --scores --threads "$threads" --input "$data/mono.$src" \
      --output "$data/mono.scored.$tgt" --resume > "$data/mono.summary.part"
    mv "$data/mono.summary.part" "$data/mono.summary.json"
  fi
  # shellcheck disable=SC2086  # FILTER_ARGS are words
  nmtkit filter-distilled --src "$data/mono.$src" --hyp "$data/mono.scored.$tgt" --out-src "$data/mono-kept.$src" \
    --out-tgt "$data/mono-kept.$tgt" --report "$data/mono-filter.json" ${FILTER_ARGS:-} > /dev/null
  mix="{distilled: 1, original: 1, monolingual: 1}"
fi

# one data directory, one vocabulary (its own, or the teacher's with SHARED_VOCAB=1): the distilled pairs and the
# original pairs as two named corpora
cat > "$data/corpora.yaml" <<EOF
- {name: original, src: train.$src, tgt: train.$tgt, dev: [$(realpath "$raw/dev.$src"), $(realpath "$raw/dev.$tgt")]}
- {name: distilled, src: distilled.$src, tgt: distilled.$tgt}
EOF
[ -z "$mono" ] || echo "- {name: monolingual, src: mono-kept.$src, tgt: mono-kept.$tgt}" >> "$data/corpora.yaml"
vocabulary=(--vocab-size "$vocab")
[ -n "$variant" ] && vocabulary=(--subword-model "${teachers[0]}")  # an ensemble's members share theirs
[ -f "$prepared/manifest.json" ] || nmtkit prepare --corpora "$data/corpora.yaml" --src-lang "$src" \
  --tgt-lang "$tgt" "${vocabulary[@]}" --out "$prepared" > /dev/null

train() {  # train NAME CONFIG MIX: a student for $time on the corpora of MIX, exported to int8 with a shortlist
  local name=$1 config=$2 mix=$3 resume=() init=() parent
  [ -f "$out/$name/last.pt" ] && resume=(--resume)
  parent=$(starts_from "$config")
  [ -n "$parent" ] && init=(--init-from "$parent")
  if [ ! -f "$out/$name/train.summary.json" ]; then
    nmtkit train --data "$prepared" --config "$config" --out "$out/$name" "${resume[@]}" --max-time "$time" \
      "${init[@]}" --threads "$threads" --set "train.stages=[{mix: $mix}]" "${quick[@]}" \
      > "$out/$name/train.summary.part"
    mv "$out/$name/train.summary.part" "$out/$name/train.summary.json"
  fi
  [ -f "$out/$name-int8/nmtkit.json" ] || nmtkit export -m "$out/$name/model.pt" --out "$out/$name-int8" \
    --quantization int8 --shortlist "$prepared" "${shortlist[@]}" > /dev/null
}
# with the teacher's vocabulary, the teacher is also timed with the students' shortlist: what the shortlist alone buys
if [ -n "$variant" ] && [ ${#teachers[@]} -eq 1 ] && [ ! -f "$out/teacher-int8-shortlist/nmtkit.json" ]; then
  nmtkit export -m "$teacher" --out "$out/teacher-int8-shortlist" --quantization int8 --shortlist "$prepared" \
    "${shortlist[@]}" > /dev/null
fi
first=""
for student in $students; do
  mkdir -p "$out/$student$variant"
  train "$student$variant" "$here/$student.yaml" "$mix"
  first=${first:-$student}
done
if [ "$original" = 1 ]; then
  mkdir -p "$out/$first$variant-original"
  train "$first$variant-original" "$here/$first.yaml" "{original: 1}"
fi

rows=(--row "teacher (PyTorch)=$teacher")
[ ${#teachers[@]} -eq 1 ] && rows+=(--row "teacher int8=$out/teacher-int8")
[ -n "$variant" ] && [ ${#teachers[@]} -eq 1 ] && rows+=(--row "teacher int8 + shortlist=$out/teacher-int8-shortlist")
for student in $students; do rows+=(--row "$student$variant int8 + shortlist=$out/$student$variant-int8"); done
[ "$original" = 1 ] && rows+=(--row "$first$variant int8 + shortlist, original data only=$out/$first$variant-original-int8")
python "$here/report.py" --src "$raw/test.$src" --ref "$raw/test.$tgt" --lines "$test_lines" --lang "$tgt" \
  --test-name "${TEST_NAME:-Acts, KJV reference}" --filter "$data/filter.json" --out "$tables" "${rows[@]}" \
  | tee "$tables/results.md"
