"""Corpus tags: a token that starts every source of one corpus, such as `<bt>` for back-translations (Caswell et
al. 2019, "Tagged Back-Translation"), so that a model can tell those lines apart; at translate time it is added
only when asked (`--tag`).

A corpus tag is a SentencePiece control symbol, as a multilingual model's target-language tags are: an id of its
own that no text encodes to (a user who writes "<bt>" gets those characters, not the tag) and that decodes to
nothing (a model that emits it writes nothing for it). So a model's vocabulary lists its tags: checkpoints and
exported directories carry them in their subword model and need no field of their own.

Order: a source of a multilingual corpus with a tag starts with the target-language tag, then the corpus tag
(`<2de> <bt> text`), in the data and at translate time alike.
"""

from __future__ import annotations

import re

from nmtkit.data.subword import BOS, EOS, PAD, Subword
from nmtkit.errors import NmtkitError

TAG = re.compile(r"<[A-Za-z0-9_.-]{1,30}>")
RESERVED = ("<s>", "<pad>", "<unk>")  # SentencePiece's own symbols; `<2...>` are target-language tags


def check_tag(tag: object, where: str) -> str:
    """`tag` if it can be a corpus tag, else an error starting with `where`."""
    if not isinstance(tag, str) or not TAG.fullmatch(tag) or tag in RESERVED or tag.startswith("<2"):
        raise NmtkitError(f"{where}: tag {tag!r} is not a corpus tag such as <bt> (letters, digits, _ . - between "
                          "< and >; not <s>, <pad>, <unk> or <2...>, which are target-language tags)")
    return tag


def corpus_tags(subword: Subword, language_tags: dict[str, int]) -> dict[str, int]:
    """The corpus tags of a vocabulary and their ids: its control symbols other than padding, BOS, EOS and the
    target-language tags."""
    processor, skip = subword.processor, {PAD, BOS, EOS, *language_tags.values()}
    return {processor.id_to_piece(index): index for index in range(subword.vocab_size)
            if processor.is_control(index) and index not in skip}


def tag_ids(tag: str, subword: Subword, language_tags: dict[str, int]) -> list[int]:
    """The ids that `--tag` adds to every source: none without a tag; an error naming the model's tags for a tag
    the model was not trained with."""
    if not tag:
        return []
    index = subword.processor.piece_to_id(tag)
    if subword.processor.is_control(index) and index not in {PAD, BOS, EOS, *language_tags.values()}:
        return [index]
    known = sorted(corpus_tags(subword, language_tags))
    has = f"this model's tags are {', '.join(known)}" if known else "this model was trained without corpus tags"
    raise NmtkitError(f"unknown --tag {tag!r}; {has}")


def checked_tag_ids(tags: object, vocab_size: int, where: str) -> dict[str, int]:
    """A model file's target-language tags (`{language: id}`, None: none) when each id is a piece of its source
    vocabulary of `vocab_size`; else an error starting with `where`."""
    tags = tags or {}
    if not (isinstance(tags, dict) and all(isinstance(lang, str) and type(index) is int and 0 <= index < vocab_size
                                           for lang, index in tags.items())):
        raise NmtkitError(f"{where}: its language tags are not ids of its vocabulary ({str(tags)[:80]})")
    return tags
