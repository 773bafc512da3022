"""HTML and XML input (`translate --input-format html`): translate the text inside markup, keep the markup.

Each input is a fragment (a line), read by `nmtkit.symbols.markup_scan` in linear time, each of its characters in
exactly one piece. Block-level elements (`BLOCK`: `p`, `div`, `li`, `td`, `h1`, `br`...), doctypes and processing
instructions split it into segments, each translated as a sentence; inline elements (any other) stay inside their
segment. Kept byte for byte, never translated: every tag with its attribute values, comments, CDATA, markup the
line ends inside, text without letters outside a translated segment, and the whole of an excluded element (`SKIP`,
the names a user adds, any element with `translate="no"`). Entities are decoded for the model; the translation is
written with `&`, `<` and `>` escaped (so a translation that copies its source gives the fragment back but for its
translated texts, each its characters so escaped), between the whitespace its source starts and ends with.

A segment's inline markup goes through the model one of two ways:
- as symbols, when the model's vocabulary has the reserved symbols (trained with placeholders,
  `nmtkit.symbols.placeholders`): start and end tag become the pair `｟tk｠` ... `｟/tk｠`; an empty element, a
  comment or an excluded element the placeholder `｟phk｠`; the segment is translated whole, and `repair` puts each
  symbol in the translation exactly once, pairs properly nested, so the output is well-formed whenever the input
  is. With a placeholder rule in force, the placeholders of the text (`%s`, `{0}`) are symbols too (`text_masks`).
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
from html import escape
from itertools import groupby
from typing import Protocol

from nmtkit.errors import NmtkitError
from nmtkit.symbols.markup_repair import holds_brackets, repair
from nmtkit.symbols.markup_scan import ATOM, BREAK, EMPTY, END, START, TEXT, Token, scan, unescape
from nmtkit.symbols.placeholders import CLOSE, OPEN, PLACEHOLDER_SYMBOLS, TAG_PAIR_SYMBOLS, reordered

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

OPEN_TAG, CLOSE_TAG = "open", "close"  # an inline start or end tag (TEXT, ATOM, BREAK: the scanner's kinds)


@dataclass(frozen=True)
class Piece:
    """A stretch of the fragment: text; an inline start or end tag; an atom (markup kept whole inside its
    segment: an empty inline element, a comment, an excluded element); or a break (markup that ends a segment)."""

    kind: str
    raw: str  # the fragment's own characters
    name: str = ""  # the tag name of a start or end tag


def _kind(token: str, name: str) -> str:
    """The kind of piece a token of the scanner is (one not excluded)."""
    if token in (TEXT, ATOM, BREAK):
        return token
    if name in BLOCK:
        return BREAK
    if token == EMPTY or name in VOID:
        return ATOM
    return OPEN_TAG if token == START else CLOSE_TAG


def _element_end(tokens: list[Token], start: int) -> int:
    """The index of the end tag that closes the element started at `start` (the last token if none does)."""
    name, depth = tokens[start][3], 0
    for index in range(start, len(tokens)):
        if tokens[index][3] == name and tokens[index][2] in (START, END):
            depth += 1 if tokens[index][2] == START else -1
            if depth == 0:
                return index
    return len(tokens) - 1


def pieces(fragment: str, skip: frozenset[str] = SKIP) -> list[Piece]:
    """The fragment as pieces, adjacent text merged; an excluded element (a name in `skip`, or `translate="no"`)
    is one piece, an atom or a break as its tag is inline or block. Together the pieces are the fragment."""
    tokens = scan(fragment)
    spans: list[tuple[str, int, int, str]] = []  # kind, start, end, tag name
    index = 0
    while index < len(tokens):
        start, _, token, name, keep = tokens[index]
        last = index
        if token == START and (name in skip or keep) and name not in VOID:
            last = _element_end(tokens, index)  # the tokens up to it are this piece's: each is read once
            kind = BREAK if name in BLOCK else ATOM
        else:
            kind = _kind(token, name)
        end = tokens[last][1]
        if kind == TEXT and spans and spans[-1][0] == TEXT:
            start = spans.pop()[1]
        spans.append((kind, start, end, name if kind in (OPEN_TAG, CLOSE_TAG) else ""))
        index = last + 1
    return [Piece(kind, fragment[start:end], name) for kind, start, end, name in spans]


def pairs(found: list[Piece]) -> dict[int, int]:
    """Start tag index -> index of the end tag that closes it in the same segment, as an HTML parser recovers: an
    end tag closes the innermost open element of its name and leaves those opened inside it unclosed."""
    matched: dict[int, int] = {}
    open_tags: list[int] = []  # the open elements, outermost first
    by_name: dict[str, list[tuple[int, int]]] = {}  # name -> (depth in open_tags, index), innermost last
    for index, piece in enumerate(found):
        if piece.kind == BREAK:
            open_tags, by_name = [], {}
        elif piece.kind == OPEN_TAG:
            by_name.setdefault(piece.name, []).append((len(open_tags), index))
            open_tags.append(index)
        elif piece.kind == CLOSE_TAG:
            named = by_name.get(piece.name, [])
            # an element left unclosed by an outer one's end tag is gone from open_tags: dropped here, once
            while named and (named[-1][0] >= len(open_tags) or open_tags[named[-1][0]] != named[-1][1]):
                named.pop()
            if named:
                depth, start = named.pop()
                matched[start] = index
                del open_tags[depth:]
    return matched


def settle(found: list[Piece]) -> list[Piece]:
    """`found` with each start or end tag that is unpaired within its segment made a break, and so on until all
    pair (an unpaired tag moved by a translation could break the nesting of the tags around it).

    In one pass, to the same fixpoint: the tags left are the largest set whose segments, the other tags made breaks,
    nest properly (a round keeps every tag of such a set, and its fixpoint is one). An end tag that does not close
    the innermost open element can close none (those opened after its partner would stay open inside the pair), so
    it is a break, and so is every element still open across it or across a break."""
    unpaired, open_tags = [], []
    for index, piece in enumerate(found):
        if piece.kind == OPEN_TAG:
            open_tags.append(index)
        elif piece.kind == CLOSE_TAG and open_tags and found[open_tags[-1]].name == piece.name:
            open_tags.pop()
        elif piece.kind in (CLOSE_TAG, BREAK):
            unpaired += open_tags + ([index] if piece.kind == CLOSE_TAG else [])
            open_tags = []
    broken = set(unpaired + open_tags)
    return [replace(piece, kind=BREAK) if index in broken else piece for index, piece in enumerate(found)]


def _peel(inner: list[Piece], low: int, high: int, edge: list[Piece], end: bool) -> tuple[int, int]:
    """Move an atom, or a text's outer whitespace, from the start (or `end`) of `inner[low:high]` to `edge` (kept
    there); the new (low, high)."""
    index = high - 1 if end else low
    piece = inner[index]
    if piece.kind == TEXT and (piece.raw[-1:] if end else piece.raw[:1]).isspace():
        core = piece.raw.rstrip() if end else piece.raw.lstrip()
        edge.append(Piece(TEXT, piece.raw[len(core):] if end else piece.raw[:len(piece.raw) - len(core)]))
        inner[index] = Piece(TEXT, core)
        if core:
            return low, high
    elif piece.kind == ATOM:
        edge.append(piece)
    else:
        return low, high
    return (low, high - 1) if end else (low + 1, high)


def trim(segment: list[Piece]) -> tuple[list[Piece], list[Piece], list[Piece]]:
    """(before, inner, after): the edges of a settled segment (`settle`: its tags paired) that stay where they are
    (whitespace, atoms, and elements around the whole rest), and the rest, to translate."""
    matched, inner = pairs(segment), list(segment)
    before, after, low, high = [], [], 0, len(segment)
    while low < high:
        was = (low, high)  # only a text stripped: its edge is no space now, nor a tag to peel
        low, high = _peel(inner, low, high, before, end=False)
        if low < high:
            low, high = _peel(inner, low, high, after, end=True)
        if high - low > 1 and inner[low].kind == OPEN_TAG and matched.get(low) == high - 1:
            before.append(inner[low])
            after.append(inner[high - 1])
            low, high = low + 1, high - 1
        if (low, high) == was:
            break
    return before, inner[low:high], after[::-1]


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
    masked its placeholders, if any; `raw` the fragment's characters it stands for."""

    raw: str
    source: str
    originals: dict[str, str]
    text: TextMask | None = None

    def render(self, output: str, stats: MarkupStats) -> str:
        cleaned = output if self.text is None else self.text.before_repair(output)
        # a text without markup gets no symbols either; the brackets of the source's own text are text
        tokens, repaired = repair(cleaned, self.originals, holds_brackets(self.source, self.originals))
        kept = tokens if self.text is None else self.text.after_repair(tokens)
        stats.repaired += repaired or cleaned != output or "".join(kept) != "".join(tokens)
        # printf conversions the translation reorders come back positional (`reordered`)
        originals = reordered("".join(kept), self.originals)
        return self._edges("".join(originals[token] if token in originals else escape(token, quote=False)
                                   for token in kept))

    def _edges(self, rendered: str) -> str:
        """`rendered` stripped, between the source's own outer whitespace: what the model adds around its
        translation goes, what an entity of the fragment puts there (`&nbsp;Hello`) stays (trim keeps the rest)."""
        core = self.source.strip()
        lead = self.source[:self.source.index(core)] if core else self.source
        return lead + rendered.strip() + self.source[len(lead) + len(core):]


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
            if _stray_brackets(texts[-1], counts["ph"] - masked_before):
                return None
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
    return Unit("".join(piece.raw for piece in inner), "".join(texts),
                originals | (text_mask.originals if text_mask else {}), text_mask)


def _stray_brackets(text: str, placeholders: int) -> bool:
    """Whether a text masked with `placeholders` symbols holds a bracket of no symbol (the reserved family masks
    them, unless out of symbols or inside an entity's characters)."""
    return text.count(OPEN) + text.count(CLOSE) > 2 * placeholders


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
        start, text_mask, counts = piece.raw.index(core), text_masks(0), Counter()
        source = None if text_mask is None else text_mask.mask(core, counts)
        unit = Unit(core, unescape(core), {}) if source is None or _stray_brackets(source, counts["ph"]) else \
            Unit(core, source, text_mask.originals, text_mask)  # else: its placeholders unguarded, brackets text
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
