#!/usr/bin/env bash
# Beam 5 against MBR (chrF utility) with beam and sampled (epsilon 0.02) candidates, N = 8/16/32, on one model and
# test set: each system's hypotheses and wall time (whole command, one CPU thread), then BLEU, chrF, TER and a paired
# bootstrap against beam 5 (nmtkit evaluate --compare). Results go to docs/benchmarks.md (MBR).
# usage: mbr_sweep.sh MODEL SRC REF OUTDIR
set -euo pipefail
model=$1 src=$2 ref=$3 out=$4
nmtkit=${NMTKIT:-python -m nmtkit}
mkdir -p "$out"
run() {  # name, options...
  local name=$1; shift
  [ -s "$out/$name.hyp" ] && return 0
  local start end
  start=$(date +%s.%N)
  $nmtkit --quiet translate -m "$model" -i "$src" --threads 1 --device cpu "$@" > "$out/$name.tmp"
  end=$(date +%s.%N)
  mv "$out/$name.tmp" "$out/$name.hyp"
  echo "$name $(echo "$end - $start" | bc)" >> "$out/times.txt"
}
run beam5 --beam 5
for n in 8 16 32; do
  run "mbr-beam$n" --mbr "$n" --mbr-candidates beam
  run "mbr-eps$n" --mbr "$n" --mbr-candidates sample --epsilon 0.02
done
for name in beam5 mbr-beam8 mbr-beam16 mbr-beam32 mbr-eps8 mbr-eps16 mbr-eps32; do
  $nmtkit --quiet evaluate --hyp "$out/$name.hyp" --ref "$ref" --metrics bleu,chrf,ter --json --device cpu \
    > "$out/$name.json"
  [ "$name" = beam5 ] || $nmtkit --quiet evaluate --hyp "$out/$name.hyp" --ref "$ref" --metrics bleu,chrf,ter \
    --compare "$out/beam5.hyp" --device cpu > "$out/$name.compare.txt"
done
