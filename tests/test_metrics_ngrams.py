"""Ragged token tensors, n-gram keys and clipped matching: the counting that BLEU and chrF share."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtkit.errors import NmtkitError
from nmtkit.metrics.ngrams import (
    PAD,
    Ragged,
    char_tokens,
    chunked,
    found_in,
    hash_words,
    length_batches,
    line_chunks,
    mix64,
    ngram_keys,
    rank_in_run,
    sort_rows,
)

CPU = torch.device("cpu")
SENTENCES = st.lists(st.lists(st.integers(0, 4), max_size=9), min_size=1, max_size=8)


def splitmix64(value: int) -> int:
    mask = (1 << 64) - 1
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & mask
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & mask
    return value ^ (value >> 31)


def test_mix64_is_splitmix64():
    values = [0, 1, 2, 12345, (1 << 63) - 1, -1, -(1 << 63)]
    mixed = mix64(torch.tensor(values)).tolist()
    assert [value % (1 << 64) for value in mixed] == [splitmix64(value % (1 << 64)) for value in values]


def test_hash_words_splits_like_python():
    lines = ["a  b\tc", "", "  ", "x", "a\u00a0b c"]
    hashes, lengths = hash_words(lines)
    assert lengths.tolist() == [len(line.split()) for line in lines]
    assert hashes.tolist() == [hash(word) for line in lines for word in line.split()]
    hashes, lengths = hash_words(lines, " ")
    assert lengths.tolist() == [len([word for word in line.split(" ") if word]) for line in lines]
    assert len(hashes) == sum(lengths)


def test_char_tokens_count_code_points():
    tokens = char_tokens(["日本🙂", "", "ab"], CPU)
    assert tokens.lengths.tolist() == [3, 0, 2]
    padded = tokens.padded(torch.tensor([1, 0]))
    assert padded.shape == (2, 3) and (padded[0] == PAD).all() and (padded[1] != PAD).all()


def test_length_batches_cover_every_sentence_within_the_budget():
    lengths = np.random.default_rng(0).integers(0, 50, size=1000)
    batches = list(length_batches(lengths, 200))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    assert all(len(batch) == 1 or len(batch) * max(lengths[batch].max(), 1) <= 200 for batch in batches)


@pytest.mark.parametrize("budget", [1, 10, 40, 10**9])
def test_line_chunks_cover_every_line_once_by_width_within_the_budget(budget):
    rng = np.random.default_rng(1)
    hyps, refs = ([" " * length for length in rng.integers(0, 20, size=300)] for _ in range(2))
    runs = list(line_chunks([hyps, refs], budget))
    order = np.concatenate(runs)
    assert sorted(order.tolist()) == list(range(300))
    widths = [max(len(hyps[line]), len(refs[line])) for line in order]
    assert widths == sorted(widths)
    assert all(len(run) == 1 or sum(len(hyps[line]) + len(refs[line]) + 2 for line in run) <= budget for run in runs)
    assert [run.tolist() for run in line_chunks([[], []], budget)] == [[]]


def test_chunked_statistics_come_back_in_input_order():
    def statistics(hyps, refs):  # (n, 2): the line's hypothesis and reference lengths
        return torch.tensor([[len(hyp), len(ref)] for hyp, ref in zip(hyps, refs[0])]).view(-1, 2)

    hyps, refs = ["abc", "", "a", "abcdefgh", "ab"], ["x", "xyz", "", "xy", "wxyz"]
    expected = statistics(hyps, [refs])
    for budget in (1, 7, 10**9):
        assert torch.equal(chunked(statistics, hyps, [refs], budget), expected)
    with pytest.raises(NmtkitError, match="5 hypotheses for 4 references"):
        chunked(statistics, hyps, [refs[:4]], 10)


def ragged(sentences) -> Ragged:
    lengths = np.array([len(sentence) for sentence in sentences])
    values = np.array([token for sentence in sentences for token in sentence], dtype=np.int64)
    return Ragged.build(values, lengths, CPU)


@settings(max_examples=80, deadline=None)
@given(SENTENCES, st.data())
def test_matches_are_clipped_counts(hyps, data):
    refs = data.draw(st.lists(st.lists(st.integers(0, 4), max_size=9), min_size=len(hyps), max_size=len(hyps)))
    rows = torch.arange(len(hyps))
    hyp_orders, ref_orders = ngram_keys(ragged(hyps).padded(rows), 3), ngram_keys(ragged(refs).padded(rows), 3)
    for order, (hyp_keys, ref_keys) in enumerate(zip(hyp_orders, ref_orders), 1):
        hyp_keys, ref_keys = sort_rows(hyp_keys), sort_rows(ref_keys)
        matches = found_in(hyp_keys, rank_in_run(hyp_keys), ref_keys).sum(dim=1).tolist()
        for hyp, ref, count in zip(hyps, refs, matches):
            hyp_grams = Counter(tuple(hyp[i:i + order]) for i in range(len(hyp) - order + 1))
            ref_grams = Counter(tuple(ref[i:i + order]) for i in range(len(ref) - order + 1))
            assert count == sum((hyp_grams & ref_grams).values())
