"""BLEU (Papineni et al., 2002) with sacrebleu's exact definition, its n-gram statistics counted on a torch device.

The text is tokenized by sacrebleu's own tokenizer classes; the per-sentence sufficient statistics
[hyp_len, ref_len, correct_1..N, total_1..N] are counted on the device (see `ngrams`), and the score, its
smoothing (Chen and Cherry, 2014) and its signature come from sacrebleu's `BLEU` itself, so every printed digit
is sacrebleu's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from sacrebleu.metrics import BLEU
from sacrebleu.metrics.bleu import MAX_NGRAM_ORDER, BLEUScore
from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.metrics.ngrams import (
    Ragged,
    default_budget,
    found_in,
    length_batches,
    ngram_keys,
    on_one_thread,
    rank_in_run,
    sort_rows,
)
from nmtkit.metrics.options import BleuOptions
from nmtkit.metrics.tokenize import bleu_metric, bleu_token_slices, default_tokenizer
from nmtkit.registry import register_metric

if TYPE_CHECKING:
    from nmtkit.metrics.options import EvaluateConfig


def closest_ref_lengths(hyp_lengths: Tensor, ref_lengths: Tensor) -> Tensor:
    """Per sentence, the reference length closest to the hypothesis length, the shorter on ties: (N,).

    hyp_lengths (N,), ref_lengths (N, R).
    """
    distance = (ref_lengths - hyp_lengths[:, None]).abs()  # (N, R)
    scale = int(ref_lengths.max()) + 1 if ref_lengths.numel() else 1
    best = (distance * scale + ref_lengths).argmin(dim=1)  # (N,)
    return ref_lengths.gather(1, best[:, None])[:, 0]


def clipped_counts(hyp: Tensor, refs: list[Tensor], max_order: int) -> Tensor:
    """Clipped n-gram matches of padded token rows against several references (max count over them): (B, N)."""
    columns = []
    ref_orders = [ngram_keys(ref, max_order) for ref in refs]
    for hyp_keys in ngram_keys(hyp, max_order):
        hyp_keys = sort_rows(hyp_keys)  # (B, Lh)
        rank = rank_in_run(hyp_keys)  # (B, Lh)
        matched = torch.zeros_like(hyp_keys, dtype=torch.bool)
        for keys in ref_orders:
            matched |= found_in(hyp_keys, rank, sort_rows(next(keys)))
        columns.append(matched.sum(dim=1))
    return torch.stack(columns, dim=1)


def check_options(smooth_method: str, smooth_value: float | None, max_ngram_order: int) -> None:
    """Refuse, in one line, BLEU options that sacrebleu would reject with an assertion or a crash, or ignore
    (`BleuOptions` checks them)."""
    BleuOptions(None, smooth_method, smooth_value, max_ngram_order)


class DeviceBLEU:
    """Corpus and sentence BLEU against fixed references; options, score and signature are sacrebleu's."""

    name = "bleu"

    def __init__(self, references: Sequence[Sequence[str]], device: torch.device, lowercase: bool = False,
                 tokenize: str | None = None, smooth_method: str = "exp", smooth_value: float | None = None,
                 effective_order: bool = False, max_ngram_order: int = MAX_NGRAM_ORDER, workers: int | None = None,
                 budget: int | None = None):
        check_options(smooth_method, smooth_value, max_ngram_order)
        bleu_metric(tokenize, lowercase)  # an unknown tokenizer fails here, before any work
        options = {"lowercase": lowercase, "tokenize": tokenize, "smooth_method": smooth_method,
                   "smooth_value": smooth_value, "max_ngram_order": max_ngram_order}
        self.metric = BLEU(effective_order=effective_order, **options)
        self.metric.num_refs = len(references)  # sacrebleu sets this while caching references
        self.sentence_metric = BLEU(effective_order=True, **options)
        self.tokenize = tokenize or BLEU.TOKENIZER_DEFAULT
        self.device, self.workers = device, workers
        self.budget = budget or default_budget(device)
        self.references = references
        self.ref_slices: list[list[Ragged]] | None = None  # per slice, per reference: tokenized on first use

    @on_one_thread
    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """sacrebleu's per-sentence statistics [hyp_len, ref_len, correct_1..N, total_1..N]: (N, 2 + 2N) int64.

        Each slice is counted as soon as it is tokenized, while the next ones are tokenized; the first call
        tokenizes the references along with the hypotheses, and later calls reuse them.
        """
        if len(hypotheses) != len(self.references[0]):
            raise NmtkitError(f"{len(hypotheses)} hypotheses for {len(self.references[0])} references")
        streams = [hypotheses, *self.references] if self.ref_slices is None else [hypotheses]
        parts, ref_slices = [], []
        pieces = bleu_token_slices(streams, self.tokenize, self.metric.lowercase, self.workers)
        for index, (hyp, *refs) in enumerate(pieces):
            if self.ref_slices is None:
                refs = [Ragged.build(*ref, self.device) for ref in refs]
            else:
                refs = self.ref_slices[index]
            parts.append(self._slice_statistics(Ragged.build(*hyp, self.device), refs))
            ref_slices.append(refs)
        self.ref_slices = ref_slices
        return torch.cat(parts).cpu()

    def _slice_statistics(self, hyp: Ragged, refs: list[Ragged]) -> Tensor:
        """Statistics of a slice of hypotheses against the same slice of each reference: (n, 2 + 2N)."""
        order, count = self.metric.max_ngram_order, len(hyp.lengths)
        ref_lengths = torch.stack([ref.lengths for ref in refs], dim=1)  # (n, R)
        correct = torch.zeros(count, order, dtype=torch.int64, device=self.device)
        widest = torch.maximum(hyp.lengths, ref_lengths.max(dim=1).values).cpu().numpy()
        for rows in length_batches(widest, self.budget):
            rows = torch.from_numpy(rows).to(self.device)
            correct[rows] = clipped_counts(hyp.padded(rows), [ref.padded(rows) for ref in refs], order)
        totals = (hyp.lengths[:, None] - torch.arange(order, device=self.device)).clamp(min=0)  # (n, order)
        lengths = torch.stack([hyp.lengths, closest_ref_lengths(hyp.lengths, ref_lengths)], dim=1)
        return torch.cat([lengths, correct, totals], dim=1)

    def corpus(self, totals: Sequence) -> BLEUScore:
        """sacrebleu's score object for summed statistics (ints, or float32 sums as in its bootstrap)."""
        return self.metric._compute_score_from_stats(totals)

    def score(self, totals: Sequence) -> float:
        return self.corpus(totals).score

    def sentence_scores(self, stats: Tensor) -> list[float]:
        """Sentence BLEU with effective order, as sacrebleu's --sentence-level computes it."""
        return [self.sentence_metric._compute_score_from_stats(row).score for row in stats.tolist()]

    def signature(self) -> str:
        return str(self.metric.get_signature())

    def report(self, stats: Tensor) -> dict:
        score = self.corpus(stats.sum(dim=0).tolist())
        return {"score": score.score, "signature": self.signature(), "text": str(score), "tokenize": self.tokenize,
                "precisions": score.precisions, "bp": score.bp, "sys_len": score.sys_len, "ref_len": score.ref_len}


@register_metric("bleu", options=BleuOptions)
def build_bleu(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
               device: torch.device) -> DeviceBLEU:
    """BLEU with the tokenizer asked for, else the target language's."""
    options = config.options(BleuOptions)
    return DeviceBLEU(references, device, config.lowercase, options.tokenize or default_tokenizer(config.lang),
                      options.smooth, options.smooth_value, max_ngram_order=options.max_ngram_order)
