#!/usr/bin/env bash
# The model zoo on the Bible data: every model trains for the same wall-clock budget on the same data, then
# translates Acts with the same beam; one table of all runs goes to $ROOT/results.md.
# Env: MODELS (all six), ZOO_TIME (30m per model), ROOT (runs/bible-zoo), JOBS (1: models trained at once; with
# JOBS=2 on two cores set THREADS=1 so that each run has a core), THREADS, BEAM, VOCAB as in run.sh.
# A model's log is $ROOT/$MODEL.log; rerunning resumes every unfinished run (see run.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${ROOT:-runs/bible-zoo}
models=${MODELS:-"transformer convs2s gnmt luong bahdanau seq2seq"}
jobs=${JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "error: JOBS must be a positive integer, got '$jobs'" >&2; exit 1; }
mkdir -p "$root"
bash "$here/run.sh" data  # once, before runs that would otherwise prepare it side by side

train() {  # a failed run leaves $root/$MODEL.failed (background jobs' exit codes are easy to lose)
  echo "== $1 (${ZOO_TIME:-30m}, log: $root/$1.log)" >&2
  rm -f "$root/$1.failed"
  MODEL=$1 MAX_TIME=${ZOO_TIME:-30m} OUT=$root/$1 bash "$here/run.sh" > /dev/null 2> "$root/$1.log" \
    || { echo "error: $1 failed, see $root/$1.log" >&2; touch "$root/$1.failed"; }
}

runs=()
for model in $models; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  train "$model" &
  runs+=("$root/$model")
done
wait
python "$here/report.py" --combine "${runs[@]}" | tee "$root/results.md"
status=0
for model in $models; do [ ! -e "$root/$model.failed" ] || status=1; done
exit $status
