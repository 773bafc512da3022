"""chrF (Popović, 2015) and chrF++ (Popović, 2017) with sacrebleu's exact definition, counted on a torch device.

Per sentence and reference, each character n-gram order (1..6, whitespace removed) and word n-gram order
(chrF++: 1..2, punctuation split off as sacrebleu does) gives [hyp n-grams, ref n-grams, matches]; with several
references a sentence keeps the statistics of the reference with the best sentence F-score, as sacrebleu does.
The corpus score and the signature come from sacrebleu's `CHRF`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from sacrebleu.metrics import CHRF
from torch import Tensor

from nmtkit.metrics import SacrebleuScores
from nmtkit.metrics.ngrams import (
    Ragged,
    char_tokens,
    chunked,
    default_budget,
    default_chunk,
    found_in,
    hash_words,
    length_batches,
    ngram_keys,
    on_one_thread,
    rank_in_run,
    sort_rows,
)
from nmtkit.metrics.options import ChrfOptions
from nmtkit.registry import register_metric

if TYPE_CHECKING:
    from nmtkit.metrics.options import EvaluateConfig

EPS = 1e-16  # sacrebleu's chrF smoothing constant


def match_counts(hyp: Tensor, refs: list[Tensor], max_order: int) -> Tensor:
    """Matched n-grams of padded token rows against each reference separately: (B, R, max_order)."""
    columns = []
    ref_orders = [ngram_keys(ref, max_order) for ref in refs]
    for hyp_keys in ngram_keys(hyp, max_order):
        hyp_keys = sort_rows(hyp_keys)  # (B, Lh)
        rank = rank_in_run(hyp_keys)  # (B, Lh)
        columns.append(torch.stack([found_in(hyp_keys, rank, sort_rows(next(keys))).sum(dim=1)
                                    for keys in ref_orders], dim=1))  # (B, R)
    return torch.stack(columns, dim=2)


def ngram_totals(lengths: Tensor, max_order: int) -> Tensor:
    """n-grams of orders 1..max_order in sequences of the given lengths: (..., max_order)."""
    orders = torch.arange(1, max_order + 1, device=lengths.device)
    return (lengths[..., None] - orders + 1).clamp(min=0)


def f_scores(stats: Tensor, beta: int, eps_smoothing: bool) -> Tensor:
    """sacrebleu's `CHRF._compute_f_score` for many rows at once, operation for operation in float64: (...,).

    stats (..., O, 3) holds [hyp, ref, match] per order; the order of float operations is sacrebleu's, so a
    tie between two references is broken exactly as sacrebleu breaks it.
    """
    n_hyp, n_ref, n_match = stats.double().unbind(-1)  # (..., O) each
    factor = beta ** 2
    prec = torch.where(n_hyp > 0, n_match / n_hyp, EPS)
    rec = torch.where(n_ref > 0, n_match / n_ref, EPS)
    denom = factor * prec + rec
    terms = torch.where(denom > 0, (1 + factor) * prec * rec / denom, EPS)
    both = (n_hyp > 0) & (n_ref > 0)
    score = avg_prec = avg_rec = torch.zeros(stats.shape[:-2], dtype=torch.float64, device=stats.device)
    for order in range(stats.shape[-2]):
        score = score + terms[..., order]
        avg_prec = avg_prec + torch.where(both[..., order], prec[..., order], 0.0)
        avg_rec = avg_rec + torch.where(both[..., order], rec[..., order], 0.0)
    if eps_smoothing:
        return 100 * score / stats.shape[-2]
    effective = both.sum(dim=-1)
    avg_prec = torch.where(effective > 0, avg_prec / effective.clamp(min=1), 0.0)
    avg_rec = torch.where(effective > 0, avg_rec / effective.clamp(min=1), 0.0)
    total = avg_prec + avg_rec
    return torch.where(total != 0, 100 * ((1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec)), 0.0)


def check_options(char_order: int, word_order: int, beta: int) -> None:
    """Refuse, in one line, chrF options for which sacrebleu's formula is undefined (`ChrfOptions` checks them)."""
    ChrfOptions(char_order, word_order, beta)


class DeviceCHRF(SacrebleuScores):
    """Corpus and sentence chrF / chrF++ against fixed references; options, score and signature are sacrebleu's."""

    def __init__(self, references: Sequence[Sequence[str]], device: torch.device, char_order: int = 6,
                 word_order: int = 0, beta: int = 2, lowercase: bool = False, whitespace: bool = False,
                 eps_smoothing: bool = False, budget: int | None = None, chunk: int | None = None):
        check_options(char_order, word_order, beta)
        self.metric = CHRF(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase,
                           whitespace=whitespace, eps_smoothing=eps_smoothing)
        self.metric.num_refs = len(references)  # sacrebleu sets this while caching references
        self.name = "chrf++" if word_order else "chrf"
        self.device, self.budget = device, budget or default_budget(device)
        self.chunk = chunk or default_chunk(device)  # characters tokenized at once: memory bounded by the chunk
        self.references = references

    def _tokens(self, lines: Sequence[str]) -> tuple[Ragged, Ragged]:
        """Characters (whitespace dropped unless kept) and chrF++ words of each line."""
        lines = [self.metric._preprocess_segment(line) for line in lines]
        chars = lines if self.metric.whitespace else ["".join(line.split()) for line in lines]
        words = [" ".join(self.metric._remove_punctuation(line)) for line in lines] if self.metric.word_order else []
        return char_tokens(chars, self.device), Ragged.build(*hash_words(words), self.device)

    def _matches(self, hyp: tuple[Ragged, Ragged], refs: list[tuple[Ragged, Ragged]], rows: Tensor) -> Tensor:
        """Matched character then word n-grams of sentences `rows` against each reference: (B, R, O)."""
        metric = self.metric
        chars = match_counts(hyp[0].padded(rows), [ref[0].padded(rows) for ref in refs], metric.char_order)
        if not metric.word_order:
            return chars
        words = match_counts(hyp[1].padded(rows), [ref[1].padded(rows) for ref in refs], metric.word_order)
        return torch.cat([chars, words], dim=2)

    def _totals(self, tokens: tuple[Ragged, Ragged]) -> Tensor:
        """n-grams per sentence and order, characters then words: (N, O)."""
        chars = ngram_totals(tokens[0].lengths, self.metric.char_order)
        if not self.metric.word_order:
            return chars
        return torch.cat([chars, ngram_totals(tokens[1].lengths, self.metric.word_order)], dim=1)

    @on_one_thread
    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """sacrebleu's per-sentence statistics [hyp, ref, match] per order: (N, 3 * O) int64."""
        return chunked(self._chunk_statistics, hypotheses, self.references, self.chunk)

    def _chunk_statistics(self, hypotheses: list[str], references: list[list[str]]) -> Tensor:
        """Statistics of a run of lines against the same lines of each reference: (n, 3 * O) int64 on the CPU."""
        hyp, refs = self._tokens(hypotheses), [self._tokens(stream) for stream in references]
        matches = torch.zeros(len(hypotheses), len(refs), self.metric.order, dtype=torch.int64, device=self.device)
        widest = torch.stack([hyp[0].lengths] + [ref[0].lengths for ref in refs]).max(dim=0).values
        for rows in length_batches(widest.cpu().numpy(), self.budget):
            rows = torch.from_numpy(rows).to(self.device)
            matches[rows] = self._matches(hyp, refs, rows)
        ref_totals = torch.stack([self._totals(ref) for ref in refs], dim=1)  # (n, R, O)
        hyp_totals = self._totals(hyp)[:, None].expand_as(ref_totals)
        hyp_totals = torch.where(ref_totals > 0, hyp_totals, 0)  # sacrebleu counts none without a reference n-gram
        stats = torch.stack([hyp_totals, ref_totals, matches], dim=3)  # (n, R, O, 3)
        best = f_scores(stats, self.metric.beta, self.metric.eps_smoothing).argmax(dim=1)  # (n,) first best
        return stats[torch.arange(len(hypotheses), device=self.device), best].flatten(1).cpu()

    def report(self, stats: Tensor) -> dict:
        score = self.corpus(stats.sum(dim=0).tolist())
        return {"score": score.score, "signature": self.signature(), "text": str(score)}


@register_metric("chrf", "chrf++", options=ChrfOptions)
def build_chrf(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
               device: torch.device) -> DeviceCHRF:
    """chrF; chrf++ is chrF with word bigrams (word order 2)."""
    options = config.options(ChrfOptions)
    return DeviceCHRF(references, device, options.char_order, 2 if name == "chrf++" else options.word_order,
                      options.beta, config.lowercase, options.whitespace, options.eps_smoothing)
