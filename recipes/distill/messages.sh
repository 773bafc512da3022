#!/usr/bin/env bash
# Distillation on software messages (English -> one language from this machine's gettext catalogs), so that the
# distillation figures are not about the Bible alone: the messages recipe trains the teacher for TEACHER_TIME into
# $OUT/teacher, then run.sh distils the training source with it, trains the students on the distilled plus original
# pairs for TIME each (and the first student on the original pairs alone) and times and scores every model in one run.
#   bash recipes/distill/messages.sh             (make recipe-distill-messages; LANG_DIR=ja for Japanese)
# Env: LANG_DIR (de: a directory of /usr/share/locale), CODE (LANG_DIR before _ or @), TEACHER_TIME (30m), TIME (10m
#      per student), THREADS (0 = all cores), RAW (data/messages/en-CODE), DATA (data/distill-en-CODE), OUT
#      (runs/distill-en-CODE), SHORTLIST ("50 500": messages hold rare identifiers, which the Bible's tighter
#      "10 100" cost up to 1.3 BLEU here), and run.sh's STUDENTS, DISTILL_ENGINE, FILTER_ARGS, SHARED_VOCAB. Every
#      step is skipped when its output exists, so an interrupted run continues where it stopped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lang_dir=${LANG_DIR:-de}
code=${CODE:-${lang_dir%%[_@]*}}
raw=${RAW:-data/messages/en-$code}
out=${OUT:-runs/distill-en-$code}
# the teacher: the messages recipe's run (extract, prepare, train, score the test set), skipped once it is scored
[ -f "$out/teacher/test.json" ] || LANG_DIR="$lang_dir" CODE="$code" DATA="$raw" OUT="$out/teacher" \
  MAX_TIME="${TEACHER_TIME:-30m}" bash "$here/../messages/run.sh" > /dev/null
RAW="$raw" SRC_LANG=en TGT_LANG="$code" TEACHER="$out/teacher/model.pt" DATA="${DATA:-data/distill-en-$code}" \
  OUT="$out" TIME="${TIME:-10m}" SHORTLIST="${SHORTLIST:-50 500}" \
  TEST_NAME="software messages en-$code, human references" bash "$here/run.sh"
