"""Word and character error rates and jiwer's other word measures (MER, WIL, WIP) as jiwer 4 defines them, with
the operation counts S, D, I, H counted on a torch device.

WER = (S + D + I) / (H + S + D) over the whole corpus: total errors over total reference words, which is what
`jiwer.wer(references, hypotheses)` returns for lists. jiwer's default normalisation is kept: for words,
runs of whitespace become one space, the line is stripped and split on spaces; for characters the line is only
stripped and spaces count. When the references hold no word at all, jiwer's WER is the number of insertions,
and so is ours. The mean of the sentence error rates (each `jiwer.wer(ref, hyp)`) is reported separately; it
weighs short sentences as much as long ones. WER, CER and edit distance use the first reference.

MER, WIL and WIP (Morris et al., 2004) are jiwer's formulas over the same word counts, with its edge cases: no
reference word gives MER 0 and WIP 1 when there is no hypothesis word either, else MER 1 and WIP 0; no hypothesis
word (with reference words) gives WIP 0. WIL is 1 - WIP.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.metrics.edit import levenshtein
from nmtkit.metrics.ngrams import Ragged, char_tokens, chunked, default_chunk, hash_words, on_one_thread
from nmtkit.registry import register_metric

if TYPE_CHECKING:
    from nmtkit.metrics.options import EvaluateConfig

MULTIPLE_SPACES = re.compile(r"\s\s+")  # jiwer.RemoveMultipleSpaces


def jiwer_words(line: str) -> str:
    """jiwer's `wer_default` up to the final split on single spaces."""
    return MULTIPLE_SPACES.sub(" ", line).strip()


def error_rate(substitutions, deletions, insertions, hits) -> float:
    """jiwer's WER from operation counts: errors per reference token, or insertions without reference tokens."""
    reference = hits + substitutions + deletions
    return float(substitutions + deletions + insertions) / reference if reference else float(insertions)


def match_error_rate(substitutions, deletions, insertions, hits) -> float:
    """jiwer's MER: errors per aligned position, (S + D + I) / (H + S + D + I)."""
    if hits + substitutions + deletions == 0:
        return float(insertions > 0)
    return float(substitutions + deletions + insertions) / float(hits + substitutions + deletions + insertions)


def word_information_preserved(substitutions, deletions, insertions, hits) -> float:
    """jiwer's WIP: (H / reference words) * (H / hypothesis words), its float operations in its order."""
    reference, hypothesis = hits + substitutions + deletions, hits + substitutions + insertions
    if reference == 0:
        return float(hypothesis == 0)
    return (float(hits) / reference) * (float(hits) / hypothesis) if hypothesis >= 1 else 0.0


def word_information_lost(substitutions, deletions, insertions, hits) -> float:
    """jiwer's WIL: 1 - WIP."""
    return 1 - word_information_preserved(substitutions, deletions, insertions, hits)


MEASURES = {"wer": error_rate, "mer": match_error_rate, "wil": word_information_lost,
            "wip": word_information_preserved}


class DeviceWER:
    """WER, MER, WIL or WIP (words) or CER (characters) against the first reference, from jiwer's counts S, D, I, H."""

    def __init__(self, references: Sequence[Sequence[str]], device: torch.device, characters: bool = False,
                 chunk: int | None = None, measure: str = "wer"):
        if measure not in MEASURES or (characters and measure != "wer"):
            raise NmtkitError(f"unknown measure {measure!r}; choose from {', '.join(MEASURES)} (characters: wer)")
        self.name = "cer" if characters else measure
        self.measure = MEASURES[measure]
        self.characters, self.device = characters, device
        self.references, self.chunk = references[:1], chunk or default_chunk(device)

    def _tokens(self, lines: Sequence[str]) -> Ragged:
        if self.characters:
            return char_tokens([line.strip() for line in lines], self.device)
        return Ragged.build(*hash_words([jiwer_words(line) for line in lines], " "), self.device)

    @on_one_thread
    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """[substitutions, deletions, insertions, hits] per sentence: (N, 4) int64."""
        return chunked(self._chunk_statistics, hypotheses, self.references, self.chunk)

    def _chunk_statistics(self, hypotheses: list[str], references: list[list[str]]) -> Tensor:
        result = levenshtein(self._tokens(references[0]), self._tokens(hypotheses), counts=True)
        return torch.stack([result.substitutions, result.deletions, result.insertions, result.hits], dim=1)

    def score(self, totals: Sequence[float]) -> float:
        return self.measure(*(float(value) for value in totals))

    def sentence_scores(self, stats: Tensor) -> list[float]:
        return [self.measure(*row) for row in stats.tolist()]

    def report(self, stats: Tensor) -> dict:
        substitutions, deletions, insertions, hits = (int(value) for value in stats.sum(dim=0))
        score = self.score([substitutions, deletions, insertions, hits])
        sentences = self.sentence_scores(stats)
        mean = sum(sentences) / len(sentences) if sentences else 0.0
        unit = "characters" if self.characters else "words"
        errors = (f": {substitutions + deletions + insertions} errors / {hits + substitutions + deletions} reference "
                  f"{unit}" if self.measure is error_rate else "")
        text = (f"{self.name.upper()} = {score:.4f} (corpus{errors}; mean of sentences = {mean:.4f}) "
                f"S = {substitutions} D = {deletions} I = {insertions} H = {hits}")
        return {"score": score, "sentence_mean": mean, "substitutions": substitutions, "deletions": deletions,
                "insertions": insertions, "hits": hits, "text": text}


@register_metric("wer", "cer", "mer", "wil", "wip")
def build_wer(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
              device: torch.device) -> DeviceWER:
    """jiwer's measure `name`; cer is the word error rate over characters."""
    return DeviceWER(references, device, characters=name == "cer", measure="wer" if name == "cer" else name)
