"""Corpus metrics computed on a torch device: BLEU, chrF/chrF++ (sacrebleu-exact), WER/CER/MER/WIL/WIP (jiwer-exact),
edit distance; and TER, sacrebleu's own.

Every metric follows `Metric`: per-sentence sufficient statistics are counted on the device (TER's by sacrebleu),
and corpus, sentence and bootstrap scores are formulas over sums of them.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Protocol

from torch import Tensor


class Metric(Protocol):
    """A metric bound to its references."""

    name: str

    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """Per-sentence sufficient statistics on the CPU: (N, K) int64, or float64 where one is fractional."""

    def score(self, totals: Sequence) -> float:
        """The corpus score of statistics summed over sentences."""

    def sentence_scores(self, stats: Tensor) -> list[float]:
        """The score of each sentence."""

    def report(self, stats: Tensor) -> dict:
        """The corpus result: at least `score` and a one-line `text`; `signature` for sacrebleu metrics."""


def corpus_totals(stats: Tensor) -> list:
    """Per-sentence statistics (N, K) summed over sentences as sacrebleu sums them (its `sum_of_lists`).

    Integers are exact in any order; fractional statistics (TER's average reference length) are added one sentence
    after another, so their float sum, and the corpus score, are sacrebleu's to the last bit.
    """
    if not stats.is_floating_point():
        return stats.sum(dim=0).tolist()
    return [functools.reduce(operator.add, column, 0) for column in stats.T.tolist()]
