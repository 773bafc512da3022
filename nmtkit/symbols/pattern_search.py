"""Placeholder patterns on RE2 (`nmtkit.symbols.placeholders`): compiling a family's regular expression, and the
leftmost-longest search of a line over a set of them, in time linear in the line whatever the patterns.

Why RE2 (PyPI `google-re2`): Python's `re` backtracks, so a pattern whose quantified parts can match the same text
(printf's flags `[-+#0']*` and width `[0-9]+` on `%` + `0` * n) takes time exponential or polynomial in the line,
and a user's pattern file can be catastrophic by itself (`(a+)+b`). RE2 runs an automaton: each search is linear in
the text it reads. Its syntax is Perl's without lookarounds or backreferences; its Perl classes (`\\s`, `\\w`, `\\d`,
`\\b`) are ASCII.

Why one search for all families: searching each family again from the current position (its next match, then the
leftmost-longest across families) reads the rest of the line once per placeholder, quadratic on `"ba" * n + ";"`
with `a[^;]*;` and `ba`. One pattern `(?:family 1)|(?:family 2)|...`, compiled for the leftmost-longest match,
finds each placeholder in one pass; the family of a span is the first (in the set's order) that matches exactly it.

Why bytes: the RE2 wrapper encodes a `str` to UTF-8 and converts offsets from its start on every call, O(line) a
search. A line is encoded once, searched as bytes (a pattern compiled from a `str` reads UTF-8), and the spans'
byte offsets are turned into characters in one walk.

Why a window: even one pass reads ahead as far as a match could still grow; a family with a short match and a long
one from the same position (`\\$[a-z]+|\\$[a-z]+\\([^)]*\\)` on `"$a(" * n`) reads to the end of the line for each
short match. A placeholder is at most `MAX_SPAN` bytes, so each search reads at most 2 * `MAX_SPAN` bytes past
where it starts, and a line costs at most its length times that, whatever the patterns.
"""

from __future__ import annotations

from collections.abc import Iterator

import re2
from re2 import _re2  # the C++ binding itself: see `Regexp`

MAX_SPAN = 4096  # bytes: the longest placeholder (a tag with long attributes fits; a paragraph does not)
_CONTEXTS = ("", "\n", "a", " ")  # what can surround an empty match, as RE2's assertions (^ $ \b \B \A \z) see it
_ANCHOR = _re2.RE2.Anchor
_NO_MATCH = (-1, -1)


class PatternError(ValueError):
    """A regular expression RE2 does not take; the message is one line."""


class Regexp:
    """A regular expression on RE2, compiled for UTF-8 text, read as bytes, whole matches only. It calls the binding
    `re2.compile` wraps: the wrapper makes a generator and a match object on each call, five times the cost of
    the search itself on a short span, and a placeholder's family is told by a few such calls."""

    def __init__(self, regex: str, longest: bool = False):
        """`longest`: the leftmost-longest match rather than the leftmost-first (Perl's)."""
        self.regex, self.longest = regex, longest
        options = re2.Options()
        options.log_errors = False  # RE2 would print its own message on stderr as well
        options.never_capture = True
        options.longest_match = longest
        self._regexp = _re2.RE2(regex.encode("utf-8", "surrogatepass"), options)
        if not self._regexp.ok():
            message = self._regexp.error()
            message = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
            raise PatternError(message)
        known, least, most = self._regexp.PossibleMatchRange(8)
        self._range = (least, most) if known else None  # every match is between the two

    def __reduce__(self) -> tuple:
        return Regexp, (self.regex, self.longest)  # the binding's object does not pickle: compiled again

    def _span(self, anchor: object, data: bytes, start: int, end: int) -> tuple[int, int] | None:
        span = self._regexp.Match(anchor, data, start, end)[0]
        return None if span == _NO_MATCH else span

    def search(self, data: bytes, start: int, end: int) -> tuple[int, int] | None:
        """The (start, end) of the first match in data[start:end] (the bytes around it are its context)."""
        return self._span(_ANCHOR.UNANCHORED, data, start, end)

    def prefix(self, data: bytes, start: int, end: int) -> tuple[int, int] | None:
        """The (start, end) of a match in data[start:end] that starts at `start`."""
        return self._span(_ANCHOR.ANCHOR_START, data, start, end)

    def fullmatch(self, data: bytes, start: int, end: int) -> bool:
        """Whether the regex matches exactly data[start:end] (no search where its bytes are out of the regex's
        range: telling a tag's family need not try printf's)."""
        if self._range is not None and not self._range[0] <= data[start:end] <= self._range[1]:
            return False
        return self._span(_ANCHOR.ANCHOR_BOTH, data, start, end) is not None

    def matches(self, text: str) -> bool:
        """Whether the regex matches exactly `text`."""
        data = text.encode("utf-8", "surrogatepass")
        return self.fullmatch(data, 0, len(data))

    def matches_empty(self) -> bool:
        """Whether the regex can match the empty string somewhere: an empty match depends only on what is just
        before and just after it (start or end of text, a line break, a word character, another one), so trying
        each pair of those is enough."""
        return any(self._span(_ANCHOR.ANCHOR_BOTH, (before + after).encode(), len(before), len(before))
                   for before in _CONTEXTS for after in _CONTEXTS)


def _boundary(data: bytes, offset: int) -> bool:
    """Whether `offset` is between two characters of UTF-8 `data` (`\\C` matches a lone byte)."""
    return offset == len(data) or data[offset] & 0xC0 != 0x80


def byte_spans(combined: Regexp, data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) in bytes of each match of `combined` (compiled `longest`) in `data`, left to right, none
    overlapping: at each step the match that starts first, the longest of those, at most `MAX_SPAN` bytes long."""
    position, size = 0, len(data)
    while position < size:
        window = min(size, position + 2 * MAX_SPAN)
        span = combined.search(data, position, window)
        if span is None and window == size:
            return
        if span is None or span[0] >= position + MAX_SPAN:  # no match of at most MAX_SPAN starts before
            position += MAX_SPAN
            continue
        start, end = span
        if end - start > MAX_SPAN:  # the longest match from `start` that is short enough, if any
            end = (combined.prefix(data, start, start + MAX_SPAN) or _NO_MATCH)[1]
        if end < 0 or not (_boundary(data, start) and _boundary(data, end)):
            position = start + 1
            continue
        yield start, end
        position = end


def char_offsets(text: str, data: bytes, offsets: list[int]) -> list[int]:
    """The offsets in `text` of the ascending byte `offsets` (each between two characters) of `data`, its UTF-8
    encoding: one walk over the line."""
    if len(data) == len(text):  # ASCII: bytes are characters
        return offsets
    chars, byte, char = [], 0, 0
    for offset in offsets:
        char += len(data[byte:offset].decode("utf-8", "surrogatepass"))
        byte = offset
        chars.append(char)
    return chars
