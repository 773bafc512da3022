"""Placeholders inside the text of HTML input (`nmtkit.symbols.markup`): with a masking rule in force
(`decode.placeholders`, `nmtkit.translate.masking`), the placeholders the rule finds in a segment's text (`%s`, `{0}`,
`$HOME`) go through the model as placeholder symbols `｟phk｠`, numbered with the segment's markup symbols in order of
appearance, so that the search guard and the repair keep each exactly once; each comes back as the fragment's own
characters.

The rule reads the text the model reads: entities decoded. An entity of the markup (`&amp;`, `&nbsp;`) is the
character it stands for, as without a rule; the `entity` family matches only an entity the text spells out
(`&amp;amp;`, shown as `&amp;`), which comes back as written. A placeholder whose edge falls inside the characters
of one entity stays text, as do those beyond the 32 placeholder symbols (the segment's markup takes its symbols
first); with one left as text, a placeholder the model spells out of ordinary pieces is left alone too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from nmtkit.symbols.markup_scan import CHARREF, unescape
from nmtkit.symbols.placeholders import CLOSE, OPEN, PLACEHOLDER_SYMBOLS, SYMBOL, Patterns, placeholder_spans
from nmtkit.translate.masking import separate_glued
from nmtkit.translate.repair import remove_spelled


def decoded(raw: str) -> tuple[str, dict[int, int]]:
    """`unescape(raw)`, and the offset in `raw` of each offset of it that no entity's characters straddle."""
    parts, bounds, position, length = [], {0: 0}, 0, 0
    for match in [*CHARREF.finditer(raw), None]:
        end = len(raw) if match is None else match.start()
        bounds.update((length + offset - position, offset) for offset in range(position + 1, end + 1))
        parts.append(raw[position:end])
        length += end - position
        if match is not None:
            parts.append(unescape(match.group()))
            length += len(parts[-1])
            bounds[length], position = match.end(), match.end()
    return "".join(parts), bounds


def tokens(masked: str) -> list[str]:
    """`masked` as its texts and symbols, in order (no empty text)."""
    parts, position = [], 0
    for match in SYMBOL.finditer(masked):
        parts += [masked[position:match.start()], match.group()]
        position = match.end()
    return [part for part in [*parts, masked[position:]] if part]


@dataclass
class TextPlaceholders:
    """The placeholders of a segment's text masked so far (`mask`) under the rule `patterns`, at most `room`:
    symbol -> the fragment's characters (`originals`) and the text the model's source had (`texts`); `complete`
    while every one the rule found is masked."""

    patterns: Patterns
    room: int
    originals: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    complete: bool = True

    @classmethod
    def of(cls, patterns: Patterns | None, markup_placeholders: int) -> TextPlaceholders | None:
        """None without a rule; else room for what the markup's placeholders leave of the 32 symbols."""
        return None if patterns is None else cls(patterns, max(0, PLACEHOLDER_SYMBOLS - markup_placeholders))

    def mask(self, raw: str, counts: Counter) -> str:
        """The text of `raw` (entities decoded) with its placeholders as the next `｟phk｠` of `counts` (updated)."""
        text, bounds = decoded(raw)
        parts, position = [], 0
        for span in placeholder_spans(text, self.patterns):
            if len(self.texts) == self.room or span.start not in bounds or span.end not in bounds:
                self.complete = False
                continue
            counts["ph"] += 1
            symbol = f"{OPEN}ph{counts['ph']}{CLOSE}"
            parts += [text[position:span.start], symbol]
            self.originals[symbol] = raw[bounds[span.start]:bounds[span.end]]
            self.texts[symbol] = text[span.start:span.end]
            position = span.end
        return "".join(parts) + text[position:]

    def before_repair(self, output: str) -> str:
        """`output` without a placeholder spelled out of ordinary pieces (one more than its source has)."""
        return remove_spelled(output, self.patterns) if self.texts and self.complete else output

    def after_repair(self, repaired: list[str]) -> list[str]:
        """`repaired` (texts and symbols) with a space where a placeholder and the text beside it would read as
        another one (`$HOME` + `s`); each stretch between two symbols of markup on its own (a markup symbol is no
        text: beside the text's own brackets it would read as a placeholder of the reserved family)."""
        if not self.texts:
            return repaired
        parted, stretch = [], []
        for token in [*repaired, None]:
            if token is not None and (token in self.texts or not SYMBOL.fullmatch(token)):
                stretch.append(token)
                continue
            parted += tokens(separate_glued("".join(stretch), self.texts, self.patterns)) + ([token] if token else [])
            stretch = []
        return parted
