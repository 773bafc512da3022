"""BPE-dropout (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword Regularization", Section 3) as an
on-the-fly modifier of training pairs (`bpe_dropout` in a stage's modifiers): both sides of every pair of the corpus
segmented anew by the BPE model's merges, each merge skipped with probability p, from the pair's own random
generator (seeded by train.seed, update and line, as the other modifiers are), so that `--resume` trains on the same
segmentations. `data.subword_samples` instead writes sampled copies of the corpus at prepare time.

SentencePiece samples BPE-dropout itself (`enable_sampling`), but from a generator of its own, one per thread and not
seedable per line: with sentencepiece 0.2.3 the same seed gives other samples in another process. So this module runs
SentencePiece's BPE merge loop (bpe_model.cc, `SampleEncode`) in Python: the characters of each run of ordinary
pieces, the adjacent pair whose union is the best-scored piece merged first (the leftmost among equals), a pair
skipped with probability p when its turn comes. Tags, placeholders' symbols and byte pieces stay as they are, as
SentencePiece never merges them. With p = 0 it gives SentencePiece's own segmentation back (tested).
"""

from __future__ import annotations

import heapq

import numpy as np
from sentencepiece import sentencepiece_model_pb2

from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError

NORMAL, BPE = 1, 2  # SentencePiece's ModelProto piece type and trainer model type


class BpeDropout:
    """A BPE subword model's merges, for segmenting ids anew with dropout."""

    def __init__(self, subword: Subword):
        model = sentencepiece_model_pb2.ModelProto.FromString(subword.proto)
        if model.trainer_spec.model_type != BPE:
            raise NmtkitError("the bpe_dropout modifier needs a bpe subword model (data.subword=bpe); this data "
                              "directory's is not one (unigram models sample with data.subword_samples)")
        self.pieces = [piece.piece for piece in model.pieces]
        self.normal = {piece.piece: (index, piece.score) for index, piece in enumerate(model.pieces)
                       if piece.type == NORMAL}

    def __call__(self, ids: list[int], dropout: float, rng: np.random.Generator) -> list[int]:
        """`ids` segmented anew: each run of ordinary pieces merged again from its characters."""
        out: list[int] = []
        run: list[str] = []
        for index in ids:
            if self.pieces[index] in self.normal:
                run.append(self.pieces[index])
                continue
            out += [*self.merged(run, dropout, rng), index]
            run = []
        return out + self.merged(run, dropout, rng)

    def merged(self, run: list[str], dropout: float, rng: np.random.Generator) -> list[int]:
        """The ids of the pieces `run`'s characters merge into."""
        chars = [char for piece in run for char in piece]
        if not all(char in self.normal for char in chars):  # a character SentencePiece keeps in a larger piece
            return [self.normal[piece][0] for piece in run]
        return [self.normal[piece][0] for piece in self.merge(chars, dropout, rng)]

    def merge(self, symbols: list[str], dropout: float, rng: np.random.Generator) -> list[str]:
        """SentencePiece's agenda of merges over `symbols` (changed in place), each skipped with `dropout`."""
        following = [*range(1, len(symbols)), -1]
        preceding = list(range(-1, len(symbols) - 1))
        agenda: list[tuple[float, int, int, int]] = []

        def consider(left: int, right: int) -> None:
            if left >= 0 and right >= 0 and (union := symbols[left] + symbols[right]) in self.normal:
                heapq.heappush(agenda, (-self.normal[union][1], left, right, len(union)))

        for left in range(len(symbols) - 1):
            consider(left, left + 1)
        while agenda:
            _, left, right, size = heapq.heappop(agenda)
            if not symbols[left] or not symbols[right] or len(symbols[left]) + len(symbols[right]) != size:
                continue  # one of the two has merged with another symbol since
            if dropout and rng.random() < dropout:
                continue
            symbols[left], symbols[right] = symbols[left] + symbols[right], ""
            following[left] = following[right]
            if following[right] >= 0:
                preceding[following[right]] = left
            consider(preceding[left], left)
            consider(left, following[left])
        return [symbol for symbol in symbols if symbol]
