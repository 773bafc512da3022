"""The length-bucketed, token-budget batcher of training, translation and alignment. It imports neither torch nor
numpy, so that translating with an exported model never does (`nmtkit.decoding.hypotheses`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def token_batches(src_lens: Sequence[int], tgt_lens: Sequence[int], max_tokens: int,
                  rng: np.random.Generator | None = None) -> list[list[int]] | list[np.ndarray]:
    """Group sentences of similar length so that batch_size * longest (padding included) <= max_tokens.

    Sentences are sorted by target then source length (ties broken at random when `rng` is given, else kept in
    input order), cut greedily into batches, and the batch order is shuffled by `rng` (then the batches are index
    arrays). A sentence longer than the budget forms a batch of its own. The one batcher of training, translation
    and alignment: translation, which has no target yet, gives the source lengths for both sides; alignment gives
    each pair's longer side.
    """
    if not len(src_lens):
        return []
    if rng is not None:  # training: the caller's generator, numpy loaded, and corpora of millions of pairs
        return _shuffled_batches(src_lens, tgt_lens, max_tokens, rng)
    src_lens = [int(length) + 1 for length in src_lens]  # EOS
    tgt_lens = [int(length) + 1 for length in tgt_lens]  # BOS
    order = sorted(range(len(src_lens)), key=lambda index: (tgt_lens[index], src_lens[index]))  # stable
    cuts = _cuts([max(src_lens[index], tgt_lens[index]) for index in order], max_tokens)
    return [order[start:end] for start, end in zip([0, *cuts], [*cuts, len(order)])]


def _shuffled_batches(src_lens: Sequence[int], tgt_lens: Sequence[int], max_tokens: int,
                      rng: np.random.Generator) -> list[np.ndarray]:
    """`token_batches` with `rng`: the lengths, the sort and the cuts in numpy arrays but for the one loop over
    the sorted lengths (about 0.4 s per million sentences, against 3 s in Python lists); the batches are index
    arrays (Python lists of ints would take 36 bytes a sentence)."""
    import numpy as np

    src, tgt = np.asarray(src_lens, dtype=np.int32) + 1, np.asarray(tgt_lens, dtype=np.int32) + 1  # EOS, BOS
    order = np.lexsort((rng.random(len(src)), src, tgt))
    longest = np.maximum(src, tgt)[order]
    del src, tgt
    cuts = _cuts(longest.tolist(), max_tokens)  # lengths are small ints: a list of them is 8 bytes an item
    batches = np.split(order, cuts)
    rng.shuffle(batches)
    return batches


def _cuts(longest: list[int], max_tokens: int) -> list[int]:
    """Where the greedy batches of items of padded lengths `longest` (in batch order) start, but the first."""
    cuts, start, batch_longest = [], 0, 0
    for position, length in enumerate(longest):
        batch_longest = max(batch_longest, length)
        if position > start and batch_longest * (position - start + 1) > max_tokens:
            cuts.append(position)
            start, batch_longest = position, length
    return cuts
