"""Hostile input for placeholders (nmtkit/symbols/placeholders.py, pattern_search.py, placeholder_check.py,
translate/masking.py, translate/repair.py), issue 63: linear time on adversarial families for recognising, masking,
restoring, pairing, keying and checking (`scaling.assert_linear`), with the built-in patterns and with catastrophic
pattern files; each finding reproduced (they took seconds at n = 10,000 on Python's re)."""

from __future__ import annotations

import pytest
from scaling import assert_linear

from nmtkit.errors import NmtkitError
from nmtkit.symbols.pattern_search import MAX_SPAN
from nmtkit.symbols.placeholder_check import check
from nmtkit.symbols.placeholders import (
    CLOSE,
    OPEN,
    SYMBOL,
    find_units,
    load_patterns,
    mask,
    mask_pair,
    placeholder_keys,
    placeholder_spans,
    restore,
)
from nmtkit.translate.masking import restores_exactly, separate_glued, word_map
from nmtkit.translate.repair import insert_missing, repair

AUTO = load_patterns("auto")

# each built-in family's prefix repeated, tags unclosed, crossing and nested, runs of one character, one huge line
FAMILIES = {
    "percents": lambda n: "%" * n,
    "printf width": lambda n: "%" + "0" * n,  # finding 4: the flags and the width overlapped
    "python width": lambda n: "%(a)" + "0" * n,
    "printf positions": lambda n: "%1$" * n,
    "qt": lambda n: "%1" + "0" * n,
    "open braces": lambda n: "{" * n,
    "brace spec": lambda n: "{0:" + "x" * n,
    "brace attributes": lambda n: "{a." * n,
    "shell braces": lambda n: "${" * n,
    "shell": lambda n: "$a" * n,
    "tag attributes": lambda n: "<a " * n,
    "tag quotes": lambda n: '<a b="' * n,
    "end tags": lambda n: "</" * n,
    "numeric entities": lambda n: "&#" * n,
    "entities": lambda n: "&a" * n,
    "unclosed tags": lambda n: "<b>" * n,
    "crossing tags": lambda n: "<b>" * n + "</i>" * n,  # finding 3: `_pairs` searched the open tags per end tag
    "nested tags": lambda n: "<b>" * n + "x" + "</b>" * n,
    "interleaved tags": lambda n: "<b><i>" * n + "</b></i>" * n,
    "usage marks": lambda n: "<name %s>" * n,  # unclosed metavariables: searched again inside
    "long tag name": lambda n: "<" + "a" * n + ' b=">"></' + "a" * n + ">",  # a lazy regex backtracked here
    "one character": lambda n: "a" * n,
    "spaces": lambda n: " " * n,
    "reserved brackets": lambda n: OPEN * n,
    "broken symbols": lambda n: f"{OPEN}ph1" * n + CLOSE,
    "repeated placeholders": lambda n: "<br>{0}%s" * n,
    "not ascii": lambda n: "é文😀%s\u00a0" * n,
    "huge line": lambda n: "Copy <b>%s</b> to {0} in ${HOME} &amp; ｟ now. " * n,
}
TAGS = ["unclosed tags", "crossing tags", "nested tags", "interleaved tags", "usage marks", "long tag name"]
REPEATS = ["percents", "printf positions", "repeated placeholders", "crossing tags", "not ascii", "huge line"]
# mask runs find, placeholder_spans and find_units, so it reads every family; each other function the families
# where its own work lies (pairing tags, matching units of a pair, numbering printf arguments)
FUNCTIONS = {
    "mask": (lambda text: mask(text, AUTO), list(FAMILIES)),
    "find": (AUTO.find, ["printf width", "python width", "open braces", "tag quotes", "huge line", "not ascii"]),
    "placeholder_spans": (lambda text: placeholder_spans(text, AUTO), TAGS),
    "mask_pair": (lambda text: mask_pair(text, text, AUTO), REPEATS + TAGS[:4]),  # each unit matched: `_take`
    "placeholder_keys": (lambda text: placeholder_keys(text, AUTO), REPEATS),
}


@pytest.mark.parametrize(("function", "family"), [(function, family) for function, (_, families) in FUNCTIONS.items()
                                                  for family in families])
def test_recognising_and_masking_take_linear_time(function, family):
    assert_linear(FUNCTIONS[function][0], FAMILIES[family], name=f"{function} on {family}")


def reversed_symbols(text: str) -> str:
    """A hypothesis that writes the symbols of masked `text` in reverse order, each pair crossing the others."""
    return "".join(reversed([match.group() for match in SYMBOL.finditer(text)]))


def after_decoding(line: tuple[str, dict[str, str]]) -> None:
    """What a masked line's hypothesis goes through (here the symbols reversed): check, repair, the exact-restore
    test, restore and the word map of the alignments."""
    text, originals = line
    hypothesis = reversed_symbols(text)
    check(text, hypothesis)
    repair(text, hypothesis)
    restores_exactly(text, originals, AUTO)
    restore(text, originals)
    word_map(text, originals)


@pytest.mark.parametrize("family", ["crossing tags", "nested tags", "repeated placeholders", "reserved brackets",
                                    "huge line"])
def test_restoring_checking_and_repairing_take_linear_time(family):
    assert_linear(after_decoding, lambda n: mask(FAMILIES[family](n), AUTO), name=family)


def test_checking_repeated_and_crossing_symbols_takes_linear_time():
    def open_then_closed(n: int) -> str:
        return f"{OPEN}t1{CLOSE}" * n + f"{OPEN}/t1{CLOSE}" * n

    def crossing(n: int) -> str:
        return f"{OPEN}t1{CLOSE}{OPEN}t2{CLOSE}{OPEN}/t1{CLOSE}{OPEN}/t2{CLOSE}" * n

    for family in (open_then_closed, crossing):
        assert_linear(lambda text: check(text, text), family)
        assert_linear(lambda text: repair(text, text), family)


def test_inserting_many_missing_symbols_in_one_word_takes_linear_time():
    def word(n: int) -> tuple[str, list[str], dict[str, int]]:
        symbols = [f"{OPEN}ph{k}{CLOSE}" for k in range(1, n + 1)]
        text = "x" * (4 * n)
        return text, symbols, {symbol: 4 * k + 3 for k, symbol in enumerate(symbols)}

    assert_linear(lambda line: insert_missing(*line), word)


def test_separating_glued_placeholders_takes_linear_time():
    def glued(n: int) -> tuple[str, dict[str, str]]:
        originals = {f"{OPEN}ph{k}{CLOSE}": "$HOME" for k in range(1, n + 1)}
        return "".join(f"{symbol}s" for symbol in originals), originals

    assert_linear(lambda line: separate_glued(*line, AUTO), glued)
    text, originals = glued(3)
    assert separate_glued(text, originals, AUTO) == f"{OPEN}ph1{CLOSE} s{OPEN}ph2{CLOSE} s{OPEN}ph3{CLOSE} s"


def test_a_space_that_does_not_part_a_glued_placeholder_goes_in_once():
    """`<b ｟ph1｠>` restores as one tag whatever the spaces: one space each side, not one a round until the line's
    length (what separate_glued did)."""
    originals = {f"{OPEN}ph1{CLOSE}": "$HOME"}
    assert separate_glued(f"<b {OPEN}ph1{CLOSE}>", originals, AUTO) == f"<b  {OPEN}ph1{CLOSE} >"


# --- pattern files ---


CATASTROPHIC = {  # a pattern file, and the unit repeated: on a backtracking engine exponential or quadratic
    "nested plus": ("bad\t(a+)+b\n", "a"),
    "overlapping alternatives": ("bad\t(a|aa)*c\n", "a"),
    "two pluses": ("bad\t(x+x+)+y\n", "x"),
    # a short match and a longer one still open from the same place: each search reads on to the end (RE2 too)
    "a longer match unfinished": ("call\t\\$[a-z]+|\\$[a-z]+\\([^)]*\\)\n", "$a("),
    # each family searched again from where the last placeholder ended (as nmtkit did, on RE2 too)
    "a family that reads past the next": ("semi\ta[^;]*;\nba\tba\n", "ba"),
}


@pytest.mark.parametrize("name", CATASTROPHIC)
def test_a_catastrophic_pattern_file_masks_in_linear_time(tmp_path, name):
    content, unit = CATASTROPHIC[name]
    path = tmp_path / "patterns.tsv"
    path.write_text(content, encoding="utf-8")
    patterns = load_patterns(str(path))
    assert_linear(lambda text: mask(text, patterns), lambda n: unit * n + ";", name=name)


@pytest.mark.parametrize(("regex", "message"), [
    ("(?<=a)b", "no lookarounds or backreferences"),
    ("(a)\\1", "no lookarounds or backreferences"),
    ("a{1001}", "bad regular expression"),  # RE2 refuses a repeat over 1,000
    ("((((a{100}){100}){100}){100})", "bad regular expression"),  # too large a program
])
def test_what_re2_cannot_run_is_a_one_line_error(tmp_path, regex, message):
    path = tmp_path / "patterns.tsv"
    path.write_text(f"bad\t{regex}\n", encoding="utf-8")
    with pytest.raises(NmtkitError, match=message) as error:
        load_patterns(str(path))
    assert "\n" not in str(error.value) and "patterns.tsv:1: family 'bad'" in str(error.value)


# --- what RE2 changes ---


def test_a_placeholder_is_at_most_max_span_bytes():
    tag = '<a title="' + "x" * (MAX_SPAN - 12) + '">'
    assert len(tag.encode()) == MAX_SPAN
    assert [unit.texts for unit in find_units(f"a {tag} b </a>", AUTO)] == [(tag, "</a>")]
    longer = '<a title="' + "é" * (MAX_SPAN // 2) + '">'  # a byte over
    assert [unit.texts for unit in find_units(f"{longer} %s </a>", AUTO)] == [("%s",), ("</a>",)]
    assert restore(*mask(f"{longer} %s", AUTO)) == f"{longer} %s"


def test_a_family_takes_its_longest_match(tmp_path):
    path = tmp_path / "patterns.tsv"
    path.write_text("short\ta|ab\nword\t[a-z]+c\n", encoding="utf-8")
    patterns = load_patterns(str(path))
    assert [(span.start, span.end, span.family) for span in patterns.find("ab abc")] == [
        (0, 2, "short"), (3, 6, "word")]  # Perl's leftmost-first took "a"; the longest of any family wins


def test_unicode_whitespace_is_whitespace_in_the_builtins():
    for space in ("\u00a0", "\u3000", "\u2028", "\x1c", "\x85"):
        tag = f'<a{space}href="x"{space}/>'
        assert [(span.start, span.end) for span in AUTO.find(f"é {tag}")] == [(2, 2 + len(tag))], repr(space)
        assert [text for unit in find_units(f"%({space})s {{0,{space}-5}}", AUTO) for text in unit.texts] == \
            [f"{{0,{space}-5}}"]


def test_lone_surrogates_and_offsets_after_wide_characters():
    text = "\ud800 😀%s 文<b>é</b> \udfff{0}"
    masked_text, originals = mask(text, AUTO)
    assert sorted(originals.values()) == ["%s", "</b>", "<b>", "{0}"]
    assert restore(masked_text, originals) == text
    assert [text[span.start:span.end] for span in AUTO.find(text)] == ["%s", "<b>", "</b>", "{0}"]


def test_families_too_large_together_for_re2_are_a_one_line_error(tmp_path):
    path = tmp_path / "patterns.tsv"
    path.write_text("".join(f"letters{k}\t{k}\\pL{{400}}\n" for k in range(3)), encoding="utf-8")  # each fits alone
    with pytest.raises(NmtkitError, match="the families together are too large for RE2") as error:
        load_patterns(str(path))
    assert "\n" not in str(error.value)
