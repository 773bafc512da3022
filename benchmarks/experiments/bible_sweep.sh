#!/usr/bin/env bash
# Try recipe settings on the Bible data under one wall-clock budget each and print a table of dev BLEU.
# Usage: benchmarks/experiments/bible_sweep.sh [MINUTES] [DATA_ROOT]   (needs data/bible/raw from `make bible-data`)
#        ONLY="name1 name2" benchmarks/experiments/bible_sweep.sh ...    runs only the named settings
set -euo pipefail
minutes=${1:-10}
root=${2:-data/bible}
nmtkit=${NMTKIT:-.venv/bin/nmtkit}
out=runs/sweep
mkdir -p "$out"
prepare() {  # prepare VOCAB
  [ -f "$root/bpe$1/manifest.json" ] || "$nmtkit" -q prepare --vocab-size "$1" --out "$root/bpe$1" \
    --train-src "$root/raw/train.es" --train-tgt "$root/raw/train.en" \
    --dev-src "$root/raw/dev.es" --dev-tgt "$root/raw/dev.en" --test-src "$root/raw/test.es" --test-tgt "$root/raw/test.en" >/dev/null
}
run() {  # run NAME VOCAB --set ... : one budgeted training run, validated once at the end
  local name=$1 vocab=$2; shift 2
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  prepare "$vocab"
  rm -rf "${out:?}/$name"
  "$nmtkit" -q train --data "$root/bpe$vocab" --out "$out/$name" --max-time "${minutes}m" --threads 2 \
    --set train.valid_every=1000000 --set train.log_every=50 "$@" > "$out/$name.summary.json"
  python3 - "$name" "$vocab" "$out/$name.summary.json" "$out/$name/metrics.jsonl" "$*" <<'PY'
import json, sys
name, vocab, summary, metrics, settings = sys.argv[1:]
s = json.load(open(summary))
v = [json.loads(l) for l in open(metrics) if "valid_bleu" in l][-1]
print(f"| {name} | bpe {vocab} | {settings} | {s['parameters']/1e6:.1f}M | {s['steps']} | "
      f"{s['tgt_tokens_per_s']:.0f} | {v['valid_nll']:.3f} | {v['valid_bleu']:.2f} |", flush=True)
PY
}
echo "| run | vocab | settings | params | steps | tgt tok/s | dev nll | dev BLEU (greedy) |"
echo "|---|---|---|---|---|---|---|---|"
run fp32-default 8000
run bf16-lr1e-3-w500 8000 --set train.amp=bf16 --set train.lr=1e-3 --set train.warmup=500
run bf16-lr2e-3-w500 8000 --set train.amp=bf16 --set train.lr=2e-3 --set train.warmup=500
run bf16-lr1e-3-w500-b2k 8000 --set train.amp=bf16 --set train.lr=1e-3 --set train.warmup=500 --set train.batch_tokens=2048
run bf16-lr2e-3-w500-b2k 8000 --set train.amp=bf16 --set train.lr=2e-3 --set train.warmup=500 --set train.batch_tokens=2048
run bf16-lr1e-3-w500-b1k 8000 --set train.amp=bf16 --set train.lr=1e-3 --set train.warmup=500 --set train.batch_tokens=1024
