#!/usr/bin/env bash
# The model zoo on the Bible data: every model trains for the same wall-clock budget on the same data, then
# translates Acts with the same beam; one table of all runs goes to $ROOT/results.md.
# Env: MODELS (all six), ZOO_TIME (15m per model), ROOT (runs/bible-zoo), THREADS, BEAM, VOCAB as in run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${ROOT:-runs/bible-zoo}
models=${MODELS:-"transformer convs2s gnmt luong bahdanau seq2seq"}
runs=()
for model in $models; do
  echo "== $model (${ZOO_TIME:-15m})" >&2
  MODEL=$model MAX_TIME=${ZOO_TIME:-15m} OUT=$root/$model bash "$here/run.sh" > /dev/null
  runs+=("$root/$model")
done
python "$here/report.py" --combine "${runs[@]}" | tee "$root/results.md"
