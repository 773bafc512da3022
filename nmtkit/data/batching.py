"""The length-bucketed, token-budget batcher of training, translation and alignment. It imports neither torch nor
numpy, so that translating with an exported model never does (`nmtkit.hypotheses`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def token_batches(src_lens: Sequence[int], tgt_lens: Sequence[int], max_tokens: int,
                  rng: np.random.Generator | None = None) -> list[list[int]]:
    """Group sentences of similar length so that batch_size * longest (padding included) <= max_tokens.

    Sentences are sorted by target then source length (ties broken at random when `rng` is given, else kept in
    input order), cut greedily into batches, and the batch order is shuffled by `rng`. A sentence longer than the
    budget forms a batch of its own. The one batcher of training, translation and alignment: translation, which
    has no target yet, gives the source lengths for both sides; alignment gives each pair's longer side.
    """
    src_lens = [int(length) + 1 for length in src_lens]  # EOS
    tgt_lens = [int(length) + 1 for length in tgt_lens]  # BOS
    if not src_lens:
        return []
    if rng is not None:  # the caller's generator: numpy is loaded
        import numpy as np

        order = np.lexsort((rng.random(len(src_lens)), src_lens, tgt_lens)).tolist()
    else:  # sorted() is stable: input order among equals
        order = sorted(range(len(src_lens)), key=lambda index: (tgt_lens[index], src_lens[index]))
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
