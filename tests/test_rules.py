"""Tests for nmtkit/data/rules.py and nmtkit/data/scripts.py: what each view of a line finds, and linear time on
hostile lines (long runs, many digits, many URLs, one huge token) for every view and for the whole cleaner."""

from __future__ import annotations

from collections import Counter

import pytest
from scaling import assert_linear

from nmtkit.config.sections import DataConfig
from nmtkit.data import rules
from nmtkit.data.clean import Cleaner
from nmtkit.data.scripts import SCRIPTS, base_language, script_share, script_words, scripts_of
from nmtkit.errors import NmtkitError

LATIN = script_words(("Latin",))
VIEWS = {
    "numbers": rules.numbers, "links": rules.links, "words": rules.words,
    "repeat": lambda line: rules.longest_repeat(rules.units(line)),
    "long_word": lambda line: rules.longest_word(rules.units(line)), "normalised": rules.normalised,
    "letters": rules.has_letters,
    "script_share": lambda line: script_share(line, LATIN),
    "copy": lambda line: rules.copy_share(rules.words(line), rules.words(line[::-1])),
}
FAMILIES = {
    "digits": lambda n: "9" * n, "grouped digits": lambda n: "1," * n, "spaced digits": lambda n: "1 " * n,
    "decimal marks": lambda n: "1.1." * n, "printf arguments": lambda n: "%1$" * n, "arabic digits": lambda n: "١٬" * n,
    "schemes": lambda n: "http://" * n, "many urls": lambda n: "see http://a.org/x, " * n,
    "at signs": lambda n: "a@" * n, "addresses": lambda n: "a@b.org " * n, "slashes": lambda n: "/" * n,
    "quoted paths": lambda n: '"/a/b"' * n, "www": lambda n: "www." * n, "tags": lambda n: '<a href="http://x">' * n,
    "one huge token": lambda n: "x" * n, "one repeated token": lambda n: "ha " * n, "unspaced run": lambda n: "哈" * n,
    "mixed scripts": lambda n: "aя文" * n, "words": lambda n: "the file " * n, "punctuation": lambda n: ".-" * n,
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_view_is_linear_in_the_line(view, family):
    assert_linear(VIEWS[view], FAMILIES[family], name=f"{view} on {family}")


ALL_ON = DataConfig(max_ratio=0.0, max_words=10**9, near_dedup=True, numbers=True, links=True, copies=0.5,
                    max_repeat=10**9, max_word_chars=10**9, symbols_only=False, langid_min_letters=0)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_cleaner_is_linear_in_the_line_with_every_filter_on(family):
    """No filter removes these pairs early (the bounds are out of reach), so each view reads the whole line; language
    identification reads its first 2,000 characters."""
    cleaner = Cleaner(ALL_ON, ("en", "en"))
    assert_linear(lambda line: (cleaner.reason(line, line, 1.0), cleaner.language_reason(line, line, Counter())),
                  FAMILIES[family], name=family)


@pytest.mark.parametrize("line, expected", [
    ("Page 12 of 1,000", {"12": 1, "1000": 1}), ("١٬٠٠٠ and ३", {"1000": 1, "3": 1}), ("０７", {"7": 1}),
    ("%2$s of %1$d: 5", {"5": 1}), ("no digits", {}), ("000", {"0": 1}), ("1 000 000", {"1000000": 1}),
])
def test_numbers_are_digit_strings(line, expected):
    assert rules.numbers(line) == Counter(expected)


@pytest.mark.parametrize("line, expected", [
    ("(see <https://Example.org/A>.)", ["https://example.org/a"]), ("mail a.b+c@x.org, now", ["a.b+c@x.org,"[:-1]]),
    ("run ./configure or ~/bin/x or C:\\Windows", ["~/bin/x", "C:\\Windows"]), ("a/b km/h @home x@y", []),
    ("www.example.org에서", ["www.example.org"]), ("href=\"http://x.org/\">x", ["http://x.org/"]),
])
def test_links_are_urls_addresses_and_paths(line, expected):
    assert rules.links(line) == Counter(expected)


def test_words_longest_repeat_longest_word_and_normalised():
    assert rules.words("Don't open 文件, OK?") == ["don", "t", "open", "文", "件", "ok"]
    assert rules.longest_repeat(rules.units("a b b B c")) == 3 and rules.longest_repeat([]) == 0
    assert rules.longest_word(rules.units("a bcd 文件文件")) == 3
    assert rules.normalised("Open  the FILE (2)!") == "openthefile" and rules.normalised("12: …") == ""


@pytest.mark.parametrize("code, scripts", [("ja", ("Han", "Hiragana", "Katakana")), ("zh_CN", ("Han",)),
                                           ("sr@latin", ("Latin",)), ("sr", ("Cyrillic", "Latin")),
                                           ("pt-BR", ("Latin",)), ("HE", ("Hebrew",)), ("ko", ("Hangul", "Han"))])
def test_the_scripts_of_a_language(code, scripts):
    assert scripts_of(code, {}) == scripts


def test_scripts_given_for_a_language_come_first_and_unknown_ones_are_errors():
    assert scripts_of("ain", {"ain": ["Katakana"]}) == ("Katakana",)
    assert scripts_of("de", {"de": ["Latin", "Greek"]}) == ("Latin", "Greek")
    with pytest.raises(NmtkitError, match="unknown script 'Klingon'"):
        scripts_of("tlh", {"tlh": ["Klingon"]})
    with pytest.raises(NmtkitError, match="no scripts known for language 'xx'"):
        scripts_of("xx", {})


def test_every_script_of_the_table_has_letters():
    for scripts in set(SCRIPTS.values()):
        pattern = script_words(scripts)
        assert pattern.pattern.count("-") > 0, scripts


@pytest.mark.parametrize("line, scripts, share", [
    ("Datei öffnen", ("Latin",), 1.0), ("Открыть file", ("Cyrillic",), 0.5), ("Gnuplot 文档", ("Han",), 2 / 3),
    ("ｆｕｌｌ width", ("Latin",), 1.0), ("ﾃｽﾄ テスト", ("Katakana",), 1.0), ("12 %", ("Latin",), None),
])
def test_script_share_is_a_share_of_words(line, scripts, share):
    assert script_share(line, script_words(scripts)) == (pytest.approx(share) if share is not None else None)


def test_base_language():
    assert [base_language(code) for code in ("zh_CN", "pt-BR", "sr@latin", "EN", "de.UTF-8")] == \
        ["zh", "pt", "sr", "en", "de"]
