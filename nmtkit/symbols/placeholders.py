"""Placeholders and markup: recognise them, mask them to reserved symbols, restore them (`placeholder_check.py`
checks a translation's symbols).

A placeholder is text a translation must carry over untouched: a printf directive (`%s`, `%.250s`, `%1$s`), a
Python or .NET format field (`%(name)s`, `{0}`, `{name!r:>10}`), a shell variable (`$HOME`, `${HOME}`), an XML or
HTML tag (`<b>`, `</b>`, `<br/>`) or entity (`&amp;`). A translation that drops, duplicates, renames or breaks one
crashes the program that prints it or corrupts a page, so the model never sees them: `mask` replaces the k-th one of
a line (in order of appearance) with the reserved symbol `｟phk｠`, and an opening tag with its closing tag with the
linked symbols `｟tk｠` ... `｟/tk｠` (k-th pair by its opening tag), so that `check` can tell a misnested pair;
`restore` puts the original bytes back. The symbols are in SentencePiece's vocabulary as user-defined symbols
(`reserved_symbols`), one piece each, whatever the normalization rule (SentencePiece never normalizes them).

Their brackets, U+FF5F and U+FF60 (OpenNMT's placeholder brackets), do not occur in real text; where they do, each
run of them is masked as a placeholder of its own (the `reserved` family, always on when anything is), so that
every bracket of a masked line belongs to a symbol and any line round-trips byte for byte.

Which families a run recognises is its pattern set (`load_patterns`): `auto` (every built-in family below), `none`
(nothing masked) or a pattern file. Matching is leftmost-longest over all the families at once: the span that starts
first wins, then the longest match of any family there (a family's longest match, not Perl's leftmost-first one:
`a|ab` takes `ab`), at most 4,096 bytes long (`nmtkit.symbols.pattern_search.MAX_SPAN`); its family is the first listed
that matches exactly that span; spans never overlap. The patterns run on RE2 (`nmtkit.symbols.pattern_search`), in time
linear in the line whatever they are, so they are RE2's syntax; the built-ins spell out Python's whitespace where
RE2's `\\s` would be ASCII.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.errors import NmtkitError
from nmtkit.symbols.pattern_files import BEFORE_RE2, read_pattern_file
from nmtkit.symbols.pattern_search import PatternError, Regexp, byte_spans, char_offsets

OPEN, CLOSE = "\uff5f", "\uff60"  # ｟ ｠
SYMBOL = re.compile(f"{OPEN}(/?)(ph|t)([1-9][0-9]*){CLOSE}")
PLACEHOLDER_SYMBOLS = 32  # ｟ph1｠ ... ｟ph32｠ in the vocabulary; a line with more spells the rest in subwords
TAG_PAIR_SYMBOLS = 16  # ｟t1｠ ｟/t1｠ ... ｟t16｠ ｟/t16｠
RESERVED = "reserved"
TAG = "tag"
PRINTF = "printf"
ARGUMENT = re.compile(r"%(?:([1-9][0-9]*)\$)?(.*)", re.DOTALL)  # a printf directive: its argument's position, the rest
FAMILY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# elements whose start tag is markup even unclosed in its line: HTML's void and optional-end elements, inline styles
UNCLOSED_MARKUP = frozenset("br hr wbr img p li dt dd tr td th b i u s em strong tt sub sup small big span div font "
                            "center".split())
TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9:._-]*")


@dataclass(frozen=True)
class Family:
    """A named kind of placeholder: a regular expression that matches one, and examples of what it matches."""

    name: str
    regex: str
    examples: tuple[str, ...] = ()
    pattern: Regexp = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "pattern", Regexp(self.regex))


# Python's \s spelled out (RE2's is ASCII), so that the built-ins find on RE2 what they found on Python's re
_SPACE = r"\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_WS = f"[{_SPACE}]"
_TAG_NAME = r"[A-Za-z][A-Za-z0-9:._-]*"
_ATTRIBUTE = rf"{_WS}+[^{_SPACE}\"'<>/=]+(?:{_WS}*={_WS}*(?:\"[^\"]*\"|'[^']*'|[^{_SPACE}\"'=<>`]+))?"
_POSITION = r"(?:[1-9][0-9]*\$)"
_WIDTH = rf"(?:[0-9]+|\*{_POSITION}?)"
BUILTINS = {family.name: family for family in (
    # C/POSIX printf, as gettext's c-format checks it; no space flag: "100% sure" is text, not "% s"
    Family(PRINTF, rf"%(?:%|{_POSITION}?[-+#0']*{_WIDTH}?(?:\.{_WIDTH}?)?"
                     r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?[diouxXeEfFgGaAcCsSpnm])",
           ("%s", "%d", "%.250s", "%1$s", "%-10lu", "%5.2f", "%*d", "%%", "%'d")),
    Family("python", rf"%\([^(){_SPACE}]+\)[-+ #0]*(?:[0-9]+|\*)?(?:\.(?:[0-9]+|\*))?[diouxXeEfFgGcrsa%]",
           ("%(name)s", "%(count)d", "%(ratio).2f")),
    Family("qt", r"%L?[1-9][0-9]?", ("%1", "%L2", "%10")),  # Qt and KDE's numbered arguments
    # Python str.format and .NET composite formatting: field name, attribute/index, conversion, alignment, spec
    Family("brace", r"\{(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)?(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]{}]*\])*"
                    rf"(?:![rsa])?(?:,{_WS}*-?[0-9]+)?(?::[^{{}}]*)?\}}",
           ("{}", "{0}", "{name}", "{0:.2f}", "{user.name!r:>10}", "{0,-10:N2}", "{items[0]}")),
    Family("shell", r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*", ("$HOME", "${XDG_CONFIG_HOME}")),
    # XML/HTML start, end and empty tags, attributes quoted or not
    Family(TAG, rf"</{_TAG_NAME}{_WS}*>|<{_TAG_NAME}(?:{_ATTRIBUTE})*{_WS}*/?>",
           ("<b>", "</b>", "<br/>", "<file>", '<a href="https://example.org/?a=1&amp;b=2">', "<img src=x.png />")),
    Family("entity", r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});",
           ("&amp;", "&nbsp;", "&#169;", "&#x2014;")),
)}
RESERVED_FAMILY = Family(RESERVED, f"[{OPEN}{CLOSE}]+", (OPEN, OPEN + CLOSE))


@dataclass(frozen=True)
class Span:
    """text[start:end] is a placeholder of `family`."""

    start: int
    end: int
    family: str


class Patterns:
    """An ordered set of families (the reserved family added last) and the leftmost-longest search over them, all
    at once (see the module's doc)."""

    def __init__(self, families: list[Family]):
        self.families = [*families, RESERVED_FAMILY]
        try:
            self.combined = Regexp("|".join(f"(?:{family.regex})" for family in self.families), longest=True)
        except PatternError as error:  # each compiles alone, so what is left is their size together
            raise NmtkitError(f"placeholders: the families together are too large for RE2 ({error})") from None

    def as_dict(self) -> dict[str, str]:
        """Name -> regex of each family but the reserved one: what a manifest or checkpoint records."""
        return {family.name: family.regex for family in self.families[:-1]}

    @classmethod
    def from_dict(cls, regexes: dict[str, str]) -> Patterns:
        """The set a manifest or checkpoint recorded (`as_dict`); a built-in as recorded before RE2 is today's."""
        current = {name: BUILTINS[name].regex if BEFORE_RE2.get(name) == regex else regex
                   for name, regex in regexes.items()}
        return cls([_family(f"family {name!r}", name, regex, set()) for name, regex in current.items()])

    def find(self, text: str) -> list[Span]:
        """The placeholders of `text`, left to right, non-overlapping: at each step the match of any family that
        starts first, the longest of those, as the first family that matches exactly that span."""
        data = text.encode("utf-8", "surrogatepass")  # once: a search of a str would encode it again
        found = list(byte_spans(self.combined, data))
        offsets = char_offsets(text, data, [offset for span in found for offset in span])
        return [Span(offsets[2 * index], offsets[2 * index + 1], self._family_of(data, start, end))
                for index, (start, end) in enumerate(found)]

    def _family_of(self, data: bytes, start: int, end: int) -> str:
        """The name of the first family that matches exactly data[start:end] (one does: the search found it)."""
        return next(family.name for family in self.families if family.pattern.fullmatch(data, start, end))


def _family(where: str, name: str, regex: str | None, seen: set[str]) -> Family:
    """A family of a pattern file, checked; `regex` None names a built-in family."""
    if not isinstance(name, str) or not FAMILY_NAME.fullmatch(name) or name == RESERVED:
        raise NmtkitError(f"{where}: {name!r} is not a family name (letters, digits, _ and -; not {RESERVED!r})")
    if name in seen:
        raise NmtkitError(f"{where}: family {name!r} is given twice")
    seen.add(name)
    if regex is None:
        if name not in BUILTINS:
            raise NmtkitError(f"{where}: {name!r} is no built-in family ({', '.join(BUILTINS)}); give a regex")
        return BUILTINS[name]
    if not isinstance(regex, str):
        raise NmtkitError(f"{where}: the pattern of {name!r} must be a string")
    try:
        family = Family(name, regex)
    except PatternError as error:
        raise NmtkitError(f"{where}: family {name!r}: bad regular expression ({error}; patterns are RE2's syntax: "
                          "no lookarounds or backreferences)") from error
    if family.pattern.matches_empty():
        raise NmtkitError(f"{where}: family {name!r}: the pattern can match the empty string")
    return family


def load_patterns(spec: str) -> Patterns | None:
    """The pattern set `spec` names: `auto` (every built-in family), `none` (None: nothing is masked) or a pattern
    file, YAML (`.yaml`, `.yml`) or `name<TAB>regex` lines; a bad entry is an error naming its line."""
    if spec == "none":
        return None
    if spec == "auto":
        return Patterns(list(BUILTINS.values()))
    path = Path(spec)
    if not path.is_file():
        raise NmtkitError(f"placeholders: {spec!r} is neither auto, none nor a pattern file")
    entries = read_pattern_file(path)
    if not entries:
        raise NmtkitError(f"{path}: the pattern file names no family")
    seen: set[str] = set()
    return Patterns([_family(where, name, regex, seen) for where, name, regex in entries])


def reserved_symbols() -> list[str]:
    """The symbols a vocabulary reserves for masked placeholders, as SentencePiece user-defined symbols."""
    tags = [symbol for k in range(1, TAG_PAIR_SYMBOLS + 1) for symbol in (f"{OPEN}t{k}{CLOSE}", f"{OPEN}/t{k}{CLOSE}")]
    return [f"{OPEN}ph{k}{CLOSE}" for k in range(1, PLACEHOLDER_SYMBOLS + 1)] + tags


@dataclass(frozen=True)
class Unit:
    """What one symbol stands for: a placeholder, or a tag pair (its opening and its closing tag)."""

    spans: tuple[Span, ...]
    texts: tuple[str, ...]

    @property
    def reserved(self) -> bool:
        return self.spans[0].family == RESERVED


def _tag_parts(text: str, span: Span) -> tuple[str, str] | None:
    """("open" | "close", tag name) of a start or end tag of the tag family; None otherwise: empty tags, and tags
    with a ">" inside (in an attribute's value). Read in time linear in the span (a lazy regex backtracks)."""
    if span.family != TAG or text[span.start] != "<" or text[span.end - 1] != ">":
        return None
    closing = text.startswith("</", span.start)
    name = TAG_NAME.match(text, span.start + 1 + closing, span.end)
    if (name is None or text.find(">", name.end(), span.end) != span.end - 1
            or span.end - 2 >= name.end() and text[span.end - 2] == "/"):
        return None
    return ("close" if closing else "open"), name.group()


def _pairs(text: str, spans: list[Span]) -> dict[int, int]:
    """Opening span index -> closing span index of the tag pairs, matched by name as an HTML parser recovers: an end
    tag closes the innermost open tag of its name, and leaves the open tags inside that one unpaired. A stack of the
    open tags and, per name, where in it those of that name are: each tag is pushed and popped once."""
    pairs, open_tags, depths = {}, [], {}
    for index, span in enumerate(spans):
        parts = _tag_parts(text, span)
        if parts is None:
            continue
        kind, name = parts
        if kind == "open":
            depths.setdefault(name, []).append(len(open_tags))
            open_tags.append((name, index))
        elif depths.get(name):
            depth = depths[name][-1]
            pairs[open_tags[depth][1]] = index
            while len(open_tags) > depth:
                depths[open_tags.pop()[0]].pop()
    return pairs


def _loose(text: str, span: Span) -> bool:
    """Whether `span` is a start tag that reads as a usage message's metavariable (`<name>`, `<host name ...>`): no
    attribute value, not self-closing, an element name HTML does not leave unclosed (`<br>`, `<p>`, `<b>`)."""
    parts = _tag_parts(text, span)
    return (parts is not None and parts[0] == "open" and parts[1].lower() not in UNCLOSED_MARKUP
            and "=" not in text[span.start:span.end])


def placeholder_spans(text: str, patterns: Patterns) -> list[Span]:
    """The spans of `text` that are placeholders: those `patterns` finds, but a start tag left unclosed in the line
    that reads as a metavariable (`_loose`) is text (translators translate `<name>`), the placeholders inside it
    (`<corrupt: %14ld>`) still placeholders."""
    spans = patterns.find(text)
    pairs = _pairs(text, spans)
    kept = []
    for index, span in enumerate(spans):
        if index in pairs or not _loose(text, span):
            kept.append(span)
            continue
        inside = patterns.find(text[span.start + 1:span.end])  # without its "<": no tag starts inside
        kept += [Span(span.start + 1 + part.start, span.start + 1 + part.end, part.family) for part in inside]
    return kept


def find_units(text: str, patterns: Patterns) -> list[Unit]:
    """The units of `text` in order of their first span (`placeholder_spans`)."""
    spans = placeholder_spans(text, patterns)
    pairs = _pairs(text, spans)
    closing = set(pairs.values())
    units = []
    for index, span in enumerate(spans):
        if index in closing:
            continue
        unit_spans = (span, spans[pairs[index]]) if index in pairs else (span,)
        units.append(Unit(unit_spans, tuple(text[part.start:part.end] for part in unit_spans)))
    return units


def _symbols(units: list[Unit], counts: Counter) -> list[tuple[str, ...]]:
    """The next symbols of `counts` (per kind, updated) for each unit in turn."""
    symbols = []
    for unit in units:
        kind = "t" if len(unit.spans) == 2 else "ph"
        counts[kind] += 1
        symbols.append((f"{OPEN}{kind}{counts[kind]}{CLOSE}", f"{OPEN}/t{counts[kind]}{CLOSE}")[:len(unit.spans)])
    return symbols


def _render(text: str, units: list[Unit], symbols: list[tuple[str, ...]]) -> tuple[str, dict[str, str]]:
    """`text` with each unit's spans replaced by its symbols; symbol -> original text."""
    replaced = sorted((span.start, span.end, symbol, original) for unit, unit_symbols in zip(units, symbols)
                      for span, symbol, original in zip(unit.spans, unit_symbols, unit.texts))
    pieces, originals, position = [], {}, 0
    for start, end, symbol, original in replaced:
        pieces += [text[position:start], symbol]
        originals[symbol] = original
        position = end
    pieces.append(text[position:])
    return "".join(pieces), originals


def mask(text: str, patterns: Patterns) -> tuple[str, dict[str, str]]:
    """`text` with every placeholder replaced by its symbol, and each symbol's original text."""
    units = find_units(text, patterns)
    return _render(text, units, _symbols(units, Counter()))


@dataclass
class PairMasking:
    """What `mask_pair` did to a corpus: lines and units masked, units left as text (on one side only)."""

    lines: int = 0
    masked: int = 0
    one_sided: int = 0


def _is_argument(text: str) -> bool:
    """Whether printf directive `text` takes an argument: not `%%`, nor glibc's `%m` (the text of errno)."""
    return text != "%%" and not text.endswith("m")


def _arguments(texts: list[str]) -> list[tuple[int, str]] | None:
    """(argument number, directive without its position) of each of a line's printf conversions `texts`, in order,
    numbered as printf takes its arguments (`%s %d` as `%1$s %2$d`); None where the line mixes both forms or takes a
    width from an argument (`%*d`)."""
    parsed = [ARGUMENT.fullmatch(text) for text in texts]
    if len({match[1] is None for match in parsed}) > 1 or any("*" in match[2] for match in parsed):
        return None
    return [(int(match[1]) if match[1] else number, match[2]) for number, match in enumerate(parsed, 1)]


def _argument_keys(units: list[Unit]) -> dict[int, tuple[int, str]]:
    """Unit index -> (argument number, directive) of each printf conversion of `units` (`_arguments`)."""
    indices = [index for index, unit in enumerate(units)
               if unit.spans[0].family == PRINTF and _is_argument(unit.texts[0])]
    return dict(zip(indices, _arguments([units[index].texts[0] for index in indices]) or []))


def placeholder_keys(text: str, patterns: Patterns) -> Counter:
    """What the placeholders of `text` say, to compare a translation's with its source's: each unit's texts, a printf
    conversion as its argument and directive (`%s ... %d` and `%2$d ... %1$s` say the same)."""
    units = find_units(text, patterns)
    keys = _argument_keys(units)
    return Counter(keys.get(index, unit.texts) for index, unit in enumerate(units))


def _take(candidates: deque[int] | None, taken: set[int]) -> int | None:
    """The first of `candidates` not `taken` (now taken), or None; the taken ones it passes are dropped, for good
    (each candidate is looked at once, whatever the number of repeats of a placeholder)."""
    while candidates:
        index = candidates.popleft()
        if index not in taken:
            taken.add(index)
            return index
    return None


def mask_pair(src: str, tgt: str, patterns: Patterns, stats: PairMasking | None = None) -> tuple[str, str]:
    """A training pair with the placeholders both sides have masked alike: a printf conversion of the source takes
    the same symbol as the target's conversion of the same argument (`%s %s` and `%2$s ... %1$s`: a translation that
    reorders them), any other unit as the first unmatched unit of the target with the same text (a tag pair: the
    same opening and closing tag). Units of one side only are left as text, so that the model never learns to drop
    or invent a symbol; runs of reserved brackets are masked on each side all the same (see the module's doc)."""
    src_units, tgt_units = find_units(src, patterns), find_units(tgt, patterns)
    by_text: dict[tuple[str, ...], deque[int]] = {}
    for index, unit in enumerate(tgt_units):
        by_text.setdefault(unit.texts, deque()).append(index)
    by_argument: dict[tuple[int, str], deque[int]] = {}
    for index, key in _argument_keys(tgt_units).items():
        by_argument.setdefault(key, deque()).append(index)
    src_keys, taken, matches = _argument_keys(src_units), set(), []
    for index, unit in enumerate(src_units):
        partner = _take(by_argument.get(src_keys.get(index)), taken)
        partner = _take(by_text.get(unit.texts), taken) if partner is None else partner
        if partner is not None:
            matches.append((unit, tgt_units[partner]))
    counts = Counter()
    symbols = _symbols([src_unit for src_unit, _ in matches], counts)
    matched = {id(unit) for pair in matches for unit in pair}
    own = [[unit for unit in units if unit.reserved and id(unit) not in matched] for units in (src_units, tgt_units)]
    src_symbols, tgt_symbols = symbols + _symbols(own[0], counts), symbols + _symbols(own[1], counts)
    if stats is not None:
        stats.lines += bool(matches)
        stats.masked += len(matches)
        stats.one_sided += len(src_units) + len(tgt_units) - 2 * len(matches)
    return (_render(src, [unit for unit, _ in matches] + own[0], src_symbols)[0],
            _render(tgt, [unit for _, unit in matches] + own[1], tgt_symbols)[0])


def reordered(hypothesis: str, originals: dict[str, str]) -> dict[str, str]:
    """The `originals` to restore `hypothesis` with: where it writes the source's printf conversions (`%s ... %d`)
    in another order, each in its positional form (`%2$d ... %1$s`), as gettext's translators write them and printf
    reads them (restored as they are, the arguments would be swapped); `originals` itself otherwise."""
    conversions = [symbol for symbol, text in originals.items()
                   if BUILTINS[PRINTF].pattern.matches(text) and _is_argument(text)]
    if len(conversions) < 2 or any(ARGUMENT.fullmatch(originals[symbol])[1] or "*" in originals[symbol]
                                   for symbol in conversions):
        return originals
    rank = {symbol: number for number, symbol in enumerate(conversions, 1)}
    order = [rank[match.group()] for match in SYMBOL.finditer(hypothesis) if match.group() in rank]
    if order == sorted(order):
        return originals
    return {**originals, **{symbol: f"%{number}${originals[symbol][1:]}" for symbol, number in rank.items()}}


def restore(hypothesis: str, originals: dict[str, str]) -> str:
    """`hypothesis` with each symbol replaced by its original text; a symbol the source did not have is dropped
    (never shown to a user); `check` counts both."""
    return SYMBOL.sub(lambda match: originals.get(match.group(), ""), hypothesis)
