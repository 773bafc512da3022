#!/usr/bin/env bash
# WMT14 English->German as in Vaswani et al. (2017): Europarl v7 + Common Crawl + News Commentary v9 for training,
# newstest2013 for dev, newstest2014 for test, joint BPE 32k, Transformer base or big.
#   bash recipes/wmt/run.sh        data, training, translation of newstest2014 (full and filtered), BLEU and chrF
#                                  with sacrebleu's signatures (stdout and $OUT/scores.txt)
#   bash recipes/wmt/run.sh data   only the data (downloads, checks, extracts; see recipes/wmt/data.py) and its
#                                  preparation: the three corpora by name (europarl, commoncrawl, news-commentary)
# Env: CONFIG (base, big or a YAML file; default base), MAX_TIME (default: none, the config's max_steps decide),
#      FINETUNE (a share F in (0, 1): the last F of the budget on News Commentary alone, see recipes/wmt/stages.py;
#      default none: every pair of the three corpora once an epoch, as Vaswani et al.),
#      THREADS (0 = all cores), VOCAB (32000), DATA (data/wmt14), OUT (runs/wmt14-en-de/<config name>),
#      AVERAGE (checkpoints averaged for the test translation: 5 for base, 20 for big, 0 = model.pt),
#      TRAIN_ARGS (extra `nmtkit train` arguments, e.g. "--set train.update_freq=1"),
#      NMTKIT_MIRROR (a directory or URL replacing the official download hosts).
# Several visible GPUs train with `nmtkit train --gpus N` (torchrun); one GPU or none, in one process.
# Every step is skipped when its output exists, and training resumes from last.pt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
config=${CONFIG:-base}
case "$config" in
  base|big) name=transformer-$config; config=$here/$name.yaml ;;
  *) name=$(basename "$config" .yaml) ;;
esac
[ -f "$config" ] || { echo "error: config $config not found (CONFIG is base, big or a YAML file)" >&2; exit 1; }
data=${DATA:-data/wmt14}
vocab=${VOCAB:-32000}
[ -n "${FINETUNE:-}" ] && name=$name-finetune$FINETUNE
out=${OUT:-runs/wmt14-en-de/$name}
case "$name" in *big*) average=${AVERAGE:-20} ;; *) average=${AVERAGE:-5} ;; esac
prepared=$data/bpe$vocab

python "$here/data.py" --out "$data"
# The three corpora by name, each filtered on its own (manifest.json counts each one's pairs and what each filter
# removed); character_coverage below 1: Common Crawl holds stray characters of many scripts that would each take a
# piece
[ -f "$prepared/manifest.json" ] || nmtkit prepare --subword bpe --vocab-size "$vocab" --joint \
  --set character_coverage=0.9999 --src-lang en --tgt-lang de --corpora "$data/corpora.yaml" \
  --out "$prepared" > /dev/null
[ "${1:-}" = data ] && exit 0

# FINETUNE: the config with its two stages, written before each run or resume (the same file for the same data)
if [ -n "${FINETUNE:-}" ]; then
  python "$here/stages.py" --base "$config" --data "$prepared" --finetune "$FINETUNE" --max-time "${MAX_TIME:-}" \
    --out "$out/stages.yaml"
  config=$out/stages.yaml
fi

gpus=$(python -c 'import torch; print(torch.cuda.device_count())')
gpu_args=()
[ "$gpus" -gt 1 ] && gpu_args=(--gpus "$gpus")
time_args=()
[ -n "${MAX_TIME:-}" ] && time_args=(--max-time "$MAX_TIME")
resume=()
[ -f "$out/last.pt" ] && resume=(--resume)
mkdir -p "$out"
# shellcheck disable=SC2086  # TRAIN_ARGS is a list of arguments
nmtkit train --data "$prepared" --config "$config" "${resume[@]}" "${gpu_args[@]}" "${time_args[@]}" \
  --threads "${THREADS:-0}" --out "$out" ${TRAIN_ARGS:-} > "$out/train.summary.json"

model_args=(-m "$out/model.pt")
if [ "$average" -gt 0 ] && compgen -G "$out/checkpoint_*.pt" > /dev/null; then model_args+=(--average "$average"); fi
# $1: split in $data/raw, $2: output name, $3: what it is
translate_and_score() {
  nmtkit translate "${model_args[@]}" --threads "${THREADS:-0}" --input "$data/raw/$1.en" > "$out/$2.hyp"
  echo "$2: $(wc -l < "$data/raw/$1.en") sentences, $3"
  nmtkit evaluate --hyp "$out/$2.hyp" --ref "$data/raw/$1.de"
}
{
  translate_and_score test newstest2014 "sacrebleu -t wmt14/full -l en-de (as Vaswani et al. 2017)"
  translate_and_score test-filtered newstest2014-filtered "sacrebleu -t wmt14 -l en-de (the official WMT14 evaluation)"
} | tee "$out/scores.txt"
