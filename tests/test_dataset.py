"""Tests for nmtkit/data/dataset.py: token arrays, the token-budget batch sampler and collation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nmtkit.data.dataset import ParallelData, TokenArray, TokenWriter, collate, encode_sources, token_batches
from nmtkit.data.subword import BOS, EOS, PAD


def random_sequences(rng: np.random.Generator, count: int, max_len: int) -> list[list[int]]:
    return [rng.integers(4, 50, size=rng.integers(0, max_len + 1)).tolist() for _ in range(count)]


def test_token_array_round_trip(tmp_path):
    seqs = [[5, 6, 7], [], [8], [9, 10, 11, 12, 13]]
    array = TokenArray.from_lists(seqs)
    array.save(tmp_path / "train.src")
    loaded = TokenArray.load(tmp_path / "train.src")
    assert len(loaded) == len(seqs)
    assert [loaded[i].tolist() for i in range(len(loaded))] == seqs
    assert loaded.lengths().tolist() == [3, 0, 1, 5]


def test_random_access_reads_each_line_as_the_memory_map_does(tmp_path):
    """Training's reader (`os.pread` per line, so that random batches do not map the file into the process) and
    the memory map give the same lines, in any order, empty ones included."""
    seqs = random_sequences(np.random.default_rng(3), 200, 30) + [[]]
    writer = TokenWriter(tmp_path / "t")
    writer.append(seqs)
    writer.close()
    mapped, read = TokenArray.load(tmp_path / "t"), TokenArray.load(tmp_path / "t", random_access=True)
    order = np.random.default_rng(4).permutation(len(seqs))
    assert [read[i].tolist() for i in order] == [mapped[i].tolist() for i in order] == [seqs[i] for i in order]
    assert read[len(seqs) - 1].dtype == np.int32 and read.lengths().tolist() == [len(seq) for seq in seqs]


def test_token_writer_appends_chunks_into_the_array_from_lists(tmp_path):
    rng = np.random.default_rng(2)
    seqs = random_sequences(rng, 100, 9) + [[]]
    writer = TokenWriter(tmp_path / "w")
    for start in range(0, len(seqs), 30):
        writer.append(seqs[start : start + 30])
    writer.close()
    written = TokenArray.load(tmp_path / "w")
    assert [written[i].tolist() for i in range(len(written))] == seqs
    assert (writer.lines, writer.tokens) == (len(seqs), sum(map(len, seqs)))
    TokenArray.from_lists(seqs).save(tmp_path / "whole")
    for part in ("tok", "off"):
        assert (tmp_path / f"w.{part}.npy").read_bytes() == (tmp_path / f"whole.{part}.npy").read_bytes()
    assert not (tmp_path / "w.tok.raw").exists() and not (tmp_path / "w.off.raw").exists()
    empty = TokenWriter(tmp_path / "e")
    empty.append([[], []])
    empty.close()
    assert len(TokenArray.load(tmp_path / "e")) == 2 and (empty.lines, empty.tokens) == (2, 0)


@pytest.mark.parametrize("max_tokens", [1, 8, 30, 200])
def test_token_batches_cover_every_sentence_once_within_budget(max_tokens):
    rng = np.random.default_rng(0)
    src_lens, tgt_lens = rng.integers(0, 20, size=57), rng.integers(0, 20, size=57)
    batches = token_batches(src_lens, tgt_lens, max_tokens, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(57))
    for batch in batches:
        longest = max(max(src_lens[batch] + 1), max(tgt_lens[batch] + 1))
        assert len(batch) == 1 or len(batch) * longest <= max_tokens


def test_token_batches_are_full_enough():
    src_lens, tgt_lens = np.full(40, 4), np.full(40, 4)
    batches = token_batches(src_lens, tgt_lens, 25, None)
    assert [len(batch) for batch in batches] == [5] * 8


def test_token_batches_are_deterministic_for_a_seed():
    rng = np.random.default_rng(0)
    src_lens, tgt_lens = rng.integers(0, 20, size=60), rng.integers(0, 20, size=60)
    first, second, other = ([batch.tolist() for batch in token_batches(src_lens, tgt_lens, 40,
                                                                       np.random.default_rng(seed))]
                            for seed in (7, 7, 8))
    assert first == second
    assert first != other


def test_token_batches_of_training_cut_the_sorted_order_as_without_a_generator():
    """Where no two pairs have the same lengths, the random tie-break has nothing to do: the training path (numpy)
    and the plain one (lists) cut the same batches, in another order."""
    keys = np.random.default_rng(2).choice(40 * 40, size=300, replace=False)
    src_lens, tgt_lens = keys % 40, keys // 40
    for max_tokens in (1, 30, 90, 400):
        shuffled = token_batches(src_lens, tgt_lens, max_tokens, np.random.default_rng(5))
        plain = token_batches(src_lens, tgt_lens, max_tokens)
        assert all(isinstance(batch, np.ndarray) and batch.dtype.kind == "i" for batch in shuffled)
        shuffled = [batch.tolist() for batch in shuffled]
        assert sorted(map(tuple, shuffled)) == sorted(map(tuple, plain)) and shuffled != plain


def test_token_batches_of_one_side_cover_every_index_within_budget():
    """Translation's use (source lengths for both sides): sorted by length, input order among equals."""
    lengths = [5, 1, 9, 3, 3, 7, 2, 8]
    batches = token_batches(lengths, lengths, max_tokens=12)
    assert sorted(index for batch in batches for index in batch) == list(range(8))
    assert all(len(batch) == 1 or len(batch) * (max(lengths[i] for i in batch) + 1) <= 12 for batch in batches)
    assert np.concatenate(batches).tolist() == sorted(range(8), key=lambda index: lengths[index])
    assert token_batches([], [], 12) == []


def write_split(directory, split: str, src: list[list[int]], tgt: list[list[int]]) -> None:
    TokenArray.from_lists(src).save(directory / f"{split}.src")
    TokenArray.from_lists(tgt).save(directory / f"{split}.tgt")


def test_epoch_batches_repeat_per_epoch_and_differ_between_epochs(tmp_path):
    rng = np.random.default_rng(3)
    write_split(tmp_path, "train", random_sequences(rng, 60, 12), random_sequences(rng, 60, 12))
    data = ParallelData(tmp_path, "train")
    assert len(data) == 60

    def listed(epoch: int, seed: int = 1) -> list[list[int]]:
        return [batch.tolist() for batch in data.epoch_batches(30, seed, epoch)]

    assert listed(0) == listed(0)
    assert listed(0) != listed(1)
    assert listed(0, seed=1) != listed(0, seed=2)
    assert sorted(sum(listed(1), [])) == list(range(60))


def test_pairs_longer_than_max_length_are_left_out_of_the_batches(tmp_path):
    src, tgt = [[1] * 3, [1] * 9, [1] * 2, [1] * 4], [[2] * 3, [2] * 2, [2] * 8, [2] * 4]
    write_split(tmp_path, "train", src, tgt)
    data = ParallelData(tmp_path, "train", max_length=5)  # four tokens and EOS fit
    assert data.kept.tolist() == [0, 3] and len(data) == 2 and data.left_out == 2
    assert sorted(np.concatenate(data.epoch_batches(100, 0, 0)).tolist()) == [0, 3]
    assert ParallelData(tmp_path, "train").left_out == 0


def test_collate_adds_bos_eos_and_masks_real_tokens():
    src_seqs = [[5, 6], [7, 8, 9, 10], [11]]
    tgt_seqs = [[12, 13, 14], [15], [16, 17]]
    indices = np.array([2, 0, 1])
    batch = collate(TokenArray.from_lists(src_seqs), TokenArray.from_lists(tgt_seqs), indices)
    assert batch.indices.tolist() == [2, 0, 1]
    assert batch.tgt_in.shape == batch.tgt_out.shape == (3, 4)
    assert batch.src.shape == batch.src_mask.shape == (3, 5)
    assert batch.src_mask.dtype == torch.bool
    for row, index in enumerate(indices):
        src, tgt = src_seqs[index], tgt_seqs[index]
        assert batch.src[row].tolist() == src + [EOS] + [PAD] * (4 - len(src))
        assert batch.src_mask[row].tolist() == [True] * (len(src) + 1) + [False] * (4 - len(src))
        assert batch.tgt_in[row].tolist() == [BOS] + tgt + [PAD] * (3 - len(tgt))
        assert batch.tgt_out[row].tolist() == tgt + [EOS] + [PAD] * (3 - len(tgt))
    assert batch.num_tgt_tokens == sum(len(seq) + 1 for seq in tgt_seqs)


def test_encode_sources_matches_collate():
    src, src_mask = encode_sources([[4, 5, 6], [7]])
    assert src.tolist() == [[4, 5, 6, EOS], [7, EOS, PAD, PAD]]
    assert src_mask.tolist() == [[True] * 4, [True, True, False, False]]


def test_batch_split_halves_the_sentences_and_trims_padding():
    src = [[5, 6, 7, 8, 9], [5], [6, 7], [8]]
    tgt = [[9], [4, 5, 6, 7], [4], [5, 6]]
    batch = collate(TokenArray.from_lists(src), TokenArray.from_lists(tgt), np.arange(4))
    first, second = batch.split()
    assert first.indices.tolist() == [0, 1] and second.indices.tolist() == [2, 3]
    for half, rows in ((first, [0, 1]), (second, [2, 3])):
        alone = collate(TokenArray.from_lists([src[i] for i in rows]), TokenArray.from_lists([tgt[i] for i in rows]),
                        np.arange(2))
        for name in ("src", "src_mask", "tgt_in", "tgt_out"):
            assert torch.equal(getattr(half, name), getattr(alone, name)), name
    assert first.num_tgt_tokens + second.num_tgt_tokens == batch.num_tgt_tokens
    single = collate(TokenArray.from_lists(src[:1]), TokenArray.from_lists(tgt[:1]), np.arange(1))
    assert single.split() == [single]
