"""Teacher-forced cross-entropy of sentence pairs: how surprised a translation model is, per target token, by a
pair's target given its source, as training's loss measures it (the model's `forward`, the target's subwords and
EOS, no label smoothing), in nats.

A `Direction` is one model and how it reads a pair: the forward model reads (source, target), the reverse model
(target, source). Each encodes the text with its own subword model(s), so the two vocabularies may differ; a
multilingual model's source starts with the tag of the language it is to write (Johnson et al. 2017), and a model
trained on masked placeholders reads the pair masked as its training data was (`mask_pair`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.data.batching import token_batches
from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS, EOS, PAD
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder
from nmtkit.scoring.selection import EMPTY, TOO_LONG
from nmtkit.symbols.placeholders import Patterns, mask_pair

Pair = tuple[str, str]


@torch.inference_mode()
def token_entropies(model: EncoderDecoder, sources: list[list[int]], targets: list[list[int]],
                    device: torch.device) -> np.ndarray:
    """H(y|x) = -1/|y| sum_t log p(y_t | y_<t, x) of each pair, |y| its target's tokens and EOS: one padded batch
    through the model's teacher-forced `forward`, log-softmax in float32, each pair's sum in float64."""
    src, src_mask = encode_sources(sources)
    tgt_in, tgt_out = pad_sequences(targets, [BOS], []), pad_sequences(targets, [], [EOS])  # (B, T) each
    logits, _ = model(src.to(device), src_mask.to(device), tgt_in.to(device))  # (B, T, V)
    nll = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), tgt_out.to(device).reshape(-1),
                          ignore_index=PAD, reduction="none").view(tgt_out.shape)  # (B, T), 0 on padding
    return (nll.double().sum(dim=1).cpu() / (tgt_out != PAD).sum(dim=1)).numpy()


@dataclass
class Direction:
    """One model of the two, and how it reads a pair."""

    name: str  # "forward" or "reverse": how errors name it
    loaded: LoadedModel
    reverse: bool  # reads (target, source)
    tag: list[int]  # the ids that start each source: a multilingual model's target-language tag, or none
    patterns: Patterns | None  # the placeholders its training data masked (None: none)

    @functools.cached_property
    def limit(self) -> int:
        """The most tokens a side may have: the positions the model was trained on (its `max_length`, and the
        run's train.max_length, which bounds a model without positions too) less the EOS or BOS each side takes;
        found once (`max_length` walks the model's modules)."""
        trained = self.loaded.config.train.max_length
        return min(trained, self.loaded.model.max_length() or trained) - 1

    def encode(self, pairs: list[Pair]) -> tuple[list[list[int]], list[list[int]]]:
        """The source and target ids of each pair as this model reads it."""
        if self.reverse:
            pairs = [(tgt, src) for src, tgt in pairs]
        if self.patterns is not None:
            pairs = [mask_pair(src, tgt, self.patterns) for src, tgt in pairs]
        sources = self.loaded.src_subword.encode([src for src, _ in pairs])
        return [self.tag + ids for ids in sources], self.loaded.tgt_subword.encode([tgt for _, tgt in pairs])

    def entropies(self, sources: list[list[int]], targets: list[list[int]], rows: np.ndarray, batch_tokens: int,
                  device: torch.device, first_line: int) -> np.ndarray:
        """`token_entropies` of the pairs `rows` (indices into `sources` and `targets`), in batches of at most
        `batch_tokens` tokens; a non-finite one (weights holding NaN or inf) is an error naming its line."""
        found = np.empty(len(rows))
        lengths = [max(len(sources[row]), len(targets[row])) for row in rows]
        for batch in token_batches(lengths, lengths, batch_tokens):
            chosen = rows[batch]
            found[batch] = token_entropies(self.loaded.model, [sources[row] for row in chosen],
                                           [targets[row] for row in chosen], device)
        bad = np.flatnonzero(~np.isfinite(found))
        if len(bad):
            raise NmtkitError(f"line {first_line + int(rows[bad[0]])}: the {self.name} model gives a cross-entropy "
                              f"of {found[bad[0]]}; its weights hold NaN or inf? (use another checkpoint)")
        return found


def score_chunk(directions: tuple[Direction, Direction], pairs: list[Pair], batch_tokens: int,
                device: torch.device, first_line: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(H forward, H reverse, unscored reason) of each pair of a chunk whose first is line `first_line`: a pair with
    an empty side (nothing but white space, or no subwords) is EMPTY, one with a side longer than a model reads
    TOO_LONG; neither model scores those, and their entropies are infinite."""
    encoded = [direction.encode(pairs) for direction in directions]
    unscored = np.array([EMPTY if not src.strip() or not tgt.strip() else 0 for src, tgt in pairs], dtype=np.int8)
    for (sources, targets), direction in zip(encoded, directions):
        for row, (source, target) in enumerate(zip(sources, targets)):
            if unscored[row] != EMPTY and (len(source) == len(direction.tag) or not target):
                unscored[row] = EMPTY
            elif not unscored[row] and max(len(source), len(target)) > direction.limit:
                unscored[row] = TOO_LONG
    rows = np.flatnonzero(unscored == 0)
    found = []
    for (sources, targets), direction in zip(encoded, directions):
        entropies = np.full(len(pairs), np.inf)
        entropies[rows] = direction.entropies(sources, targets, rows, batch_tokens, device, first_line)
        found.append(entropies)
    return found[0], found[1], unscored
