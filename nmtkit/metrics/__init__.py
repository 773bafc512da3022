"""Corpus metrics computed on a torch device: BLEU, chrF/chrF++ (sacrebleu-exact), WER/CER/MER/WIL/WIP (jiwer-exact),
edit distance; and TER, sacrebleu's own.

Every metric follows `Metric`: per-sentence sufficient statistics are counted on the device (TER's by sacrebleu),
and corpus, sentence and bootstrap scores are formulas over sums of them.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the package imports no torch: `nmtkit.metrics.options` is read at every start of the CLI
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


class SacrebleuScores:
    """Scores from summed statistics through the sacrebleu metric object `self.metric` (chrF, TER): the corpus
    score object, its score, each sentence's score and the signature, exactly as sacrebleu computes them."""

    metric: object

    def corpus(self, totals: Sequence):
        """sacrebleu's score object for summed statistics (numbers, or float32 sums as in its bootstrap)."""
        return self.metric._compute_score_from_stats(totals)

    def score(self, totals: Sequence) -> float:
        return self.corpus(totals).score

    def sentence_scores(self, stats: Tensor) -> list[float]:
        return [self.score(row) for row in stats.tolist()]

    def signature(self) -> str:
        return str(self.metric.get_signature())
