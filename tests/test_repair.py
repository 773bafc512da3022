"""nmtkit.translate.repair: hand-made translations that lost, duplicated, invented, misnested or broke symbols come
out with each source symbol exactly once, no other, tag pairs nested (`nmtkit.symbols.placeholder_check.check` passes),
and the rest of the text as it was."""

from __future__ import annotations

import random

import pytest

from nmtkit.symbols.placeholder_check import check
from nmtkit.symbols.placeholders import OPEN, SYMBOL, load_patterns, mask
from nmtkit.translate.repair import STRAY, insert_missing, remove_spelled, repair, spelled, symbols

SOURCE = "Open ｟ph1｠ in ｟t1｠the ｟t2｠new｟/t2｠ window｟/t1｠ now ｟ph2｠"


def words(text: str) -> list[str]:
    """The text words of a masked line (symbols and brackets taken out)."""
    return STRAY.sub("", SYMBOL.sub("", text)).split()


@pytest.mark.parametrize("hypothesis, expected", [
    pytest.param("Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠",
                 "Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠", id="kept: unchanged"),
    pytest.param("Öffne im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt",
                 "Öffne im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph1｠｟ph2｠", id="dropped: at the end"),
    pytest.param("Öffne ｟ph1｠ ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠",
                 "Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠", id="duplicated"),
    pytest.param("Öffne ｟ph1｠ im ｟ph7｠ ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ ｟/t9｠jetzt ｟ph2｠",
                 "Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠", id="unknown: removed"),
    pytest.param("Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t1｠｟/t2｠ jetzt ｟ph2｠",
                 "Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠", id="crossing pairs"),
    pytest.param("Öffne ｟ph1｠ im ｟/t1｠neuen ｟t2｠Fenster｟/t2｠｟t1｠ jetzt ｟ph2｠",
                 "Öffne ｟ph1｠ im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠", id="closed before opened"),
    pytest.param("Öffne ｟ph1 im ｟t1｠neuen｠ ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠",
                 "Öffne ph1 im ｟t1｠neuen ｟t2｠Fenster｟/t2｠｟/t1｠ jetzt ｟ph2｠｟ph1｠", id="broken symbol"),
])
def test_repair_of_hand_made_translations(hypothesis: str, expected: str):
    repaired = repair(SOURCE, hypothesis)
    assert repaired == expected
    assert check(SOURCE, repaired).ok


def test_a_missing_symbol_goes_before_the_word_its_anchor_falls_in():
    hypothesis = "Öffne im Fenster jetzt"
    anchored = repair("Open ｟ph1｠ now ｟ph2｠", hypothesis, {"｟ph1｠": hypothesis.index("nster"),
                                                              "｟ph2｠": hypothesis.index(" jetzt")})
    assert anchored == "Öffne im ｟ph1｠ Fenster ｟ph2｠ jetzt"
    assert insert_missing("a ｟ph1｠bc", ["｟ph2｠"], {"｟ph2｠": 8}) == "a ｟ph1｠｟ph2｠ bc"  # a symbol ends a word


def test_a_missing_pair_comes_out_open_then_closed():
    repaired = repair("｟t1｠a｟/t1｠ ｟t2｠b｟/t2｠", "x ｟/t1｠ y ｟/t2｠", {"｟t1｠": 0})
    assert check("｟t1｠a｟/t1｠ ｟t2｠b｟/t2｠", repaired).ok
    assert repaired.index("｟t1｠") < repaired.index("｟/t1｠")


def test_a_line_that_is_only_a_placeholder():
    assert repair("｟ph1｠", "") == "｟ph1｠"
    assert repair("｟ph1｠", "｟ph1｠｟ph1｠") == "｟ph1｠"
    assert repair("｟t1｠｟/t1｠", "｟/t1｠｟t1｠") == "｟t1｠｟/t1｠"


@pytest.mark.parametrize("hypothesis, expected", [
    pytest.param("Öffne ｟ph1｠ mit %1$s jetzt", "Öffne ｟ph1｠ mit jetzt", id="printf between words"),
    pytest.param("%m｟ph1｠ {0}", "｟ph1｠", id="glued to a symbol, and at the end"),
    pytest.param("a &amp; b <b>c</b> $HOME", "a b c", id="entity, tags, variable"),
    pytest.param("%{0}s %%ss", "ss", id="a removal that joins a new one"),
    pytest.param("100% sicher ｟ph1｠ ｟｠", "100% sicher ｟ph1｠ ｟｠", id="text and reserved brackets stay"),
])
def test_placeholders_spelled_out_are_removed(hypothesis: str, expected: str):
    patterns = load_patterns("auto")
    assert remove_spelled(hypothesis, patterns) == expected
    assert spelled(expected, patterns) == []
    assert repair("｟ph1｠", hypothesis, patterns=patterns) == repair("｟ph1｠", expected)


def scramble(symbols_of_source: list[str], rng: random.Random) -> str:
    """A translation of random words with the source's symbols dropped, repeated, swapped, invented or broken."""
    pool = [*symbols_of_source, *symbols_of_source, f"{OPEN}ph9｠", f"{OPEN}/t7｠", f"{OPEN}t1", "｠"]
    parts = [rng.choice(["wort", "Satz", "x", "日本"]) for _ in range(rng.randint(0, 8))]
    for _ in range(rng.randint(0, 8)):
        parts.insert(rng.randint(0, len(parts)), rng.choice(pool))
    return rng.choice([" ", ""]).join(parts)


@pytest.mark.parametrize("seed", range(5))
def test_any_scrambled_translation_is_repaired_and_keeps_its_words(seed: int):
    rng = random.Random(seed)
    patterns = load_patterns("auto")
    for _ in range(200):
        source, _ = mask(rng.choice(["%s <b>x <i>y</i></b> {0}", "<p><a>%d</a></p>", "&amp; $HOME", "<b>%1$s</b>"]),
                         patterns)
        hypothesis = scramble(symbols(source), rng)
        repaired = repair(source, hypothesis)
        assert check(source, repaired).ok, (source, hypothesis, repaired)
        assert words(repaired) == words(hypothesis)
