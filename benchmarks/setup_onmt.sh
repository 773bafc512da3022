#!/usr/bin/env bash
# Build the OpenNMT-py 3.5.1 environment that benchmarks/train_speed.py compares against, on the CPU torch
# 2.13.0 (OpenNMT-py asks for torch<2.3; its dependencies would otherwise pull a multi-GB CUDA torch).
# Only what `onmt_train` imports is installed: ctranslate2, flask, waitress and tensorboard are left out.
# pip then warns that those are missing and that torch is outside <2.3: expected, training runs.
# Idempotent: re-running installs nothing new.
# Usage: bash benchmarks/setup_onmt.sh [VENV]   (default /work/onmt-venv)
set -euo pipefail
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
