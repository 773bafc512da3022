"""Levenshtein (1966) edit distance between references and hypotheses, batched on a torch device.

Reference tokens are deleted, hypothesis tokens inserted, and one substituted for the other, at the costs of
`EditCosts` (1/1/1 by default; substitution 2 is the variant of Jurafsky and Martin, Speech and Language
Processing, Section 2.5). Common prefixes and suffixes are matched first, as rapidfuzz does. Unit costs run the
bit-parallel algorithm of `bitparallel`; other costs a row-by-row dynamic programme whose horizontal step is a
running minimum (min-plus prefix scan). Both can count the substitutions, deletions, insertions and hits of
one optimal alignment, chosen by the tie-breaking of rapidfuzz's `Levenshtein.editops` (which jiwer uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.metrics.bitparallel import WORD, myers, trace_counts
from nmtkit.metrics.ngrams import (
    PAD,
    Ragged,
    char_tokens,
    chunked,
    default_budget,
    default_chunk,
    hash_words,
    length_batches,
    on_one_thread,
)
from nmtkit.metrics.options import EditOptions
from nmtkit.registry import register_metric

if TYPE_CHECKING:
    from nmtkit.metrics.options import EvaluateConfig

CELLS_PER_TOKEN = 4  # batches of pairs hold this many padded tokens times 64-bit words per token of budget
FIELD = 21  # bits per operation count in the packed counters of `weighted_levenshtein` (pairs < 2M tokens)
SUBSTITUTION, DELETION, INSERTION = 1, 1 << FIELD, 1 << (2 * FIELD)


@dataclass(frozen=True)
class EditCosts:
    """Cost of inserting a hypothesis token, deleting a reference token, substituting one for another."""

    insertion: int = 1
    deletion: int = 1
    substitution: int = 1

    def __post_init__(self):
        if min(self.insertion, self.deletion, self.substitution) < 0:
            raise NmtkitError(f"edit costs must not be negative: {self}")

    @property
    def unit(self) -> bool:
        return self.insertion == self.deletion == self.substitution == 1

    @classmethod
    def parse(cls, text: str) -> EditCosts:
        """'ins,del,sub', e.g. '1,1,2' (`EditOptions` reads them)."""
        return cls(*EditOptions(costs=text).parsed_costs())


@dataclass
class EditResult:
    """Per pair: distance (N,) and, when counted, the operations of one optimal alignment (N,) each."""

    distance: Tensor
    substitutions: Tensor | None = None
    deletions: Tensor | None = None
    insertions: Tensor | None = None
    hits: Tensor | None = None


def strip_affix(ref: Tensor, ref_len: Tensor, hyp: Tensor, hyp_len: Tensor) -> tuple[Tensor, ...]:
    """Drop the common prefix and suffix of each pair: (ref, ref_len, hyp, hyp_len) shortened, and kept (B,).

    ref (B, M), hyp (B, N) padded token rows; the results are narrowed to their longest row (at least 1).
    """
    shortest = torch.minimum(ref_len, hyp_len)  # (B,)
    width = min(ref.shape[1], hyp.shape[1])
    positions = torch.arange(width, device=ref.device)
    same = (ref[:, :width] == hyp[:, :width]) & (positions < shortest[:, None])  # (B, W)
    prefix = same.long().cumprod(dim=1).sum(dim=1)
    ref_back = ref.gather(1, (ref_len[:, None] - 1 - positions).clamp(min=0))  # (B, W) from the end
    hyp_back = hyp.gather(1, (hyp_len[:, None] - 1 - positions).clamp(min=0))
    same = (ref_back == hyp_back) & (positions < (shortest - prefix)[:, None])
    kept = prefix + same.long().cumprod(dim=1).sum(dim=1)
    return (*_cut(ref, prefix, ref_len - kept), *_cut(hyp, prefix, hyp_len - kept), kept)


def _cut(rows: Tensor, start: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
    """rows[b, start_b : start_b + length_b] left-aligned and PAD-padded to the longest: (B, L), lengths (B,)."""
    width = max(int(length.max()), 1)
    positions = torch.arange(width, device=rows.device)
    taken = rows.gather(1, (start[:, None] + positions).clamp(max=rows.shape[1] - 1))  # (B, L)
    return torch.where(positions < length[:, None], taken, PAD), length


def weighted_levenshtein(ref: Tensor, ref_len: Tensor, hyp: Tensor, hyp_len: Tensor, costs: EditCosts,
                         counts: bool) -> tuple[Tensor, Tensor | None]:
    """Distances (B,) and, with `counts`, [substitutions, deletions, insertions] (B, 3) for any costs.

    Row i of D follows from row i-1: X[j] = min(D[i-1][j] + del, D[i-1][j-1] + sub * (ref_i != hyp_j)), then
    D[i][j] = min_k<=j X[k] + (j - k) * ins, a cumulative minimum. The operation counts ride along packed in one
    int64 per cell, each cell inheriting them from the neighbour the tie-breaking rule of `_choose` picks.
    """
    batch, columns = ref.shape[0], torch.arange(hyp.shape[1] + 1, device=ref.device)
    prev = (columns * costs.insertion).expand(batch, -1)  # (B, N + 1): D[0][j]
    packed = (columns * INSERTION).expand(batch, -1)
    distance = prev.gather(1, hyp_len[:, None])[:, 0]
    found = packed.gather(1, hyp_len[:, None])[:, 0]
    for i in range(1, ref.shape[1] + 1):
        mismatch = ref[:, i - 1, None] != hyp  # (B, N)
        diagonal = prev[:, :-1] + mismatch * costs.substitution  # (B, N)
        up = prev + costs.deletion  # (B, N + 1)
        best = torch.cat([up[:, :1], torch.minimum(up[:, 1:], diagonal)], dim=1)
        row = torch.cummin(best - columns * costs.insertion, dim=1).values + columns * costs.insertion
        if counts:
            packed = _choose(prev, row, up, diagonal, mismatch, packed, costs)
        last = ref_len == i
        distance = torch.where(last, row.gather(1, hyp_len[:, None])[:, 0], distance)
        found = torch.where(last, packed.gather(1, hyp_len[:, None])[:, 0], found)
        prev = row
    if not counts:
        return distance, None
    mask = (1 << FIELD) - 1
    return distance, torch.stack([found & mask, (found >> FIELD) & mask, (found >> 2 * FIELD) & mask], dim=1)


def _choose(prev: Tensor, row: Tensor, up: Tensor, diagonal: Tensor, mismatch: Tensor, packed: Tensor,
            costs: EditCosts) -> Tensor:
    """Packed operation counts of row i (B, N + 1): prefer a deletion, then an insertion, then the diagonal.

    An insertion is taken only if the diagonal is not optimal or D[i-1][j-1] > D[i][j-1]: for unit costs this is
    exactly rapidfuzz's test of the vertical difference to the left (VN bit), see `bitparallel.trace_counts`.
    """
    columns = torch.arange(row.shape[1], device=row.device)
    deletion = row == up  # (B, N + 1)
    diagonal_ok = row[:, 1:] == diagonal  # (B, N)
    insertion = (row[:, 1:] == row[:, :-1] + costs.insertion) & (~diagonal_ok | (prev[:, :-1] > row[:, :-1]))
    insertion = torch.cat([torch.zeros_like(deletion[:, :1]), insertion], dim=1) & ~deletion
    from_diagonal = packed[:, :-1] + mismatch * SUBSTITUTION  # (B, N)
    base = torch.where(deletion, packed + DELETION, torch.cat([packed[:, :1], from_diagonal], dim=1))
    start = torch.cummax(torch.where(insertion, 0, columns), dim=1).values  # last cell that is no insertion
    return base.gather(1, start) + (columns - start) * INSERTION


@on_one_thread
def levenshtein(refs: Ragged, hyps: Ragged, costs: EditCosts = EditCosts(), counts: bool = False,
                budget: int | None = None) -> EditResult:
    """Edit distance of each reference-hypothesis pair, in length-sorted batches on the tokens' device."""
    device = refs.values.device
    budget = budget or CELLS_PER_TOKEN * default_budget(device)
    distance = torch.zeros(len(refs.lengths), dtype=torch.int64, device=device)
    operations = torch.zeros(len(refs.lengths), 3, dtype=torch.int64, device=device)  # S, D, I
    widest = torch.maximum(refs.lengths, hyps.lengths).cpu().numpy()
    for rows in length_batches(widest * np.maximum(-(-widest // WORD), 1), budget):
        rows = torch.from_numpy(rows).to(device)
        pairs = strip_affix(refs.padded(rows), refs.lengths[rows], hyps.padded(rows), hyps.lengths[rows])[:4]
        if costs.unit:
            distance[rows], columns = myers(*pairs, record=counts)
            found = trace_counts(*pairs, columns) if counts else None
        else:
            distance[rows], found = weighted_levenshtein(*pairs, costs, counts)
        if counts:
            operations[rows] = found
    if not counts:
        return EditResult(distance.cpu())
    substitutions, deletions, insertions = operations.cpu().unbind(1)
    hits = refs.lengths.cpu() - substitutions - deletions
    return EditResult(distance.cpu(), substitutions, deletions, insertions, hits)


class DeviceEdit:
    """Total Levenshtein distance with chosen costs over characters or whitespace-separated tokens."""

    name = "edit"

    def __init__(self, references: Sequence[Sequence[str]], device: torch.device, costs: EditCosts = EditCosts(),
                 characters: bool = True, chunk: int | None = None):
        self.costs, self.characters, self.device = costs, characters, device
        self.references, self.chunk = references[:1], chunk or default_chunk(device)

    def _tokens(self, lines: Sequence[str]) -> Ragged:
        if self.characters:
            return char_tokens(lines, self.device)
        return Ragged.build(*hash_words(lines), self.device)

    @on_one_thread
    def statistics(self, hypotheses: Sequence[str]) -> Tensor:
        """[distance, substitutions, deletions, insertions, hits] per sentence: (N, 5) int64."""
        return chunked(self._chunk_statistics, hypotheses, self.references, self.chunk)

    def _chunk_statistics(self, hypotheses: list[str], references: list[list[str]]) -> Tensor:
        result = levenshtein(self._tokens(references[0]), self._tokens(hypotheses), self.costs, counts=True)
        return torch.stack([result.distance, result.substitutions, result.deletions, result.insertions,
                            result.hits], dim=1)

    def score(self, totals: Sequence[float]) -> float:
        return float(totals[0])

    def sentence_scores(self, stats: Tensor) -> list[float]:
        return [float(distance) for distance in stats[:, 0].tolist()]

    def report(self, stats: Tensor) -> dict:
        distance, substitutions, deletions, insertions, hits = (int(value) for value in stats.sum(dim=0))
        per_token = distance / max(hits + substitutions + deletions, 1)
        costs = f"{self.costs.insertion},{self.costs.deletion},{self.costs.substitution}"
        unit = "character" if self.characters else "token"
        text = (f"EDIT = {distance} ({unit}s, costs ins,del,sub = {costs}; {per_token:.4f} per reference {unit}) "
                f"S = {substitutions} D = {deletions} I = {insertions} H = {hits}")
        return {"score": distance, "per_reference_token": per_token, "unit": unit, "costs": costs,
                "substitutions": substitutions, "deletions": deletions, "insertions": insertions, "hits": hits,
                "text": text}


@register_metric("edit", options=EditOptions)
def build_edit(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
               device: torch.device) -> DeviceEdit:
    """Weighted edit distance over characters or whitespace tokens."""
    options = config.options(EditOptions)
    return DeviceEdit(references, device, EditCosts.parse(options.costs), options.unit == "char")
