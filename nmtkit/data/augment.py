"""What messy input looks like, as functions of a line's text: title case, typing slips, a missing final mark,
Unicode noise, a token inserted as a word. Training's modifiers (`nmtkit.training.modifiers`) apply them to pairs on
the fly and `nmtkit robustness` writes test sets with them (`nmtkit.data.robustness`), so that a model is tested on
what it was taught. Each changes only what it says: every other character of the line stays as it was, spaces
included, and each runs in time linear in the line (tested on long lines). The meanings follow OpusTrainer's
modifiers (TitleCase, RemoveEndPunct, the Tags modifier's inline noise), whose test sets Mozilla's translations
pipeline calls flores_aug.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

# Sentence-final marks by kind, across scripts (full-width and small forms, danda, Arabic, Armenian, Ethiopic,
# Myanmar, Greek): a pair loses its final marks only when both sides end in a mark of the same kind.
END_MARKS = {
    "stop": ".．｡。﹒︒।॥۔።։။",
    "exclamation": "!！﹗︕‼՜",
    "question": "?？﹖︖؟;՞፧⁇⁈⁉",  # the Greek question mark is U+037E
    "comma": ",，､、﹐︐﹑،၊՝",
    "colon": ":：﹕︓፥፦",
    "semicolon": ";；﹔︔؛፤·",  # U+0387, the Greek semicolon
    "ellipsis": "…⋯︙",
}
KIND_OF = {mark: kind for kind, marks in END_MARKS.items() for mark in marks}

# Unicode blocks that noise words are drawn from: one block a noise, letters (or emoji) only, so that a noise word
# is a run of characters a model has likely never seen, not marks that combine with the text around them.
NOISE_BLOCKS = (
    (0x0370, 0x03FF),  # Greek
    (0x0400, 0x04FF),  # Cyrillic
    (0x0530, 0x058F),  # Armenian
    (0x0590, 0x05FF),  # Hebrew
    (0x0600, 0x06FF),  # Arabic
    (0x0900, 0x097F),  # Devanagari
    (0x0E00, 0x0E7F),  # Thai
    (0x10A0, 0x10FF),  # Georgian
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0x1F600, 0x1F64F),  # emoticons
)
NOISE_WORDS = (1, 3)  # words in a noise, at least and at most
NOISE_WORD_LENGTH = (2, 5)  # characters in a noise word (OpusTrainer's Noise: min_word_length 2, max 5)


def title_words(text: str) -> str:
    """`text` with the first character of each word in title case and the rest as it was (OpusTrainer's
    TitleCase; `str.title` would also lower the rest and start a word after each apostrophe: "Don'T")."""
    out = [char.title() if start else char for char, start in zip(text, word_starts(text), strict=True)]
    return "".join(out)


def word_starts(text: str) -> list[bool]:
    """For each character of `text`, whether a word starts there (the first character, or one after whitespace)."""
    return [not char.isspace() and (at == 0 or text[at - 1].isspace()) for at, char in enumerate(text)]


def with_typos(text: str, rng: np.random.Generator) -> str:
    """One to three typing slips in `text`: a character left out, doubled, or swapped with the next one."""
    chars = list(text)
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
    return "".join(chars)


def end_mark(text: str) -> str | None:
    """The kind of the one sentence-final mark `text` ends in, or None: no mark at its end, or several ("Why?!",
    "Wait...", a tokenized "Wait . . ."), which OpusTrainer's RemoveEndPunct leaves alone too."""
    if not text or text[-1] not in KIND_OF:
        return None
    before = text[:-1].rstrip()
    return None if before and before[-1] in KIND_OF else KIND_OF[text[-1]]


def without_end_marks(src: str, tgt: str) -> tuple[str, str]:
    """The pair without its final marks, and the spaces before them, when both sides end in one mark of the same
    kind ("Hola." and "Hello.", "¿Dónde?" and "哪里？") and hold more than it; else the pair as it is."""
    kind = end_mark(src)
    if kind is None or kind != end_mark(tgt):
        return src, tgt
    cut_src, cut_tgt = src[:-1].rstrip(), tgt[:-1].rstrip()
    return (cut_src, cut_tgt) if cut_src and cut_tgt else (src, tgt)


@functools.cache
def block_letters(block: int) -> str:
    """The letters (and symbols, for emoji) of noise block number `block`, in code point order."""
    start, end = NOISE_BLOCKS[block]
    return "".join(char for char in map(chr, range(start, end + 1))
                   if unicodedata.category(char)[0] == "L" or unicodedata.category(char) == "So")


def noise(rng: np.random.Generator) -> str:
    """One to three words of two to five characters, all from one Unicode block drawn at random."""
    letters = block_letters(int(rng.integers(len(NOISE_BLOCKS))))
    words = int(rng.integers(NOISE_WORDS[0], NOISE_WORDS[1] + 1))
    length = int(rng.integers(NOISE_WORD_LENGTH[0], NOISE_WORD_LENGTH[1] + 1))
    picks = rng.integers(len(letters), size=(words, length))
    return " ".join("".join(letters[pick] for pick in word) for word in picks)


def insert_word(text: str, token: str, where: float) -> str:
    """`text` with `token` as a word at fraction `where` of its words (0: first, 1: last); words are what single
    spaces separate, so every other byte of `text` stays where it was."""
    words = text.split(" ")
    at = round(where * len(words))
    return " ".join([*words[:at], token, *words[at:]])


def with_noise(src: str, tgt: str, rng: np.random.Generator) -> tuple[str, str]:
    """The same noise inserted as a word at the same relative place of both sides: what a model should copy."""
    token, where = noise(rng), float(rng.random())
    return insert_word(src, token, where), insert_word(tgt, token, where)
