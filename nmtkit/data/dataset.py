"""Binarized token arrays, padding/collation, and training batches from the token-budget batcher
(`nmtkit.data.batching`)."""

from __future__ import annotations

import os
import shutil
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from nmtkit.data.batching import token_batches
from nmtkit.data.subword import BOS, EOS, PAD


class TokenArray:
    """Variable-length int sequences stored flat with offsets; loaded through memory maps."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray):
        self.tokens = tokens
        self.offsets = offsets
        self._lengths: np.ndarray | None = None
        self._fd: int | None = None  # see `load`

    @classmethod
    def from_lists(cls, seqs: list[list[int]]) -> TokenArray:
        lengths = np.fromiter((len(seq) for seq in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = np.fromiter((tok for seq in seqs for tok in seq), dtype=np.int32, count=int(offsets[-1]))
        return cls(tokens, offsets)

    def save(self, prefix: Path) -> None:
        np.save(f"{prefix}.tok.npy", self.tokens)
        np.save(f"{prefix}.off.npy", self.offsets)

    @classmethod
    def load(cls, prefix: Path, random_access: bool = False) -> TokenArray:
        """The arrays of `prefix`, the tokens memory-mapped. With `random_access` (training's batches of lines
        from all over the file) a line is read by `os.pread` instead: through the map, each line read maps the
        cached pages around it too (the kernel's fault-around), and a process that has read a few hundred random
        batches of 10M pairs counts 2.3 GB of the file as its own resident memory."""
        array = cls(np.load(f"{prefix}.tok.npy", mmap_mode="r"), np.load(f"{prefix}.off.npy"))
        if random_access and hasattr(os, "pread") and isinstance(array.tokens, np.memmap):
            array._fd = os.open(f"{prefix}.tok.npy", os.O_RDONLY)
            weakref.finalize(array, os.close, array._fd)
        return array

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        if self._fd is None:
            return self.tokens[start:end]
        data = os.pread(self._fd, (end - start) * 4, self.tokens.offset + start * 4)
        return np.frombuffer(data, dtype=np.int32)

    def lengths(self) -> np.ndarray:
        """Each sequence's length (int32, computed once: 4 bytes a line; do not modify it)."""
        if self._lengths is None:
            self._lengths = np.diff(self.offsets).astype(np.int32)
        return self._lengths


class TokenWriter:
    """Writes a TokenArray (`prefix.tok.npy`, `prefix.off.npy`) from sequences appended in chunks, holding one
    chunk in memory: the tokens and the offsets go to raw files first, then behind their .npy headers."""

    def __init__(self, prefix: Path):
        self.prefix, self.lines, self.tokens = prefix, 0, 0
        # closed in close()
        self.raw = {part: open(f"{prefix}.{part}.raw", "wb") for part in ("tok", "off")}  # noqa: SIM115

    def append(self, seqs: list[list[int]]) -> None:
        chunk = TokenArray.from_lists(seqs)
        chunk.tokens.tofile(self.raw["tok"])
        (chunk.offsets[1:] + self.tokens).tofile(self.raw["off"])
        self.lines, self.tokens = self.lines + len(chunk), self.tokens + int(chunk.offsets[-1])

    def close(self) -> None:
        """Each .npy header, then the raw file copied behind it by plain file writes (through a memory map, every
        page written would stay mapped: a process as large as the file). `lines` and `tokens` say what was written;
        `TokenArray.load(prefix)` reads it."""
        for part, dtype, shape, first in (("tok", np.int32, self.tokens, b""),
                                          ("off", np.int64, self.lines + 1, np.zeros(1, np.int64).tobytes())):
            self.raw[part].close()
            raw = Path(f"{self.prefix}.{part}.raw")
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                      "shape": (shape,)}
            with open(f"{self.prefix}.{part}.npy", "wb") as out, open(raw, "rb") as source:
                np.lib.format.write_array_header_1_0(out, header)
                out.write(first)
                shutil.copyfileobj(source, out, 1 << 24)
            raw.unlink()


@dataclass
class Batch:
    src: Tensor  # (B, S) source ids + EOS, right-padded
    src_mask: Tensor  # (B, S) True on real tokens
    tgt_in: Tensor  # (B, T) BOS + target ids
    tgt_out: Tensor  # (B, T) target ids + EOS, PAD where padded
    indices: np.ndarray  # positions of the sentences in the split

    def to(self, device: torch.device) -> Batch:
        move = {"non_blocking": True}
        return Batch(self.src.to(device, **move), self.src_mask.to(device, **move),
                     self.tgt_in.to(device, **move), self.tgt_out.to(device, **move), self.indices)

    @property
    def num_tgt_tokens(self) -> int:
        return int((self.tgt_out != PAD).sum())

    def split(self) -> list[Batch]:
        """Two batches of half the sentences each, trimmed of padding columns (one batch if it holds one)."""
        if len(self.indices) < 2:
            return [self]
        half = len(self.indices) // 2
        return [self._rows(slice(0, half)), self._rows(slice(half, None))]

    def _rows(self, rows: slice) -> Batch:
        src_len = int(self.src_mask[rows].sum(dim=1).max())
        tgt_len = int((self.tgt_out[rows] != PAD).sum(dim=1).max())
        return Batch(self.src[rows, :src_len], self.src_mask[rows, :src_len], self.tgt_in[rows, :tgt_len],
                     self.tgt_out[rows, :tgt_len], self.indices[rows])


def pad_sequences(seqs: list[np.ndarray], prefix: list[int], suffix: list[int]) -> Tensor:
    """Stack sequences with optional BOS prefix / EOS suffix into a right-padded (B, L) LongTensor."""
    length = max(len(seq) for seq in seqs) + len(prefix) + len(suffix)
    out = torch.full((len(seqs), length), PAD, dtype=torch.long)
    for row, seq in enumerate(seqs):
        full = prefix + [int(tok) for tok in seq] + suffix
        out[row, : len(full)] = torch.tensor(full, dtype=torch.long)
    return out


def encode_sources(seqs: list[np.ndarray] | list[list[int]]) -> tuple[Tensor, Tensor]:
    """Source tensor with EOS appended and its mask (True on real tokens)."""
    src = pad_sequences(list(seqs), [], [EOS])
    return src, src != PAD


def collate(src: TokenArray, tgt: TokenArray, indices: np.ndarray) -> Batch:
    return collate_pairs([src[i] for i in indices], [tgt[i] for i in indices], indices)


def collate_pairs(src_seqs: list, tgt_seqs: list, indices: np.ndarray) -> Batch:
    """The batch of lines `indices` of the split, holding these sequences (theirs, or modified on the fly:
    `nmtkit.training.modifiers`)."""
    src_ids, src_mask = encode_sources(src_seqs)
    return Batch(src_ids, src_mask, pad_sequences(tgt_seqs, [BOS], []), pad_sequences(tgt_seqs, [], [EOS]), indices)


class ParallelData:
    """One binarized split of a data directory, without the pairs longer than `max_length` positions (a side's
    tokens plus its EOS or BOS) when that is given."""

    def __init__(self, data_dir: Path, split: str, max_length: int | None = None):
        self.src = TokenArray.load(data_dir / f"{split}.src", random_access=True)
        self.tgt = TokenArray.load(data_dir / f"{split}.tgt", random_access=True)
        longest = np.maximum(self.src.lengths(), self.tgt.lengths()) + 1
        self.max_length = max_length  # what a pair modified on the fly keeps to (`nmtkit.training.modifiers`)
        self.kept = np.arange(len(self.src)) if max_length is None else np.flatnonzero(longest <= max_length)
        corpus = data_dir / f"{split}.corpus.npy"  # the language pair of each line, in a multilingual directory
        self.corpus = np.load(corpus) if corpus.exists() else None

    def __len__(self) -> int:
        return len(self.kept)

    @property
    def left_out(self) -> int:
        return len(self.src) - len(self.kept)

    def epoch_batches(self, max_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """The same batches of the kept pairs for the same (seed, epoch): what makes resuming mid-epoch exact.
        (Training mixes multilingual data's pairs: `nmtkit.training.mix`.)"""
        return self.batches_of(self.kept, max_tokens, np.random.default_rng([seed, epoch]))

    def batches_of(self, lines: np.ndarray, max_tokens: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Token-budget batches of `lines` (indices into the split) in `rng`'s order."""
        batches = token_batches(self.src.lengths()[lines], self.tgt.lengths()[lines], max_tokens, rng)
        return [lines[batch] for batch in batches]

    def batch(self, indices: np.ndarray) -> Batch:
        return collate(self.src, self.tgt, indices)
