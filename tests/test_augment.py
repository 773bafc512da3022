"""nmtkit/data/augment.py: what each change of a line's text changes and what it keeps (every other byte), the
same for the same generator, in time linear in the line."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scaling import assert_linear

from nmtkit.data.augment import (
    END_MARKS,
    NOISE_BLOCKS,
    block_letters,
    end_mark,
    insert_word,
    noise,
    title_words,
    with_noise,
    with_typos,
    without_end_marks,
    word_starts,
)

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
ONE_CHAR_TITLE = st.text(st.characters(exclude_categories=("Cs",)).filter(lambda char: len(char.title()) == 1),
                         max_size=60)
MARKS = "".join(END_MARKS.values())


def test_title_case_capitalises_each_word_and_keeps_the_rest():
    assert title_words("don't stop  the 3rd iPhone\tnow") == "Don't Stop  The 3rd IPhone\tNow"
    assert title_words("ǆungla ßig") == "ǅungla Ssig"  # title case, not upper case, of a digraph
    assert title_words("") == "" and title_words("   ") == "   "


@given(ONE_CHAR_TITLE)
@settings(max_examples=200, deadline=None)
def test_title_case_changes_only_the_first_character_of_each_word(text: str):
    titled = title_words(text)
    assert len(titled) == len(text)
    for char, new, start in zip(text, titled, word_starts(text), strict=True):
        assert new == (char.title() if start else char)


@pytest.mark.parametrize(("src", "tgt", "expected"), [
    ("Hola.", "Hello.", ("Hola", "Hello")),
    ("¿Dónde está?", "它在哪里？", ("¿Dónde está", "它在哪里")),
    ("Hola .", "Hello.", ("Hola", "Hello")),  # a tokenized mark takes its space with it
    ("मैं घर जा रहा हूँ।", "I am going home.", ("मैं घर जा रहा हूँ", "I am going home")),
    ("Hola.", "Hello!", ("Hola.", "Hello!")),  # marks of different kinds
    ("Hola.", "Hello", ("Hola.", "Hello")),
    ("¿Qué?!", "What?!", ("¿Qué?!", "What?!")),  # several marks: left alone, as OpusTrainer does
    ("Espera...", "Wait...", ("Espera...", "Wait...")),
    ("Espera . . .", "Wait . . .", ("Espera . . .", "Wait . . .")),
    (".", ".", (".", ".")),  # nothing would be left
    ("Hola. ", "Hello.", ("Hola. ", "Hello.")),  # the last character is a space
])
def test_end_punctuation_goes_from_both_sides_only_when_both_end_in_one_mark_of_a_kind(src, tgt, expected):
    assert without_end_marks(src, tgt) == expected


@given(TEXT, TEXT)
@settings(max_examples=200, deadline=None)
def test_removing_end_punctuation_keeps_every_byte_but_the_mark_and_the_spaces_before_it(src: str, tgt: str):
    for text, cut in zip((src, tgt), without_end_marks(src, tgt), strict=True):
        assert text.startswith(cut)
        assert text[len(cut):].strip() in ("", text[-1:])
    changed = without_end_marks(src, tgt) != (src, tgt)
    assert changed == (end_mark(src) is not None and end_mark(src) == end_mark(tgt) and bool(src[:-1].strip())
                       and bool(tgt[:-1].strip()))


@given(TEXT, TEXT, st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_noise_goes_to_the_same_place_on_both_sides_and_everything_else_stays(src: str, tgt: str, seed: int):
    noisy = with_noise(src, tgt, np.random.default_rng(seed))
    drawn = np.random.default_rng(seed)
    token, where = noise(drawn), float(drawn.random())
    for text, out in zip((src, tgt), noisy, strict=True):
        words, out_words, size = text.split(" "), out.split(" "), len(token.split(" "))
        at = round(where * len(words))  # the same fraction of each side's words
        assert out_words[at : at + size] == token.split(" ")
        assert out_words[:at] + out_words[at + size :] == words  # every other byte where it was


def test_noise_is_one_to_three_words_of_two_to_five_letters_of_one_block_and_repeats_with_the_seed():
    blocks = [set(block_letters(block)) for block in range(len(NOISE_BLOCKS))]
    for seed in range(200):
        token = noise(np.random.default_rng(seed))
        words = token.split(" ")
        assert 1 <= len(words) <= 3 and all(2 <= len(word) <= 5 for word in words)
        assert any(set(token.replace(" ", "")) <= letters for letters in blocks)
        assert noise(np.random.default_rng(seed)) == token
    assert len({noise(np.random.default_rng(seed)) for seed in range(200)}) == 200
    for block in range(len(NOISE_BLOCKS)):
        letters = block_letters(block)
        assert len(letters) >= 20
        assert all(unicodedata.category(char)[0] == "L" or unicodedata.category(char) == "So" for char in letters)


def test_a_word_goes_in_at_its_fraction_of_the_words():
    assert insert_word("a b", "%s", 0.0) == "%s a b" and insert_word("a b", "%s", 1.0) == "a b %s"
    assert insert_word("a  b", "X", 0.5) == "a  X b"  # two spaces: an empty word between them, kept


@given(TEXT)
@settings(max_examples=200, deadline=None)
def test_typos_make_one_to_three_slips_of_the_lines_own_characters(text: str):
    slipped = with_typos(text, np.random.default_rng(len(text)))
    assert abs(len(slipped) - len(text)) <= 3 and set(slipped) <= set(text)
    assert slipped == with_typos(text, np.random.default_rng(len(text)))


FAMILIES = {  # a line of each family; the pair is the line twice
    "marks": lambda size: "." * size,
    "marks after spaces": lambda size: "a" + " " * size + ".",
    "one mark a word": lambda size: "a. " * size,
    "one huge word": lambda size: "a" * size + ".",
    "spaces": lambda size: " " * size,
    "words": lambda size: "ab " * size,
    "mixed scripts": lambda size: "aé中 " * size + "。",
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_change_is_linear_in_the_line(family: str):
    make = FAMILIES[family]
    rng = np.random.default_rng(0)
    assert_linear(lambda line: without_end_marks(line, line), make, name=f"end marks, {family}")
    assert_linear(title_words, make, name=f"title, {family}")
    assert_linear(lambda line: with_noise(line, line, rng), make, name=f"noise, {family}")
    assert_linear(lambda line: with_typos(line, rng), make, name=f"typos, {family}")
