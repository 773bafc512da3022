"""Sentences as ragged token tensors, and clipped n-gram matches counted on a torch device (BLEU and chrF).

Every token becomes a 64-bit value (Python's string hash, or a character's code point) scrambled by the
splitmix64 finalizer; an n-gram's key is a polynomial hash of its tokens. The keys of one order are sorted
within each sentence, and for every hypothesis n-gram a binary search into the sorted reference keys tells
whether the reference holds at least as many copies of it: summed, that is the clipped count
sum_g min(count_hyp(g), count_ref(g)) of Papineni et al. (2002), Eq. 1, with no Python loop over n-grams.
Keys are compared only within a sentence, so two different n-grams of one sentence would have to share a
64-bit key for a count to be wrong.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from nmtkit.errors import NmtkitError

PAD = torch.iinfo(torch.int64).max  # odd, so it never equals a key (keys are even)
CPU_BUDGET = 1 << 18  # padded tokens per batch: small batches of similar length waste little on padding
CUDA_BUDGET = 1 << 24  # a GPU wants many rows per kernel
CPU_CHUNK = 1 << 23  # characters of text (hypotheses and references together) tokenized and scored at once
CUDA_CHUNK = 1 << 26  # larger on a GPU, whose batches are larger


def on_one_thread(function: Callable) -> Callable:
    """Run `function` with torch on one CPU thread (restored after).

    Metric kernels are small and memory-bound; OpenMP threads spinning at every kernel's barrier made them ten
    times slower with two threads on a busy two-core machine.
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return function(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return wrapper


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


MIX1, MIX2 = _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)
MULTIPLIER = _signed(0x9E3779B97F4A7C15)


def shift_right(values: Tensor, bits: int) -> Tensor:
    """Logical right shift of int64 values (torch's >> keeps the sign)."""
    return (values >> bits) & ((1 << (64 - bits)) - 1)


def mix64(values: Tensor) -> Tensor:
    """The splitmix64 finalizer (Steele et al. 2014): a bijection that scrambles every bit of an int64."""
    values = (values ^ shift_right(values, 30)) * MIX1
    values = (values ^ shift_right(values, 27)) * MIX2
    return values ^ shift_right(values, 31)


@dataclass
class Ragged:
    """N sentences as one flat tensor of scrambled token values.

    values (T + 1,) ends with one PAD that padding reads; lengths (N,); offsets (N,) into values.
    """

    values: Tensor
    lengths: Tensor
    offsets: Tensor

    @classmethod
    def build(cls, values: np.ndarray, lengths: np.ndarray, device: torch.device) -> Ragged:
        flat = mix64(torch.from_numpy(values.astype(np.int64, copy=False)).to(device))
        counts = torch.from_numpy(lengths.astype(np.int64, copy=False)).to(device)
        return cls(torch.cat([flat, flat.new_full((1,), PAD)]), counts, torch.cumsum(counts, 0) - counts)

    def padded(self, rows: Tensor) -> Tensor:
        """Tokens of sentences `rows` padded with PAD to the longest of them (at least 1): (B, L)."""
        lengths = self.lengths[rows]  # (B,)
        positions = torch.arange(max(int(lengths.max()), 1) if len(rows) else 1, device=rows.device)  # (L,)
        inside = positions < lengths[:, None]  # (B, L)
        return self.values[torch.where(inside, self.offsets[rows, None] + positions, len(self.values) - 1)]


def hash_words(lines: Sequence[str], separator: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of the words of all lines (T,) and words per line (N,); empty words are dropped.

    Words are `line.split(separator)`; a word's value is Python's 64-bit string hash. Splitting the joined
    text, rather than keeping a list per line alive, spares the garbage collector millions of lists.
    """
    pieces = (line.split(separator) for line in lines)
    lengths = np.fromiter((len(words) - words.count("") for words in pieces), dtype=np.int64, count=len(lines))
    words = (separator or " ").join(lines).split(separator)
    if separator is not None:
        words = [word for word in words if word]
    return np.fromiter(map(hash, words), dtype=np.int64, count=len(words)), lengths


def char_tokens(lines: Sequence[str], device: torch.device) -> Ragged:
    """Ragged tokens of the characters of each line (Unicode code points)."""
    lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    encoded = "".join(lines).encode("utf-32-le", "surrogatepass")
    return Ragged.build(np.frombuffer(encoded, dtype="<u4"), lengths, device)


def _batch_end(ordered: list[int], start: int, budget: int) -> int:
    """End of the longest run from `start` whose rows * largest size fits the budget (at least one row)."""
    fits = bisect.bisect_right(range(start, len(ordered)), budget,
                               key=lambda index: (index - start + 1) * ordered[index])
    return start + max(fits, 1)


def default_budget(device: torch.device) -> int:
    return CPU_BUDGET if device.type == "cpu" else CUDA_BUDGET


def default_chunk(device: torch.device) -> int:
    return CPU_CHUNK if device.type == "cpu" else CUDA_CHUNK


def line_chunks(streams: Sequence[Sequence[str]], budget: int) -> Iterator[np.ndarray]:
    """Line numbers of line-aligned streams, ordered by width (the longest of a line's versions), in runs of at
    most `budget` characters in all streams (newlines counted; at least one line a run). No lines give one
    empty run. Sentences of similar widths share a run, so its batches are those of the whole corpus."""
    sizes = np.stack([np.fromiter(map(len, stream), dtype=np.int64, count=len(stream)) for stream in streams])
    order = np.argsort(sizes.max(axis=0), kind="stable")  # sizes (S, N)
    bounds = np.concatenate([[0], np.cumsum(sizes.sum(axis=0)[order] + len(streams))])  # characters before each
    start = 0
    while True:
        end = min(max(int(np.searchsorted(bounds, bounds[start] + budget, side="right")) - 1, start + 1), len(order))
        yield order[start:end]
        if end >= len(order):
            return
        start = end


def chunked(statistics: Callable[[list[str], list[list[str]]], Tensor], hypotheses: Sequence[str],
            references: Sequence[Sequence[str]], budget: int) -> Tensor:
    """`statistics(hypotheses, references)` (N, K) computed on runs of lines of at most `budget` characters.

    A sentence's statistics do not depend on the other sentences, and corpus scores are formulas over their
    sums, so this is exactly one call on the whole corpus, in memory bounded by the run instead of the corpus.
    """
    for stream in references:
        if len(stream) != len(hypotheses):
            raise NmtkitError(f"{len(hypotheses)} hypotheses for {len(stream)} references")
    parts, runs = [], []
    for lines in line_chunks([hypotheses, *references], budget):
        numbers = lines.tolist()
        picked = [[stream[number] for number in numbers] for stream in [hypotheses, *references]]
        parts.append(statistics(picked[0], picked[1:]))
        runs.append(lines)
    ordered = torch.cat(parts)
    stats = torch.empty_like(ordered)
    stats[torch.from_numpy(np.concatenate(runs))] = ordered  # back in input order
    return stats


def length_batches(sizes: np.ndarray, budget: int) -> Iterator[np.ndarray]:
    """Sentence indices sorted by size (e.g. length), cut so that rows * largest size <= budget (or one row)."""
    order = np.argsort(sizes, kind="stable")
    ordered = np.maximum(sizes[order], 1).tolist()
    start = 0
    while start < len(order):
        end = _batch_end(ordered, start, budget)
        yield order[start:end]
        start = end


def ngram_keys(tokens: Tensor, max_order: int) -> Iterator[Tensor]:
    """Keys of the n-grams of orders 1..max_order, PAD where an n-gram runs past the sentence: (B, L - n + 1)."""
    keys = tokens
    for order in range(1, max_order + 1):
        if order > 1:
            keys = keys[:, :-1] * MULTIPLIER + tokens[:, order - 1:]  # (B, L - n + 1)
        inside = tokens[:, order - 1:] != PAD  # (B, L - n + 1)
        yield torch.where(inside, keys & -2, PAD)  # even keys never equal PAD


def sort_rows(keys: Tensor) -> Tensor:
    """Each row sorted ascending: (B, L). On the CPU numpy's SIMD sort is about ten times faster than torch's."""
    if keys.device.type == "cpu":
        return torch.from_numpy(np.sort(keys.numpy(), axis=1))
    return torch.sort(keys, dim=1).values


def rank_in_run(keys: Tensor) -> Tensor:
    """For sorted rows, how many equal keys precede each key in its row: (B, L)."""
    return torch.arange(keys.shape[1], device=keys.device) - torch.searchsorted(keys, keys)


def found_in(hyp: Tensor, rank: Tensor, ref: Tensor) -> Tensor:
    """Whether the reference row holds more copies of each hypothesis key than `rank`: (B, Lh) bool.

    hyp and ref are sorted rows; a key's (rank+1)-th copy is matched exactly when the reference has at least
    rank+1 copies, so summing this mask over a row gives sum_g min(count_hyp(g), count_ref(g)).
    """
    if ref.shape[1] == 0:
        return torch.zeros_like(hyp, dtype=torch.bool)
    position = torch.searchsorted(ref, hyp) + rank  # (B, Lh)
    inside = position < ref.shape[1]
    return inside & (ref.gather(1, position.clamp(max=ref.shape[1] - 1)) == hyp) & (hyp != PAD)
