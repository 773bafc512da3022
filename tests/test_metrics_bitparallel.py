"""The word-level pieces of the bit-parallel Levenshtein algorithm."""

from __future__ import annotations

import random

import torch
from rapidfuzz.distance import Levenshtein

from nmtkit.metrics.bitparallel import length_masks, match_masks, myers, popcount, skew, unskew


def as_unsigned(value: int) -> int:
    return value % (1 << 64)


def test_popcount():
    values = [0, 1, -1, 0x5555555555555555, -(1 << 63), 12345678901234]
    assert popcount(torch.tensor(values)).tolist() == [bin(as_unsigned(value)).count("1") for value in values]


def test_length_masks():
    masks = length_masks(torch.tensor([0, 1, 64, 70]), words=2).tolist()
    assert [[as_unsigned(word) for word in row] for row in masks] == [
        [0, 0], [1, 0], [(1 << 64) - 1, 0], [(1 << 64) - 1, (1 << 6) - 1]]


def test_match_masks_mark_equal_positions():
    rng = random.Random(0)
    ref = torch.tensor([[rng.randint(0, 3) for _ in range(150)] for _ in range(4)])
    hyp = torch.tensor([[rng.randint(0, 4) for _ in range(20)] for _ in range(4)])
    ref_len = torch.tensor([150, 70, 0, 64])
    masks = match_masks(ref, ref_len, hyp)  # (B, N, W)
    for b in range(4):
        for j in range(20):
            expected = sum(1 << i for i in range(int(ref_len[b])) if ref[b, i] == hyp[b, j])
            assert sum(as_unsigned(int(word)) << (64 * w) for w, word in enumerate(masks[b, j])) == expected


def test_skew_round_trip():
    columns = torch.arange(2 * 5 * 3).view(2, 5, 3)
    assert torch.equal(unskew(skew(columns), 5), columns)


def code_points(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded code points (B, L) and lengths (B,)."""
    width = max(map(len, texts))
    rows = [[ord(char) for char in text] + [-1] * (width - len(text)) for text in texts]
    return torch.tensor(rows), torch.tensor([len(text) for text in texts])


def test_multi_word_patterns_match_rapidfuzz():
    rng = random.Random(1)
    refs = ["".join(rng.choices("abcd", k=length)) for length in (63, 64, 65, 128, 129, 300)]
    hyps = ["".join(rng.choices("abcd", k=length)) for length in (70, 1, 200, 128, 100, 310)]
    distance, _ = myers(*code_points(refs), *code_points(hyps), record=False)
    assert distance.tolist() == [Levenshtein.distance(ref, hyp) for ref, hyp in zip(refs, hyps)]
