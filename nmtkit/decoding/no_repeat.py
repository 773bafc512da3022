"""`"no_repeat_ngram": n` in a request: the translation never writes the same n tokens (target pieces) twice, as
fairseq's `--no-repeat-ngram-size` and `transformers`' `no_repeat_ngram_size` do; a remedy for a model that loops
("the the the ..."). A `nmtkit.decoding.restriction.Restriction`: its state is each row's tokens so far."""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")


class NoRepeatNgram:
    """Each sentence's n (0: no restriction) for a batch; a row may not write the token that would end an n-gram it
    has written before."""

    def __init__(self, sizes: Tensor):
        self.sizes = sizes  # (B,)

    @classmethod
    def for_lines(cls, values: list, device: torch.device) -> NoRepeatNgram:
        """One value per line, None where a line does not ask; an n longer than any output is one (no overflow)."""
        return cls(torch.tensor([min(value or 0, 2**20) for value in values], dtype=torch.long, device=device))

    def initial_state(self, rows: int) -> Tensor:
        return torch.zeros(rows, 0, dtype=torch.long, device=self.sizes.device)

    def restrict(self, scores: Tensor, sentences: Tensor, state: Tensor, steps_left: Tensor) -> None:
        sizes = self.sizes[sentences].masked_fill(steps_left <= 0, 0)
        for size in sizes.unique().tolist():
            if 0 < size <= state.size(1):  # a row must have written an n-gram before to repeat it
                self._ban(scores, (sizes == size).nonzero().squeeze(1), state, size)

    @staticmethod
    def _ban(scores: Tensor, rows: Tensor, state: Tensor, size: int) -> None:
        """Ban, for `rows`, each token that followed an earlier occurrence of their last size-1 tokens."""
        written = state[rows]  # (r, t)
        grams = written.unfold(1, size, 1)  # (r, t - size + 1, size)
        tail = written[:, written.size(1) - size + 1:]  # (r, size - 1)
        repeats = (grams[:, :, :-1] == tail.unsqueeze(1)).all(dim=2)  # (r, t - size + 1)
        where, gram = repeats.nonzero(as_tuple=True)
        scores[rows[where], grams[where, gram, -1]] = NEG_INF

    def follow(self, state: Tensor, rows: Tensor, tokens: Tensor, sentences: Tensor) -> Tensor:
        return torch.cat([state[rows], tokens.unsqueeze(1)], dim=1)

    def take(self, sentences: Tensor) -> NoRepeatNgram:
        return NoRepeatNgram(self.sizes[sentences])
