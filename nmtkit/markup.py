"""HTML and XML input (`translate --input-format html`): translate the text inside markup, keep the markup.

Each input is a fragment (a line). Block-level elements (`BLOCK`: `p`, `div`, `li`, `td`, `h1`, `br`...), doctypes
and processing instructions split it into segments, each translated as a sentence; inline elements (any other)
stay inside their segment. Kept byte for byte, never translated: every tag with its attribute values, comments,
CDATA, and the whole of an excluded element (`SKIP`, the names a user adds, any element with `translate="no"`).
Entities are decoded for the model; the translation is written with `&`, `<` and `>` escaped.

A segment's inline markup goes through the model one of two ways:
- as symbols, when the model's vocabulary has the reserved symbols (trained with placeholders,
  `nmtkit.placeholders`): start and end tag become the pair `｟tk｠` ... `｟/tk｠`; an empty element, a comment or an
  excluded element the placeholder `｟phk｠`; the segment is translated whole, and `repair` puts each symbol in the
  translation exactly once, pairs properly nested, so the output is well-formed whenever the input is. With a
  placeholder rule in force, the placeholders of the text (`%s`, `{0}`) are symbols too (`text_masks`).
- split, for other models: each text between two pieces of markup is translated on its own, the markup stays where
  it was (the input's markup in the input's order; a sentence cut by a `<b>` translates the worse for it).
Markup around a whole segment (`<li><a href="...">text</a></li>`) stays outside its translation either way; a start
or end tag without its partner in its segment (a `<b>` that a `<p>` cuts) splits the segment as a block does.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from html import escape, unescape
from html.parser import HTMLParser
from itertools import groupby
from typing import Protocol

from nmtkit.errors import NmtkitError
from nmtkit.markup_repair import repair
from nmtkit.placeholders import CLOSE, OPEN, PLACEHOLDER_SYMBOLS, TAG_PAIR_SYMBOLS, reordered

log = logging.getLogger(__name__)

BLOCK = frozenset((
    "address", "area", "article", "aside", "audio", "base", "blockquote", "body", "br", "canvas", "caption", "center",
    "col", "colgroup", "dd", "details", "dialog", "dir", "div", "dl", "dt", "embed", "fieldset", "figcaption",
    "figure", "footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup",
    "hr", "html", "iframe", "legend", "li", "link", "main", "menu", "meta", "nav", "noscript", "object", "ol",
    "optgroup", "option", "p", "param", "pre", "section", "select", "source", "summary", "table", "tbody", "td",
    "template", "tfoot", "th", "thead", "title", "tr", "track", "ul", "video"))
VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                  "track", "wbr"))  # HTML elements that have no end tag
SKIP = frozenset(("script", "style", "code", "pre", "textarea"))
TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9:._-]*")

TEXT, OPEN_TAG, CLOSE_TAG, ATOM, BREAK = "text", "open", "close", "atom", "break"


@dataclass(frozen=True)
class Piece:
    """A stretch of the fragment: text; an inline start or end tag; an atom (markup kept whole inside its
    segment: an empty inline element, a comment, an excluded element); or a break (markup that ends a segment)."""

    kind: str
    raw: str  # the fragment's own characters
    name: str = ""  # the tag name of a start or end tag


class _Scanner(HTMLParser):
    """The fragment's events: (offset, kind, tag name, translate="no"); each reaches to the next one's offset."""

    def __init__(self, fragment: str):
        super().__init__(convert_charrefs=False)  # entities as events of their own: offsets stay exact
        self.events: list[tuple[int, str, str, bool]] = []
        self._line_starts = [0] + [index + 1 for index, char in enumerate(fragment) if char == "\n"]
        self.feed(fragment)
        self.close()

    def _event(self, kind: str, name: str = "", keep: bool = False) -> None:
        line, column = self.getpos()
        self.events.append((self._line_starts[line - 1] + column, kind, name, keep))

    def handle_starttag(self, tag, attrs):
        self._event("start", tag, any(name == "translate" and (value or "").strip().lower() == "no"
                                      for name, value in attrs))

    def handle_startendtag(self, tag, attrs):
        self._event("startend", tag)

    def handle_endtag(self, tag):
        self._event("end", tag)

    def handle_data(self, data):
        self._event(TEXT)

    handle_entityref = handle_charref = handle_data

    def handle_comment(self, data):
        self._event(ATOM)

    unknown_decl = handle_comment  # CDATA sections

    def handle_decl(self, decl):
        self._event(BREAK)

    handle_pi = handle_decl


def _kind(event: str, name: str) -> str:
    """The kind of piece an event of the scanner is (one not excluded)."""
    if event in (TEXT, ATOM, BREAK):
        return event
    if name in BLOCK:
        return BREAK
    if event == "startend" or name in VOID:
        return ATOM
    return OPEN_TAG if event == "start" else CLOSE_TAG


def _element_end(events: list[tuple[int, str, str, bool]], start: int) -> int:
    """The index of the end tag that closes the element started at `start` (the last event if none does)."""
    name, depth = events[start][2], 0
    for index in range(start, len(events)):
        if events[index][2] == name and events[index][1] in ("start", "end"):
            depth += 1 if events[index][1] == "start" else -1
            if depth == 0:
                return index
    return len(events) - 1


def pieces(fragment: str, skip: frozenset[str] = SKIP) -> list[Piece]:
    """The fragment as pieces, adjacent text merged; an excluded element (a name in `skip`, or `translate="no"`)
    is one piece, an atom or a break as its tag is inline or block."""
    events = _Scanner(fragment).events
    ends = [offset for offset, *_ in events[1:]] + [len(fragment)]
    found: list[Piece] = []
    index = 0
    while index < len(events):
        offset, event, name, keep = events[index]
        last = index
        if event == "start" and (name in skip or keep) and name not in VOID:
            last = _element_end(events, index)
            kind = BREAK if name in BLOCK else ATOM
        else:
            kind = _kind(event, name)
        piece = Piece(kind, fragment[offset:ends[last]], name if kind in (OPEN_TAG, CLOSE_TAG) else "")
        if kind == TEXT and found and found[-1].kind == TEXT:
            piece = Piece(TEXT, found.pop().raw + piece.raw)
        found.append(piece)
        index = last + 1
    return found


def pairs(found: list[Piece]) -> dict[int, int]:
    """Start tag index -> index of the end tag that closes it in the same segment, as an HTML parser recovers: an
    end tag closes the innermost open element of its name and leaves those opened inside it unclosed."""
    matched, open_tags = {}, []
    for index, piece in enumerate(found):
        if piece.kind == BREAK:
            open_tags = []
        elif piece.kind == OPEN_TAG:
            open_tags.append(index)
        elif piece.kind == CLOSE_TAG:
            depth = next((depth for depth in range(len(open_tags) - 1, -1, -1)
                          if found[open_tags[depth]].name == piece.name), None)
            if depth is not None:
                matched[open_tags[depth]] = index
                del open_tags[depth:]
    return matched


def settle(found: list[Piece]) -> list[Piece]:
    """`found` with each start or end tag that is unpaired within its segment made a break, until all pair (an
    unpaired tag moved by a translation could break the nesting of the tags around it)."""
    while True:
        matched = pairs(found)
        paired = set(matched) | set(matched.values())
        unpaired = [index for index, piece in enumerate(found)
                    if piece.kind in (OPEN_TAG, CLOSE_TAG) and index not in paired]
        if not unpaired:
            return found
        found = [replace(piece, kind=BREAK) if index in unpaired else piece for index, piece in enumerate(found)]


def _peel(inner: list[Piece], edge: list[Piece], end: bool) -> None:
    """Move an atom, or a text's outer whitespace, from the start (or `end`) of `inner` to `edge` (kept there)."""
    piece = inner[-1 if end else 0]
    if piece.kind == ATOM:
        moved, rest = piece, []
    elif piece.kind == TEXT and piece.raw != piece.raw.strip():
        core = piece.raw.rstrip() if end else piece.raw.lstrip()
        space = piece.raw[len(core):] if end else piece.raw[:len(piece.raw) - len(core)]
        moved, rest = Piece(TEXT, space), [Piece(TEXT, core)] if core else []
    else:
        return
    if end:
        inner[-1:] = rest
        edge.insert(0, moved)
    else:
        inner[:1] = rest
        edge.append(moved)


def trim(segment: list[Piece]) -> tuple[list[Piece], list[Piece], list[Piece]]:
    """(before, inner, after): the segment's edges that stay where they are (whitespace, atoms, and elements around
    the whole rest), and the rest, to translate."""
    before, inner, after = [], list(segment), []
    while inner:
        size = len(inner)
        _peel(inner, before, end=False)
        if inner:
            _peel(inner, after, end=True)
        if len(inner) > 1 and inner[0].kind == OPEN_TAG and pairs(inner).get(0) == len(inner) - 1:
            before.append(inner.pop(0))
            after.insert(0, inner.pop())
        if len(inner) == size:
            break
    return before, inner, after


@dataclass
class MarkupStats:
    """What the translation of fragments did: segments translated, those translated piece by piece between their
    tags, and translations whose symbols the model dropped, duplicated, invented or misnested (repaired)."""

    segments: int = 0
    split: int = 0
    repaired: int = 0

    def report(self) -> None:
        level = logging.WARNING if self.repaired else logging.INFO
        log.log(level, "html: %d segments translated, %d piece by piece between their tags; %d translations "
                "repaired (the model dropped, duplicated, invented or misnested tags: each is kept once, nested)",
                self.segments, self.split, self.repaired)


class TextMask(Protocol):
    """Masks the placeholders of a segment's texts as `｟phk｠` too (`nmtkit.translate.html_text`)."""

    originals: dict[str, str]  # symbol -> the fragment's characters

    def mask(self, raw: str, counts: Counter) -> str: ...  # raw's text, entities decoded, counts["ph"] updated
    def before_repair(self, output: str) -> str: ...
    def after_repair(self, tokens: list[str]) -> list[str]: ...


TextMasks = Callable[[int], TextMask | None]  # a segment's markup placeholders -> its text's mask (None: none)


def no_text_masks(markup_placeholders: int) -> None:
    """The text's placeholders stay text (no rule in force, or a model without the symbols)."""


@dataclass(frozen=True)
class Unit:
    """One text the model translates: a segment masked to symbols (`originals`: symbol -> markup), or text; `text`
    masked its placeholders, if any."""

    source: str
    originals: dict[str, str]
    text: TextMask | None = None

    def render(self, output: str, stats: MarkupStats) -> str:
        cleaned = output if self.text is None else self.text.before_repair(output)
        tokens, repaired = repair(cleaned, self.originals)  # a text without markup gets no symbols either
        kept = tokens if self.text is None else self.text.after_repair(tokens)
        stats.repaired += repaired or cleaned != output or "".join(kept) != "".join(tokens)
        # stripped: the segment's own outer whitespace stays around it (markup never starts or ends with a space);
        # printf conversions the translation reorders come back positional (`reordered`)
        originals = reordered("".join(kept), self.originals)
        return "".join(originals[token] if token in originals else escape(token, quote=False)
                       for token in kept).strip()


def masked(inner: list[Piece], text_masks: TextMasks) -> Unit | None:
    """The segment with its markup (and the placeholders of its text, `text_masks`) as symbols; None when it needs
    more symbols than the vocabulary has, or its text holds the symbols' brackets."""
    matched = pairs(inner)
    partner = {close: start for start, close in matched.items()}
    counts, numbers, texts, originals = Counter(), {}, [], {}
    text_mask = text_masks(sum(piece.kind == ATOM for piece in inner))
    for index, piece in enumerate(inner):
        if piece.kind == TEXT:
            masked_before = counts["ph"]
            texts.append(unescape(piece.raw) if text_mask is None else text_mask.mask(piece.raw, counts))
            if texts[-1].count(OPEN) + texts[-1].count(CLOSE) > 2 * (counts["ph"] - masked_before):
                return None  # a bracket of no symbol (the reserved family masks them unless out of symbols)
            continue
        if piece.kind == CLOSE_TAG:
            symbol = f"{OPEN}/t{numbers[partner[index]]}{CLOSE}"
        else:
            kind = "t" if piece.kind == OPEN_TAG else "ph"
            counts[kind] += 1
            numbers[index] = counts[kind]
            symbol = f"{OPEN}{kind}{counts[kind]}{CLOSE}"
        texts.append(symbol)
        originals[symbol] = piece.raw
    if counts["t"] > TAG_PAIR_SYMBOLS or counts["ph"] > PLACEHOLDER_SYMBOLS:
        return None
    return Unit("".join(texts), originals | (text_mask.originals if text_mask else {}), text_mask)


def _has_letters(raw: str) -> bool:
    return any(char.isalpha() for char in unescape(raw))


def split(inner: list[Piece], text_masks: TextMasks) -> list[str | Unit]:
    """The segment's markup as it is and each of its texts on its own (its placeholders masked by `text_masks`, if
    the model has the symbols), outer whitespace kept."""
    parts: list[str | Unit] = []
    for piece in inner:
        core = piece.raw.strip()
        if piece.kind != TEXT or not _has_letters(core):
            parts.append(piece.raw)
            continue
        start, text_mask = piece.raw.index(core), text_masks(0)
        unit = Unit(unescape(core), {}) if text_mask is None else \
            Unit(text_mask.mask(core, Counter()), text_mask.originals, text_mask)
        parts += [piece.raw[:start], unit, piece.raw[start + len(core):]]
    return parts


def plan(fragment: str, skip: frozenset[str], symbols: bool, stats: MarkupStats,
         text_masks: TextMasks = no_text_masks) -> list[str | Unit]:
    """The fragment as markup and whitespace to keep (strings) and units to translate, in order: the segments
    between breaks, each with its edges kept (`trim`) and the rest masked or split (`text_masks`: see `masked`)."""
    parts: list[str | Unit] = []
    for is_break, group in groupby(settle(pieces(fragment, skip)), key=lambda piece: piece.kind == BREAK):
        segment = list(group)
        before, inner, after = ([], [], []) if is_break else trim(segment)
        if not any(piece.kind == TEXT and _has_letters(piece.raw) for piece in inner):
            parts.append("".join(piece.raw for piece in segment))
            continue
        stats.segments += 1
        unit = masked(inner, text_masks) if symbols else None
        stats.split += unit is None and len(inner) > 1
        parts += [piece.raw for piece in before] + ([unit] if unit else split(inner, text_masks)) + \
            [piece.raw for piece in after]
    return parts


def skip_tags(names: Iterable[str]) -> frozenset[str]:
    """`SKIP` and the element names given (`--html-skip code,kbd`); a name that is no tag name is an error."""
    given = [name.strip() for name in names if name.strip()]
    for name in given:
        if not TAG_NAME.fullmatch(name):
            raise NmtkitError(f"--html-skip: {name!r} is not a tag name")
    return SKIP | {name.lower() for name in given}


def translate_fragments(fragments: list[str], translate: Callable[[list[str]], list[str]], symbols: bool,
                        skip: Iterable[str] = (), stats: MarkupStats | None = None,
                        text_masks: TextMasks = no_text_masks) -> list[str]:
    """Each fragment translated by `translate` (texts -> translations, one call for all), its markup kept (see the
    module's doc); `symbols`: the model knows the reserved symbols; `skip`: element names to exclude besides
    `SKIP`; `stats` counts what was done; `text_masks` masks placeholders inside the text (symbols only)."""
    stats = MarkupStats() if stats is None else stats
    excluded = skip_tags(skip)
    plans = [plan(fragment, excluded, symbols, stats, text_masks if symbols else no_text_masks)
             for fragment in fragments]
    translations = iter(translate([part.source for parts in plans for part in parts if isinstance(part, Unit)]))
    return ["".join(part if isinstance(part, str) else part.render(next(translations), stats) for part in parts)
            for parts in plans]
