"""The length-bucketed, token-budget batcher of training, translation and alignment. It imports no torch, so that
translating with an exported model never does (`nmtkit.hypotheses`)."""

from __future__ import annotations

import numpy as np


def token_batches(src_lens: np.ndarray | list[int], tgt_lens: np.ndarray | list[int], max_tokens: int,
                  rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Group sentences of similar length so that batch_size * longest (padding included) <= max_tokens.

    Sentences are sorted by target then source length (ties broken at random when `rng` is given, else kept in
    input order), cut greedily into batches, and the batch order is shuffled by `rng`. A sentence longer than the
    budget forms a batch of its own. The one batcher of training, translation and alignment: translation, which
    has no target yet, gives the source lengths for both sides; alignment gives each pair's longer side.
    """
    src_lens = np.asarray(src_lens, dtype=np.int64) + 1  # EOS
    tgt_lens = np.asarray(tgt_lens, dtype=np.int64) + 1  # BOS
    if not len(src_lens):
        return []
    ties = rng.random(len(src_lens)) if rng is not None else np.arange(len(src_lens))
    order = np.lexsort((ties, src_lens, tgt_lens))
    batches, start, longest = [], 0, 0
    for pos, index in enumerate(order):
        candidate = max(longest, src_lens[index], tgt_lens[index])
        if pos > start and candidate * (pos - start + 1) > max_tokens:
            batches.append(order[start:pos])
            start, candidate = pos, max(src_lens[index], tgt_lens[index])
        longest = candidate
    batches.append(order[start:])
    if rng is not None:
        rng.shuffle(batches)
    return batches
