"""TER, the translation edit rate (Snover et al., 2006), exactly as sacrebleu computes it: sacrebleu's own `TER`.

Unlike the other metrics, TER's per-sentence statistics are computed by sacrebleu itself, in Python on the CPU
(its beam-searched shifts are not batched here): [edits against the closest reference, mean reference length].
The mean length is fractional with several references, so the statistics are float64; corpus, sentence and
bootstrap scores are sacrebleu's formula over their sums, as for every `Metric`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from sacrebleu.metrics import TER
from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.metrics import SacrebleuScores, corpus_totals
from nmtkit.metrics.options import TerOptions
from nmtkit.registry import register_metric

if TYPE_CHECKING:
    from nmtkit.metrics.options import EvaluateConfig


class SacrebleuTER(SacrebleuScores):
    """Corpus and sentence TER against fixed references; options, statistics, score and signature are sacrebleu's."""

    name = "ter"

    def __init__(self, references: Sequence[Sequence[str]], normalized: bool = False, no_punct: bool = False,
                 asian_support: bool = False, case_sensitive: bool = False):
        self.metric = TER(normalized=normalized, no_punct=no_punct, asian_support=asian_support,
                          case_sensitive=case_sensitive, references=references)  # tokenizes the references once
        self.lines = len(references[0])

    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """sacrebleu's [edits, mean reference length] per sentence: (N, 2) float64."""
        if len(hypotheses) != self.lines:
            raise NmtkitError(f"{len(hypotheses)} hypotheses for {self.lines} references")
        return torch.tensor(self.metric._extract_corpus_statistics(hypotheses, None), dtype=torch.float64)

    def report(self, stats: Tensor) -> dict:
        score = self.corpus(corpus_totals(stats))
        return {"score": score.score, "signature": self.signature(), "text": str(score), "num_edits": score.num_edits,
                "ref_length": score.ref_length}


@register_metric("ter", options=TerOptions)
def build_ter(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
              device: torch.device) -> SacrebleuTER:
    """sacrebleu's TER, counted on the CPU whatever the device."""
    options = config.options(TerOptions)
    return SacrebleuTER(references, options.normalized, options.no_punct, options.asian_support,
                        options.case_sensitive)
