"""What `--confidence` costs: the first 300 lines of a test set translated (beam 5, one thread) without and with the
confidence estimators, and the teacher-forced rescoring alone, twice each. Results: docs/benchmarks.md (Sentence
confidence).

usage: python benchmarks/experiments/confidence_cost.py MODEL SRC
"""

from __future__ import annotations

import sys
import time

import torch

from nmtkit.decoding.inputs import Request
from nmtkit.translate import Translator


def main(model: str, source: str) -> None:
    torch.set_num_threads(1)
    with open(source, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle][:300]
    translator = Translator.load(model, device="cpu", threads=1)
    requests = [Request(line) for line in lines]
    translator.translate_requests(requests[:20])  # warm up
    for _ in range(2):
        start = time.perf_counter()
        translator.translate_requests(requests)
        plain = time.perf_counter()
        translator.translate_confident(requests, ["mean", "min", "q10", "prob"])
        rated = time.perf_counter()
        sources = translator.encode(requests)
        targets = translator.loaded.tgt_subword.encode(translator.translate(lines))
        rescoring = time.perf_counter()
        translator.engine.token_log_probs(sources, targets)
        done = time.perf_counter()
        print(f"plain {plain - start:.2f} s, with confidence {rated - plain:.2f} s, rescoring alone "
              f"{done - rescoring:.2f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
