#!/usr/bin/env bash
# One GPU lease's checks in one command (docs/gpu.md): the test suite with CUDA, Transformer base's training speed
# against OpenNMT-py 3.5.1 (benchmarks/train_speed.py), new batch shapes' cost (benchmarks/new_shapes.py), a Bible
# training on the GPU, translation of the test set with PyTorch and with CTranslate2 exports (beam 5, wall time and
# BLEU), MBR's utilities on the GPU (benchmarks/mbr_utilities.py; MBR=0: not).
#   bash benchmarks/gpu_check.sh
#   Env: OUT (results folder), TRAIN_TIME (3m; 0: no training, translation or export), AMP (bf16), TEST_TIME (s, 240;
#        0: no tests), DEVICE (cuda), QUICK (1: PyTorch float32 only), SHAPES (0: no new_shapes.py), CT2_TYPES
#        (exports), TESTS (pytest paths), DATA (a prepared Bible folder: bpe8000/ and, for the training stage,
#        raw/test.{es,en,web}), ONMT_BASE (1: the Transformer-base stage), BASE_BATCHES (tokens an update:batches it
#        is made of, "4096:1 25000:4"), BASE_STEPS (100), BASE_LOG_EVERY (20: the first interval is warm-up),
#        BASE_TIME (s a batch size, 240), WHEELS (.whl: wheels installed first into /tmp/site, see below)
# On a machine without nmtkit installed, run it from the repository root (it puts the checkout on PYTHONPATH).
# Wheels of what the lent machine lacks (`bash benchmarks/setup_onmt.sh --gpu-wheels .whl`: OpenNMT-py 3.5.1 and what
# its training imports, ctranslate2, jiwer, rapidfuzz) are installed into /tmp/site, which goes on PYTHONPATH.
# CTranslate2 4.8.5 loads libcublas.so.12 by that name at run time; on a machine with CUDA 13 only, the script
# points that name at the installed libcublas.so.13 (the functions CTranslate2 calls kept their signatures).
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
data=${DATA:-data/bible}
mkdir -p "$out"
py=${PYTHON:-python3}
wheels=${WHEELS:-.whl}
if compgen -G "$wheels/*.whl" > /dev/null; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
run=/tmp/gpu-check-run
rm -rf "$run"

timed() {  # timed NAME COMMAND...: the command's wall time in seconds, in $out/times.tsv and on stderr
  local name=$1 start end
  shift
  start=$(date +%s.%N)
  "$@"
  local rc=$?
  end=$(date +%s.%N)
  printf '%s\t%s\trc=%d\n' "$name" "$(awk "BEGIN {printf \"%.2f\", $end - $start}")" "$rc" | tee -a "$out/times.tsv" >&2
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
$py -c 'import sys, torch; from importlib.metadata import version; print("python", sys.version.split()[0], "torch", torch.__version__, "aiohttp", version("aiohttp"))' | tee -a "$out/gpu.txt"
echo "nmtkit ${NMTKIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}" | tee -a "$out/gpu.txt"

if ! $py -c 'import ctypes; ctypes.CDLL("libcublas.so.12")' 2>/dev/null; then
  cublas=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1)
  if [ -n "$cublas" ]; then
    mkdir -p /tmp/cublas12
    ln -sf "$cublas" /tmp/cublas12/libcublas.so.12
    export LD_LIBRARY_PATH=/tmp/cublas12:$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "libcublas.so.12 -> $cublas" | tee -a "$out/gpu.txt"
  fi
fi
$py -c 'import ctranslate2; print("ctranslate2", ctranslate2.__version__, "cuda devices",
  ctranslate2.get_cuda_device_count())' 2>&1 | tee -a "$out/gpu.txt"

# first, so that its result comes back if the lease ends early: the whole suite with CUDA (tests/devices.py adds the
# GPU and its half precisions), cut at TEST_TIME seconds
if [ "${TEST_TIME:-240}" != 0 ]; then
  # each failure's traceback goes to failures.txt as it happens (tests/conftest.py), also when the run is cut
  NMTKIT_TEST_FAILURES=$out/failures.txt timeout "${TEST_TIME:-240}" $py -m pytest -n 16 -v -p no:cacheprovider \
    ${TESTS:-tests} > "$out/pytest.log" 2>&1
  echo "pytest rc=$? (124 = cut by the time limit)" | tee -a "$out/gpu.txt"
  grep -E -c 'PASSED' "$out/pytest.log" | sed 's/^/passed /' | tee -a "$out/gpu.txt"
  grep -E 'FAILED|ERROR' "$out/pytest.log" | cut -c1-300 | head -20 | tee -a "$out/gpu.txt"
  tail -3 "$out/pytest.log"
fi

# Transformer base (recipes/wmt/transformer-base.yaml) against OpenNMT-py 3.5.1: target tokens/s, the data loader's
# share of the step time and MFU, one table a batch size (issue 49)
if [ "${ONMT_BASE:-0}" != 0 ]; then
  for batch in ${BASE_BATCHES:-4096:1 25000:4}; do
    timeout "${BASE_TIME:-240}" $py benchmarks/train_speed.py --device "${DEVICE:-cuda}" --preset base \
      --data "$data/bpe8000" --onmt-python "$py" --steps "${BASE_STEPS:-100}" --log-every "${BASE_LOG_EVERY:-20}" \
      --batch-tokens "${batch%%:*}" --accumulate "${batch##*:}" 2>> "$out/onmt_base.log" | tee -a "$out/onmt_base.md"
    echo "train_speed.py $batch rc=${PIPESTATUS[0]} (124 = cut by BASE_TIME)" | tee -a "$out/onmt_base.md"
  done
fi

# MBR's pairwise utilities on the GPU against the CPU (issue 66): time and the same choices, chrF and BLEU
if [ "${MBR:-1}" != 0 ] && [ -f "$data/raw/test.en" ]; then
  for utility in chrf bleu; do
    timeout 120 $py benchmarks/mbr_utilities.py "$data/raw/test.en" --lines 1000 --candidates 32 \
      --device "${DEVICE:-cuda}" --utility "$utility" 2>&1 | tee -a "$out/mbr_utilities.txt"
  done
fi

# what a batch of a new shape costs, as nmtkit trains and with PyTorch's own choice of attention kernels
if [ "${SHAPES:-1}" != 0 ]; then
  for allow in "" --allow-cudnn; do
    timeout 120 $py benchmarks/new_shapes.py --device "${DEVICE:-cuda}" $allow 2>&1 | tee -a "$out/new_shapes.txt"
  done
fi

# training: the recipe's model and schedule with GPU-sized batches, then translation and exports
if [ "${TRAIN_TIME:-3m}" != 0 ]; then
  timed train $py -m nmtkit train --data "$data/bpe8000" --config recipes/bible/transformer.yaml \
    --set train.batch_tokens=4096 --set train.valid_every=1000 --set "train.amp=${AMP:-bf16}" \
    --max-time "${TRAIN_TIME:-3m}" --device "${DEVICE:-cuda}" --out "$run" > "$out/train.summary.json" \
    2> "$out/train.log"
  tail -5 "$out/train.log"
  cp "$run"/*.jsonl "$out/" 2>/dev/null

  bleu() {  # bleu NAME HYP: BLEU against the KJV, against KJV and WEB, and chrF (KJV) of a test translation
    local kjv both
    kjv=$($py -m nmtkit evaluate --hyp "$2" --ref "$data/raw/test.en" --json)
    both=$($py -m nmtkit evaluate --hyp "$2" --ref "$data/raw/test.en" --ref "$data/raw/test.web" --json)
    $py -c 'import json, sys; k, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(sys.argv[1], round(k["bleu"]["score"], 2), round(b["bleu"]["score"], 2), round(k["chrf"]["score"], 2), sep="\t")' \
      "$1" "$kjv" "$both" | tee -a "$out/scores.tsv"
  }
  translate() {  # translate NAME MODEL OPTIONS...: beam 5 on the GPU, twice (the second run is the timing to quote)
    local name=$1 model=$2
    shift 2
    for attempt in 1 2; do
      timed "translate-$name-$attempt" $py -m nmtkit translate -m "$model" --beam 5 --device "${DEVICE:-cuda}" "$@" \
        --input "$data/raw/test.es" > "$run/test.$name.hyp" 2>> "$out/translate.log"
    done
    bleu "$name" "$run/test.$name.hyp"
  }
  translate torch-fp32 "$run/model.pt"
  if [ -z "${QUICK:-}" ]; then
    translate torch-bf16 "$run/model.pt" --bf16
    translate torch-greedy "$run/model.pt" --beam 1
  fi
  for quantization in ${CT2_TYPES:-float32 float16 int8_float16 bfloat16}; do
    $py -m nmtkit export -m "$run/model.pt" --quantization "$quantization" --out "$run/ct2-$quantization" \
      >> "$out/translate.log" 2>> "$out/translate.log"
    translate "ct2-$quantization" "$run/ct2-$quantization"
  done
  cmp -s "$run/test.torch-fp32.hyp" "$run/test.ct2-float32.hyp" && same=identical || same="differ on $(paste \
    "$run/test.torch-fp32.hyp" "$run/test.ct2-float32.hyp" | awk -F'\t' '$1 != $2' | wc -l) lines"
  echo "PyTorch float32 and CTranslate2 float32 beam-5 outputs: $same" | tee -a "$out/gpu.txt"
fi
