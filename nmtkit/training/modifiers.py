"""On-the-fly modifiers of training pairs (a stage's `modifiers` in `train.stages`): small functions of a pair's
text, registered by name (`@register_modifier("uppercase")`), each applied to a line with its probability.

A modified pair goes through its text: decoded, modified, encoded again (the control symbols that start a source,
corpus and language tags, are kept as they are). Casing by id maps would miss the pieces whose cased form is not in
the vocabulary; decoding and encoding a modified line costs about 0.1 ms on a CPU core (docs/train.md). The random
generator of a line is seeded by (train.seed, update, line), so that `--resume` modifies the same lines the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError
from nmtkit.training.bpe_dropout import BpeDropout

Modifier = Callable[[str, str, np.random.Generator], tuple[str, str]]  # (source, target, rng) -> the pair modified
MODIFIERS: dict[str, Modifier] = {}
BPE_DROPOUT = "bpe_dropout"  # segments ids anew rather than changing text: `nmtkit.training.bpe_dropout`
PLACEHOLDERS = ("%s", "%d", "{0}", "{1}", "{name}", "%(count)d", "$1", "<b>", "</b>", "<br/>")


def register_modifier(name: str) -> Callable[[Modifier], Modifier]:
    def decorate(function: Modifier) -> Modifier:
        if name in MODIFIERS:
            raise ValueError(f"modifier {name!r} is registered twice")
        MODIFIERS[name] = function
        return function

    return decorate


def check_modifier_names(names: list[str], where: str) -> None:
    known = sorted([*MODIFIERS, BPE_DROPOUT])
    for name in names:
        if name not in known:
            raise NmtkitError(f"{where}: unknown modifier {name!r}; the modifiers are {', '.join(known)}")


@register_modifier("uppercase")
def uppercase(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    return src.upper(), tgt.upper()


@register_modifier("titlecase")
def titlecase(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    return src.title(), tgt.title()


@register_modifier("typos")
def typos(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """One to three typing slips in the source (a character left out, doubled, or swapped with the next one); the
    target stays as it should be."""
    chars = list(src)
    for _ in range(int(rng.integers(1, 4))):
        if len(chars) < 2:
            break
        at, slip = int(rng.integers(len(chars) - 1)), int(rng.integers(3))
        if slip == 0:
            del chars[at]
        elif slip == 1:
            chars.insert(at, chars[at])
        else:
            chars[at], chars[at + 1] = chars[at + 1], chars[at]
    return "".join(chars), tgt


@register_modifier("placeholder")
def placeholder(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """A placeholder (`%s`, `{0}`, `<b>`...) or a number, one and the same, inserted as a word at the same relative
    place on both sides: what teaches a model to carry such tokens through unchanged."""
    token = str(PLACEHOLDERS[int(rng.integers(len(PLACEHOLDERS)))] if rng.random() < 0.7 else rng.integers(10_000))
    where = float(rng.random())
    return insert_word(src, token, where), insert_word(tgt, token, where)


def insert_word(text: str, token: str, where: float) -> str:
    """`text` with `token` as a word at fraction `where` of its words (0: first, 1: last)."""
    words = text.split(" ")
    at = round(where * len(words))
    return " ".join([*words[:at], token, *words[at:]])


class PairModifier:
    """A corpus' modifiers (name -> probability) over pairs of subword ids; bpe_dropout's probability is that of
    skipping each merge, in every pair, after the text modifiers."""

    def __init__(self, subwords: tuple[Subword, Subword], probabilities: dict[str, float], seed: int):
        check_modifier_names(list(probabilities), "train.stages modifiers")
        self.subwords, self.seed = subwords, seed
        self.probabilities = {name: chance for name, chance in probabilities.items() if name != BPE_DROPOUT}
        self.dropout = probabilities.get(BPE_DROPOUT, 0.0)
        self.segmenters = None
        if self.dropout:
            source = BpeDropout(subwords[0])
            self.segmenters = (source, source if subwords[1] is subwords[0] else BpeDropout(subwords[1]))

    def __call__(self, src: np.ndarray, tgt: np.ndarray, step: int, line: int) -> tuple[list[int], list[int]]:
        """The pair of line `line` as update `step` trains on it: each modifier applied with its probability."""
        rng = np.random.default_rng([self.seed, step, int(line)])
        src_ids, tgt_ids = self.modify_text(src, tgt, rng)
        if self.segmenters is None:
            return src_ids, tgt_ids
        return self.segmenters[0](src_ids, self.dropout, rng), self.segmenters[1](tgt_ids, self.dropout, rng)

    def modify_text(self, src: np.ndarray, tgt: np.ndarray, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """The pair through the text modifiers drawn for it: decoded, modified, encoded again (its tags kept)."""
        draws = rng.random(len(self.probabilities))  # one draw per modifier, whichever apply
        chosen = [name for name, draw in zip(self.probabilities, draws, strict=True) if draw < self.probabilities[name]]
        if not chosen:
            return src.tolist(), tgt.tolist()
        source, target = self.subwords[0].processor, self.subwords[1].processor  # one line: no batch threads
        tags = 0
        while tags < len(src) and source.IsControl(int(src[tags])):
            tags += 1
        src_text, tgt_text = source.decode(src[tags:].tolist()), target.decode(tgt.tolist())
        for name in chosen:
            src_text, tgt_text = MODIFIERS[name](src_text, tgt_text, rng)
        return src[:tags].tolist() + source.encode(src_text, out_type=int), target.encode(tgt_text, out_type=int)
