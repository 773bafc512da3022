"""The rule filters' views of a line (`nmtkit.data.clean` applies them to pairs): its numbers, links, words, longest
run of one token, longest word, and a normalised form for near-duplicates.

Each is linear in the line: regular expressions made only of character classes that cannot match the same text two
ways (no backtracking), and `str` methods over whitespace-separated tokens. Nothing here changes the text a pair
keeps: these are views used to decide, never written out.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from collections import Counter

from nmtkit.data.corpus import LENGTH_UNITS
from nmtkit.data.scripts import WORD

# Digits, with the separators numbers are written with between groups (1,000 1.000 1 000 1'000, a no-break or a
# thin space, Arabic's ٫ and ٬): a number is its digits, whatever the grouping or the decimal mark.
SEPARATORS = ".,'\u00a0\u202f\u2009 \u066b\u066c"
NUMBER = re.compile(f"\\d+(?:[{SEPARATORS}]\\d+)*")
NUMBER_SEPARATORS = str.maketrans("", "", SEPARATORS)
ARGUMENT = re.compile(r"%\d+\$")  # printf's argument number (%2$s): a translation adds or reorders these
QUOTES = re.compile(r"[\"'«»“”„‘’()\[\]<>]")  # a link inside quotes or brackets may touch the word before it
NOT_LETTERS = re.compile(r"[\W\d_]+")
LETTER = re.compile(r"[^\W\d_]")
EDGE_PUNCTUATION = "()[]{}<>\"'.,;:!?«»“”„‘’`"
PATH_STARTS = ("/", "~/", "./", "../")
DRIVE = re.compile(r"[A-Za-z]:\\")


@functools.lru_cache(maxsize=1)
def _ascii_digits() -> dict[int, str]:
    """Every Unicode decimal digit (Arabic-Indic ٣, Devanagari ३, full-width ３...) to its ASCII digit."""
    return {point: str(unicodedata.decimal(chr(point))) for point in range(min(sys.maxunicode, 0x1FFFF) + 1)
            if unicodedata.decimal(chr(point), None) is not None}


def numbers(line: str) -> Counter:
    """The numbers of a line as a multiset of digit strings (ASCII, group and decimal separators dropped, leading
    zeros dropped): 1,000 and 1.000 and 1 000 and ١٠٠٠ are one number."""
    found = NUMBER.findall(ARGUMENT.sub("", line)) if "%" in line else NUMBER.findall(line)
    if not found:
        return Counter()
    digits = _ascii_digits()
    return Counter(number.translate(NUMBER_SEPARATORS).translate(digits).lstrip("0") or "0" for number in found)


def _ascii_part(token: str) -> str:
    """The token up to its first character that is not ASCII: a language that writes no space before a particle
    (Korean, Japanese) joins it to a URL or an address."""
    for index, char in enumerate(token):
        if not char.isascii():
            return token[:index].rstrip(EDGE_PUNCTUATION)
    return token


def _link(token: str) -> str | None:
    """The URL, e-mail address or file path a piece of a token is (URLs and addresses case-folded), or None."""
    token = token.strip(EDGE_PUNCTUATION)
    scheme = token.find("://")
    if scheme > 0:
        start = scheme
        while start and token[start - 1].isascii() and token[start - 1].isalpha():
            start -= 1
        return _ascii_part(token[start:]).casefold() if start < scheme else None
    if token.startswith("www.") and len(token) > 4:
        return _ascii_part(token).casefold()
    local, at, domain = token.partition("@")
    if at and local and "." in domain.strip(".") and "@" not in domain:
        return _ascii_part(token).casefold()
    if (token.startswith(PATH_STARTS) and token.count("/") >= 2) or DRIVE.match(token):
        return _ascii_part(token)
    return None


def may_hold_links(line: str) -> bool:
    """False when the line has none of the characters every link has, which `links` would read token by token."""
    return "/" in line or "@" in line or "www." in line or ":\\" in line


def links(line: str) -> Counter:
    """The URLs (with a scheme, or www.), e-mail addresses and file paths (/a/b, ~/a, ./a, C:\\a) of a line, as a
    multiset, each without the punctuation, quotes or brackets around it and cut at its first character that is not
    ASCII."""
    found = Counter()
    for token in line.split() if may_hold_links(line) else ():
        if not may_hold_links(token):
            continue
        for piece in QUOTES.split(token) if QUOTES.search(token) else (token,):
            link = _link(piece)
            if link is not None:
                found[link] += 1
    return found


def words(line: str) -> list[str]:
    """The line's words, case-folded, letters only (each character of an unspaced script is a word)."""
    return WORD.findall(line.casefold())


def copy_share(src_words: list[str], tgt_words: list[str]) -> float:
    """How much the two sides' sets of words overlap (Jaccard: shared / all); 0 when a side has none."""
    src_set, tgt_set = set(src_words), set(tgt_words)
    union = len(src_set | tgt_set)
    return len(src_set & tgt_set) / union if union and src_set and tgt_set else 0.0


def units(line: str) -> list[str]:
    """The line's words as the length filters count them (`length_units`): the views below take them."""
    return LENGTH_UNITS.findall(line)


def longest_repeat(words: list[str]) -> int:
    """The longest run of one word repeated (case-folded) in `units`."""
    return max((sum(1 for _ in run) for _, run in itertools.groupby(map(str.casefold, words))), default=0)


def longest_word(words: list[str]) -> int:
    """The longest of `units` in characters (each character of an unspaced script is a word of its own, so a
    Chinese sentence is no long word)."""
    return max(map(len, words), default=0)


def has_letters(line: str) -> bool:
    return LETTER.search(line) is not None


def normalised(line: str) -> str:
    """The line as near-duplicate removal compares it: case-folded, without whitespace, punctuation, digits or
    symbols (its letters alone)."""
    return NOT_LETTERS.sub("", line.casefold())
