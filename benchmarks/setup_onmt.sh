#!/usr/bin/env bash
# Build the OpenNMT-py 3.5.1 environment that benchmarks/train_speed.py compares against, on the CPU torch
# 2.13.0 (OpenNMT-py asks for torch<2.3; its dependencies would otherwise pull a multi-GB CUDA torch).
# Only what `onmt_train` imports is installed: ctranslate2, flask, waitress and tensorboard are left out.
# pip then warns that those are missing and that torch is outside <2.3: expected, training runs.
# Idempotent: re-running installs nothing new.
# Usage: bash benchmarks/setup_onmt.sh [VENV]   (default /work/onmt-venv)
#
# For a GPU lease (docs/gpu.md): bash benchmarks/setup_onmt.sh --gpu-wheels DIR downloads into DIR the Python 3.12
# x86-64 wheels that the lent machine lacks: OpenNMT-py 3.5.1 with the two packages its training imports beyond that
# machine's own (configargparse, pyonmttok; spacy, fasttext and pyahocorasick, imported only by transforms the
# benchmark does not use, are stood in for by train_speed.py's launcher), and the test suite's ctranslate2, jiwer and
# rapidfuzz. The two largest are rewritten with LZMA-compressed members (pip reads them through zipfile as any
# wheel): 61 MiB of wheels become about 41, so that they and the data fit a lease's 64 MiB.
set -euo pipefail

gpu_wheels() {
  local dir=$1 spec
  mkdir -p "$dir"
  for spec in OpenNMT-py==3.5.1 configargparse==1.9.0 pyonmttok==1.38.1 ctranslate2==4.8.5 jiwer==4.0.0 \
    rapidfuzz==3.14.6; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dir" "$spec"
  done
  python3 - "$dir" <<'EOF'
import sys, zipfile
from pathlib import Path

for wheel in Path(sys.argv[1]).glob("*.whl"):
    if wheel.stat().st_size < 10_000_000:
        continue
    with zipfile.ZipFile(wheel) as source:
        if all(info.compress_type == zipfile.ZIP_LZMA for info in source.infolist()):
            continue
        members = [(info, source.read(info)) for info in source.infolist()]
    packed = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_LZMA) as target:
        for info, data in members:
            info.compress_type = zipfile.ZIP_LZMA
            target.writestr(info, data)
    packed.replace(wheel)
    print(wheel.name, f"{wheel.stat().st_size / 2**20:.1f} MiB")
EOF
  du -sh "$dir"
}

if [ "${1:-}" = --gpu-wheels ]; then
  gpu_wheels "${2:?--gpu-wheels DIR}"
  exit 0
fi

venv=${1:-/work/onmt-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip=("$venv/bin/pip" install --quiet)
"${pip[@]}" torch==2.13.0
"${pip[@]}" --no-deps OpenNMT-py==3.5.1 pyonmttok==1.38.1
# torch is named again so that the resolver can only keep the CPU build already installed.
"${pip[@]}" torch==2.13.0 configargparse==1.9.0 pyyaml==6.0.3 sacrebleu==2.6.0 six==1.17.0 \
  sentencepiece==0.2.3 spacy==3.8.18 pyahocorasick==2.3.1 rapidfuzz==3.14.6
"${pip[@]}" --only-binary=:all: torch==2.13.0 fasttext-wheel==0.9.2
"$venv/bin/python" -c "import torch; assert not torch.version.cuda, torch.__version__; print('torch', torch.__version__)"
"$venv/bin/onmt_train" -h >/dev/null 2>&1 && echo "onmt_train ready in $venv"
