"""Bit-parallel unit-cost Levenshtein distance for a batch of pairs, with the alignment's operation counts.

Myers (1999) as blocked by Hyyrö (2003): the column of vertical differences D[i][j] - D[i-1][j] of the
reference (the pattern, 64 positions per int64 word) is advanced one hypothesis token at a time with a dozen
word operations, for every pair of the batch at once. With `record`, the bit columns are kept and the
alignment is traced back as Hyyrö (2004) and rapidfuzz's `Levenshtein.editops` do (a deletion when the vertical
difference is +1, else an insertion when the one to the left is -1, else a match or substitution), so the
substitution, deletion and insertion counts are those of rapidfuzz and therefore of jiwer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from nmtkit.metrics.ngrams import shift_right

WORD = 64


def words_for(length: int) -> int:
    """int64 words needed for `length` bits (at least one)."""
    return max(-(-length // WORD), 1)


def length_masks(lengths: Tensor, words: int) -> Tensor:
    """Words with the low `lengths` bits set: (B, W)."""
    count = (lengths[:, None] - WORD * torch.arange(words, device=lengths.device)).clamp(0, WORD)  # (B, W)
    return torch.where(count == WORD, -1, (1 << count.clamp(max=WORD - 1)) - 1)


def match_masks(ref: Tensor, ref_len: Tensor, hyp: Tensor) -> Tensor:
    """Pattern-match words PM[b, j]: bit i set where ref[b, i] == hyp[b, j], i < ref_len[b]: (B, N, W).

    Built without comparing every pair of positions: with the reference sorted, the positions holding one
    token form a run; bits of distinct positions never overlap, so a run's OR is a difference of cumulative
    sums, read at the run's ends found by binary search (wrapping int64 arithmetic is exact here).
    """
    words = words_for(ref.shape[1])
    sorted_ref, positions = torch.sort(ref, dim=1)  # (B, M)
    bits = torch.where(positions < ref_len[:, None], 1 << (positions % WORD), 0)  # (B, M)
    in_word = (positions >> 6)[..., None] == torch.arange(words, device=ref.device)  # (B, M, W)
    sums = torch.cumsum(torch.where(in_word, bits[..., None], 0), dim=1)  # (B, M, W)
    sums = torch.cat([torch.zeros_like(sums[:, :1]), sums], dim=1)  # (B, M + 1, W)
    first = torch.searchsorted(sorted_ref, hyp)[..., None].expand(-1, -1, words)  # (B, N, W)
    after = torch.searchsorted(sorted_ref, hyp, right=True)[..., None].expand(-1, -1, words)
    return sums.gather(1, after) - sums.gather(1, first)


def popcount(words: Tensor) -> Tensor:
    """Set bits per int64 word (SWAR popcount)."""
    words = words - (shift_right(words, 1) & 0x5555555555555555)
    words = (words & 0x3333333333333333) + (shift_right(words, 2) & 0x3333333333333333)
    words = (words + shift_right(words, 4)) & 0x0F0F0F0F0F0F0F0F
    return shift_right(words * 0x0101010101010101, 56)


@dataclass
class BitColumns:
    """Vertical differences after each hypothesis token: positive (vp) and negative (vn) bits, (B, N, W) each."""

    vp: Tensor
    vn: Tensor


def advance(vp: Tensor, vn: Tensor, match: Tensor, hp_in: Tensor, hn_in: Tensor) -> tuple[Tensor, ...]:
    """One hypothesis token through one 64-row block of each pair: all (B, W).

    Myers (1999) as formulated by Hyyrö (2003), in the block form of rapidfuzz's
    `levenshtein_hyrroe2003_block`: the horizontal differences hp_in, hn_in entering a block's lowest row come
    from the top row of the block below.
    Returns the new (vp, vn) and the differences leaving the block's top row.
    """
    x = match | hn_in
    d0 = (((x & vp) + vp) ^ vp) | x | vn
    hp = vn | ~(d0 | vp)
    hn = d0 & vp
    hp_out, hn_out = shift_right(hp, 63), shift_right(hn, 63)
    hp = (hp << 1) | hp_in
    hn = (hn << 1) | hn_in
    return hn | ~(d0 | hp), hp & d0, hp_out, hn_out


def skew(columns: Tensor) -> Tensor:
    """(B, N, W) -> (B, N + W - 1, W) with block w shifted down by w, so that wave t reads row t."""
    batch, steps, words = columns.shape
    skewed = columns.new_zeros(batch, steps + words - 1, words)
    for block in range(words):
        skewed[:, block:block + steps, block] = columns[:, :, block]
    return skewed


def unskew(skewed: Tensor, steps: int) -> Tensor:
    """The inverse of `skew`: (B, N + W - 1, W) -> (B, N, W)."""
    return torch.stack([skewed[:, block:block + steps, block] for block in range(skewed.shape[2])], dim=2)


def myers(ref: Tensor, ref_len: Tensor, hyp: Tensor, hyp_len: Tensor, record: bool) -> tuple[Tensor, BitColumns]:
    """Unit-cost distances of padded token rows (B,) and, with `record`, the bit columns after each token.

    ref (B, M), hyp (B, N); tokens past a row's length are ignored. Block w of token j depends on block w-1
    of token j, so the blocks run as a wavefront: wave t advances block w by token t - w, for all w at once.
    """
    batch, steps, words = ref.shape[0], hyp.shape[1], words_for(ref.shape[1])
    masks = skew(match_masks(ref, ref_len, hyp))  # (B, N + W - 1, W)
    vp = torch.full((batch, words), -1, dtype=torch.int64, device=ref.device)  # D[i][0] - D[i-1][0] = +1
    vn = torch.zeros_like(vp)
    block = torch.arange(words, device=ref.device)
    waves = torch.arange(steps + words - 1, device=ref.device)[:, None] - block  # (T, W): the token of each block
    live = (waves >= 0) & (waves < hyp_len[:, None, None])  # (B, T, W): blocks that advance in each wave
    zero = torch.zeros_like(vp[:, :1])
    one = zero + 1
    hn_in = torch.zeros_like(vp)
    hp_in = torch.cat([one, hn_in[:, 1:]], dim=1)  # D[0][j] - D[0][j-1] = +1 enters block 0 only
    kept = masks.shape[1] if record else 0
    recorded = BitColumns(vp.new_empty(batch, kept, words), vn.new_empty(batch, kept, words))
    for wave in range(steps + words - 1):
        new_vp, new_vn, hp_out, hn_out = advance(vp, vn, masks[:, wave], hp_in, hn_in)
        vp, vn = torch.where(live[:, wave], new_vp, vp), torch.where(live[:, wave], new_vn, vn)
        hp_in, hn_in = torch.cat([one, hp_out[:, :-1]], dim=1), torch.cat([zero, hn_out[:, :-1]], dim=1)
        if record:
            recorded.vp[:, wave], recorded.vn[:, wave] = vp, vn
    valid = length_masks(ref_len, words)  # (B, W)
    distance = hyp_len + (popcount(vp & valid) - popcount(vn & valid)).sum(dim=1)
    if not record:
        return distance, recorded
    return distance, BitColumns(unskew(recorded.vp, steps), unskew(recorded.vn, steps))


def trace_counts(ref: Tensor, ref_len: Tensor, hyp: Tensor, hyp_len: Tensor, columns: BitColumns) -> Tensor:
    """Substitutions, deletions and insertions of rapidfuzz's alignment of each pair: (B, 3).

    Walks from (ref_len, hyp_len) to the origin for all pairs at once; `col` indexes the reference, `row`
    the hypothesis, as in rapidfuzz's `recover_alignment`: delete if the vertical difference at the cell is
    +1, else insert if the one to its left is -1, else step diagonally.
    """
    batch, steps, words = columns.vp.shape
    vn_left = torch.cat([torch.zeros_like(columns.vn[:, :1]), columns.vn[:, :-1]], dim=1)  # (B, N, W)
    bits = torch.stack([columns.vp, vn_left], dim=3).reshape(-1)  # both bits of a cell side by side
    tokens = torch.cat([ref, hyp], dim=1).reshape(-1)
    pairs = torch.arange(batch, device=ref.device)
    bit_base = pairs * steps * words
    token_base = pairs * (ref.shape[1] + hyp.shape[1])
    hyp_offset = torch.tensor([0, ref.shape[1]], device=ref.device)
    vp_vn = torch.arange(2, device=ref.device)
    col, row = ref_len.clone(), hyp_len.clone()
    counts = torch.zeros(batch, 3, dtype=torch.int64, device=ref.device)  # S, D, I
    for _ in range(int((ref_len + hyp_len).max())):
        active = torch.minimum(col, row) > 0
        c, r = (col - 1).clamp(min=0), (row - 1).clamp(min=0)  # c, r >= 0, so >> and & act as // and %
        cell = (bit_base + r * words + (c >> 6)) * 2
        both = bits.index_select(0, (cell[:, None] + vp_vn).view(-1)).view(batch, 2)  # (B, 2): vp, vn left
        both = (both >> (c & (WORD - 1))[:, None]) & 1
        deletion = active & both[:, 0].bool()
        insertion = active & ~deletion & both[:, 1].bool()
        diagonal = active & ~(deletion | insertion)
        index = torch.stack([token_base + c, token_base + r], dim=1) + hyp_offset
        pair = tokens.index_select(0, index.view(-1)).view(batch, 2)  # (B, 2): ref token, hyp token
        counts += torch.stack([diagonal & (pair[:, 0] != pair[:, 1]), deletion, insertion], dim=1)
        col = col - (deletion | diagonal).long()
        row = row - (insertion | diagonal).long()
    return counts + torch.stack([torch.zeros_like(col), col, row], dim=1)
