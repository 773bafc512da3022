"""On-the-fly modifiers of training pairs (a stage's `modifiers` in `train.stages`): small functions of a pair's
text, registered by name (`@register_modifier("uppercase")`), each applied to a line with its probability; the
texts' changes themselves are `nmtkit.data.augment`'s, which the robustness test sets share.

A modified pair goes through its text: decoded, modified, encoded again (the control symbols that start a source,
corpus and language tags, are kept as they are). Casing by id maps would miss the pieces whose cased form is not in
the vocabulary; decoding and encoding a modified line costs about 0.1 ms on a CPU core (docs/train.md). The random
generator of a line is seeded by (train.seed, update, line), so that `--resume` modifies the same lines the same way.

Two modifiers are not functions of one pair: `bpe_dropout` segments ids anew (`nmtkit.training.bpe_dropout`), and
`merge` joins a pair with the next ones of its batch (OpusTrainer's Merge), drawn by the first line's generator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from nmtkit.data.augment import insert_word, title_words, with_noise, with_typos, without_end_marks
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError
from nmtkit.training.bpe_dropout import BpeDropout

if TYPE_CHECKING:
    from nmtkit.data.dataset import ParallelData

Modifier = Callable[[str, str, np.random.Generator], tuple[str, str]]  # (source, target, rng) -> the pair modified
Pair = tuple[list[int], list[int]]  # source ids (tags first), target ids
MODIFIERS: dict[str, Modifier] = {}
BPE_DROPOUT = "bpe_dropout"  # segments ids anew rather than changing text: `nmtkit.training.bpe_dropout`
MERGE = "merge"  # joins pairs of a batch: `PairModifier.merge_groups`
MERGE_LINES = (2, 4)  # pairs in a merged one, at least and at most (OpusTrainer's Merge: min_lines, max_lines)
PLACEHOLDERS = ("%s", "%d", "{0}", "{1}", "{name}", "%(count)d", "$1", "<b>", "</b>", "<br/>")


def register_modifier(name: str) -> Callable[[Modifier], Modifier]:
    def decorate(function: Modifier) -> Modifier:
        if name in MODIFIERS:
            raise ValueError(f"modifier {name!r} is registered twice")
        MODIFIERS[name] = function
        return function

    return decorate


def check_modifier_names(names: list[str], where: str) -> None:
    known = sorted([*MODIFIERS, BPE_DROPOUT, MERGE])
    for name in names:
        if name not in known:
            raise NmtkitError(f"{where}: unknown modifier {name!r}; the modifiers are {', '.join(known)}")


@register_modifier("uppercase")
def uppercase(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    return src.upper(), tgt.upper()


@register_modifier("titlecase")
def titlecase(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """Each word's first letter in title case, the rest kept (OpusTrainer's TitleCase), on both sides."""
    return title_words(src), title_words(tgt)


@register_modifier("typos")
def typos(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """One to three typing slips in the source (a character left out, doubled, or swapped with the next one); the
    target stays as it should be."""
    return with_typos(src, rng), tgt


@register_modifier("placeholder")
def placeholder(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """A placeholder (`%s`, `{0}`, `<b>`...) or a number, one and the same, inserted as a word at the same relative
    place on both sides: what teaches a model to carry such tokens through unchanged."""
    token = str(PLACEHOLDERS[int(rng.integers(len(PLACEHOLDERS)))] if rng.random() < 0.7 else rng.integers(10_000))
    where = float(rng.random())
    return insert_word(src, token, where), insert_word(tgt, token, where)


@register_modifier("remove_end_punct")
def remove_end_punct(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """Both sides without their final mark when both end in one of the same kind (OpusTrainer's RemoveEndPunct)."""
    return without_end_marks(src, tgt)


@register_modifier("inline_noise")
def inline_noise(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """The same Unicode noise (one to three words of one script, or emoji) inserted at the same relative place on
    both sides (OpusTrainer's inline noise): teaches a model to copy what it cannot translate."""
    return with_noise(src, tgt, rng)


SPLIT_GAIN = 0.8  # a batch is split in two when that leaves at most this share of its padded cells (one more pass)


def split_by_length(pairs: list[Pair]) -> list[list[int]]:
    """The positions of `pairs` in one part, or in two (shorter, longer) when padding each apart takes at most
    SPLIT_GAIN of the cells padding them together does: the best cut of the pairs sorted by length."""
    order = sorted(range(len(pairs)), key=lambda index: len(pairs[index][0]) + len(pairs[index][1]))
    src, tgt = (np.array([len(pairs[index][side]) for index in order]) for side in (0, 1))
    if len(order) < 2:
        return [order] if order else []
    head = np.maximum.accumulate(src) + np.maximum.accumulate(tgt)  # widest of the first k + 1
    tail = (np.maximum.accumulate(src[::-1]) + np.maximum.accumulate(tgt[::-1]))[::-1]  # of those from k on
    sizes = np.arange(1, len(order))
    cells = sizes * head[:-1] + (len(order) - sizes) * tail[1:]
    cut = int(np.argmin(cells))
    if cells[cut] > SPLIT_GAIN * len(order) * head[-1]:
        return [order]
    return [order[:cut + 1], order[cut + 1:]]


class PairModifier:
    """A corpus' modifiers (name -> probability) over pairs of subword ids; bpe_dropout's probability is that of
    skipping each merge, in every pair, after the text modifiers and the merges. Merged pairs stay within
    `max_length` positions a side (the longest that training takes)."""

    def __init__(self, subwords: tuple[Subword, Subword], probabilities: dict[str, float], seed: int,
                 max_length: int | None = None):
        check_modifier_names(list(probabilities), "train.stages modifiers")
        self.subwords, self.seed, self.max_length = subwords, seed, max_length
        self.probabilities = {name: chance for name, chance in probabilities.items()
                              if name not in (BPE_DROPOUT, MERGE)}
        self.dropout, self.merge = probabilities.get(BPE_DROPOUT, 0.0), probabilities.get(MERGE, 0.0)
        self.segmenters = None
        if self.dropout:
            source = BpeDropout(subwords[0])
            self.segmenters = (source, source if subwords[1] is subwords[0] else BpeDropout(subwords[1]))

    def rng(self, step: int, line: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, step, int(line)])

    def __call__(self, src: np.ndarray, tgt: np.ndarray, step: int, line: int) -> Pair:
        """The pair of line `line` as update `step` trains on it, alone: each modifier applied with its probability
        (but merge, which takes the pairs after it in a batch: `batch`)."""
        rng = self.rng(step, line)
        return self.resegment(self.modify_text(src, tgt, rng), rng)

    def batch(self, data: ParallelData, lines: np.ndarray, step: int) -> list[tuple[np.ndarray, list[Pair]]]:
        """The pairs of a batch's `lines` as update `step` trains on them (a merged pair under its first line), as one
        or two parts of (lines, pairs) padded apart (`split_by_length`): a modified pair can be several times as
        long as it was (merged, or upper case: several times its pieces), and padded with the rest of its batch it
        would pad every line to its length (7% upper case made training 2.6 times slower). A modified pair longer
        than `max_length` trains as it was."""
        rngs = [self.rng(step, line) for line in lines]
        pairs = [self.modify_text(data.src[line], data.tgt[line], rng) for line, rng in zip(lines, rngs, strict=True)]
        trained: list[tuple[int, Pair]] = []
        for group in self.merge_groups(pairs, rngs):
            pair = self.merged([pairs[index] for index in group]) if len(group) > 1 else None
            if pair is not None:
                trained.append((lines[group[0]], self.resegment(pair, rngs[group[0]])))
                continue
            trained += [(lines[index], self.within_length(self.resegment(pairs[index], rngs[index]), data,
                                                          lines[index])) for index in group]  # alone, or unmerged
        return [(np.array([trained[index][0] for index in part], dtype=np.int64),
                 [trained[index][1] for index in part]) for part in split_by_length([pair for _, pair in trained])]

    def within_length(self, pair: Pair, data: ParallelData, line: int) -> Pair:
        """`pair`, or line `line` as it is when the modifiers made it longer than `max_length`."""
        if self.max_length and max(len(pair[0]), len(pair[1])) + 1 > self.max_length:
            return data.src[line].tolist(), data.tgt[line].tolist()
        return pair

    def merge_groups(self, pairs: list[Pair], rngs: list[np.random.Generator]) -> list[list[int]]:
        """The batch's pairs (positions) in groups of consecutive ones: each pair not yet in a group starts one of 2
        to 4 with probability `merge` (drawn by its own generator, after its text modifiers), of the pairs after it
        that have its tags and fit in max_length with it; otherwise it is a group of its own."""
        groups, start = [], 0
        while start < len(pairs):
            size = 1
            if self.merge and rngs[start].random() < self.merge:
                size = int(rngs[start].integers(MERGE_LINES[0], MERGE_LINES[1] + 1))
            group, lengths = [start], np.array([len(pairs[start][0]), len(pairs[start][1])])
            tags = self.tags(pairs[start][0])
            for index in range(start + 1, min(start + size, len(pairs))):
                lengths += [len(pairs[index][0]) - len(tags), len(pairs[index][1])]
                if self.tags(pairs[index][0]) != tags or (self.max_length and lengths.max() + 1 > self.max_length):
                    break
                group.append(index)
            groups.append(group)
            start += len(group)
        return groups

    def tags(self, src: list[int]) -> list[int]:
        """The control symbols (corpus and language tags) that start source ids `src`."""
        processor, count = self.subwords[0].processor, 0
        while count < len(src) and processor.IsControl(int(src[count])):
            count += 1
        return src[:count]

    def merged(self, pairs: list[Pair]) -> Pair | None:
        """One pair of `pairs`' texts, each side joined with a space (the first source's tags first); None when
        encoded anew it is longer than max_length after all."""
        source, target = self.subwords[0].processor, self.subwords[1].processor
        tags = self.tags(pairs[0][0])
        src_text = " ".join(source.decode(src[len(tags):]) for src, _ in pairs)
        tgt_text = " ".join(target.decode(tgt) for _, tgt in pairs)
        src_ids, tgt_ids = tags + source.encode(src_text, out_type=int), target.encode(tgt_text, out_type=int)
        if self.max_length and max(len(src_ids), len(tgt_ids)) + 1 > self.max_length:
            return None
        return src_ids, tgt_ids

    def resegment(self, pair: Pair, rng: np.random.Generator) -> Pair:
        """The pair segmented anew with BPE-dropout, when the corpus has it."""
        if self.segmenters is None:
            return pair
        return self.segmenters[0](pair[0], self.dropout, rng), self.segmenters[1](pair[1], self.dropout, rng)

    def modify_text(self, src: np.ndarray, tgt: np.ndarray, rng: np.random.Generator) -> Pair:
        """The pair through the text modifiers drawn for it: decoded, modified, encoded again (its tags kept)."""
        draws = rng.random(len(self.probabilities))  # one draw per modifier, whichever apply
        chosen = [name for name, draw in zip(self.probabilities, draws, strict=True) if draw < self.probabilities[name]]
        if not chosen:
            return src.tolist(), tgt.tolist()
        source, target = self.subwords[0].processor, self.subwords[1].processor  # one line: no batch threads
        src_ids = src.tolist()
        tags = self.tags(src_ids)
        src_text, tgt_text = source.decode(src_ids[len(tags):]), target.decode(tgt.tolist())
        for name in chosen:
            src_text, tgt_text = MODIFIERS[name](src_text, tgt_text, rng)
        return tags + source.encode(src_text, out_type=int), target.encode(tgt_text, out_type=int)
