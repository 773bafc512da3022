"""Corpus metrics computed on a torch device: BLEU, chrF/chrF++ (sacrebleu-exact), WER/CER (jiwer-exact), edit distance.

Every metric follows `Metric`: per-sentence sufficient statistics are counted on the device, and corpus,
sentence and bootstrap scores are formulas over sums of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from torch import Tensor


class Metric(Protocol):
    """A metric bound to its references."""

    name: str

    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """Per-sentence sufficient statistics: (N, K) int64 on the CPU."""

    def score(self, totals: Sequence) -> float:
        """The corpus score of statistics summed over sentences."""

    def sentence_scores(self, stats: Tensor) -> list[float]:
        """The score of each sentence."""

    def report(self, stats: Tensor) -> dict:
        """The corpus result: at least `score` and a one-line `text`; `signature` for sacrebleu metrics."""
