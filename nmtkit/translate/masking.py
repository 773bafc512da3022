"""Placeholders at translation time (`decode.placeholders`, `nmtkit.symbols.placeholders`): the Translator masks each
source line before subword encoding, and checks, repairs (`repair.py`) and restores each hypothesis after decoding, so
that the user gets back the original bytes of every placeholder of the line, each exactly once, tag pairs nested.

The rule is the model's by default (`model`: what `prepare --set placeholders=...` masked in its training data, as
its checkpoint or export records it), or `auto`, `none` or a pattern file; masking needs the reserved symbols in the
model's vocabulary. Word alignments are computed on the masked pair (what the model read and wrote) and mapped back
to the words of the original text (`word_map`).
"""

from __future__ import annotations

import bisect
import logging
import re
from dataclasses import dataclass, field

from nmtkit.data.subword import UNK
from nmtkit.decoding.hypotheses import Hypothesis
from nmtkit.errors import NmtkitError
from nmtkit.symbols.placeholder_check import check
from nmtkit.symbols.placeholders import (
    SYMBOL,
    Patterns,
    Span,
    load_patterns,
    mask,
    placeholder_spans,
    reordered,
    reserved_symbols,
    restore,
)
from nmtkit.translate.engine import Engine, LoadedFiles
from nmtkit.translate.repair import repair, symbols

log = logging.getLogger(__name__)
WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class MaskedLine:
    """A source line as the model reads it, and the original text of each of its symbols."""

    text: str
    originals: dict[str, str] = field(default_factory=dict)


@dataclass
class PlaceholderCounts:
    """What the checks after decoding found, over a translator's life (shared by its variants)."""

    lines: int = 0  # lines translated that hold a placeholder
    repaired: int = 0  # of those, lines with a hypothesis that lost or broke one (repaired)

    def report(self) -> None:
        """Say on the log (stderr) how many lines lost or broke their placeholders."""
        if self.repaired:
            log.warning("%d of %d lines with placeholders lost or broke them; repaired", self.repaired, self.lines)
        elif self.lines:
            log.info("placeholders: all %d lines that hold them kept them", self.lines)


def model_patterns(rule: str, loaded: LoadedFiles) -> Patterns | None:
    """The pattern set of `decode.placeholders`: `model` reads the model's record (None: trained without)."""
    if rule != "model":
        return load_patterns(rule)
    families = (loaded.placeholders or {}).get("families")
    return Patterns.from_dict(families) if families else None


def lacks_symbols(loaded: LoadedFiles) -> bool:
    """Whether a subword model of `loaded` has not the reserved symbols as pieces of their own."""
    return any(subword.processor.piece_to_id(symbol) == UNK
               for subword in (loaded.src_subword, loaded.tgt_subword) for symbol in reserved_symbols())


class Masking:
    """One rule's masking of source lines, and the check, repair and restoring of their hypotheses; `counts` (shared
    by the translator's variants) counts the lines checked and repaired."""

    def __init__(self, rule: str, loaded: LoadedFiles, counts: PlaceholderCounts):
        self.patterns, self.loaded, self.counts = model_patterns(rule, loaded), loaded, counts
        if self.patterns is not None and lacks_symbols(loaded):
            raise NmtkitError(f"--placeholders {rule}: this model's vocabulary has no placeholder symbols (its data "
                              "was prepared without data.placeholders); translate with --placeholders none")

    def mask(self, text: str) -> MaskedLine:
        if self.patterns is None:
            return MaskedLine(text)
        return MaskedLine(*mask(text, self.patterns))

    def restore(self, text: str, line: MaskedLine) -> str:
        """A hypothesis of `line` with its placeholders' original text (as it is, with masking off); printf
        conversions it reorders in their positional form (`nmtkit.symbols.placeholders.reordered`)."""
        return text if self.patterns is None else restore(text, reordered(text, line.originals))

    def original_links(self, links: str, line: MaskedLine, translation: str) -> str:
        """Pharaoh `links` between masked `line` and its masked `translation` as links between their original
        words (`word_map`); as they are with masking off."""
        if self.patterns is None:
            return links
        return map_links(links, word_map(line.text, line.originals),
                         word_map(translation, reordered(translation, line.originals)))

    def keep(self, engine: Engine, lines: list[MaskedLine], sources: list[list[int]], found: list[list[Hypothesis]],
             decoded: list[list[tuple[str, float]]]) -> list[list[tuple[str, float]]]:
        """The `decoded` (text, score) of the hypotheses `found` for masked `lines` (subword ids `sources`), each
        text checked (`nmtkit.symbols.placeholder_check.check`, and `restores_exactly`) and repaired where it lost,
        broke or invented one, a missing one placed by the `engine`'s attention (`repair.py`); counts the lines."""
        if self.patterns is None:
            return decoded
        failing = [(index, rank) for index, line in enumerate(lines) if symbols(line.text)
                   for rank, (text, _) in enumerate(decoded[index])
                   if not check(line.text, text).ok or not restores_exactly(text, line.originals, self.patterns)]
        self.counts.lines += sum(1 for line in lines if symbols(line.text))
        self.counts.repaired += len({index for index, _ in failing})
        decoded = [list(hyps) for hyps in decoded]
        weights = engine.attention([sources[index] for index, _ in failing],
                                   [found[index][rank].tokens for index, rank in failing]) if failing else []
        for (index, rank), rows in zip(failing, weights):
            text, score = decoded[index][rank]
            anchors = self.anchors(lines[index].text, sources[index], found[index][rank].tokens, rows)
            text = repair(lines[index].text, text, anchors, self.patterns)
            decoded[index][rank] = (separate_glued(text, lines[index].originals, self.patterns), score)
        return decoded

    def anchors(self, source: str, source_ids: list[int], tokens: list[int],
                weights: list[list[float]]) -> dict[str, int]:
        """Symbol of `source` -> the character offset in the decoded `tokens` of the target token that attends
        most to it (none for a symbol the source ids lack, or that the end of the translation attends to most).
        Each source column and each target row is looked at once, however many symbols share them."""
        rows, piece_id = weights[: len(tokens) + 1], self.loaded.src_subword.processor.piece_to_id
        columns: dict[int, int] = {}  # piece -> its first column in the source ids
        for column, piece in enumerate(source_ids):
            columns.setdefault(piece, column)
        best_rows: dict[int, int] = {}
        offsets: dict[int, int] = {}
        anchors = {}
        for symbol in symbols(source):
            column = columns.get(piece_id(symbol))
            if column is None or not rows or column >= len(rows[0]):
                continue
            if column not in best_rows:
                best_rows[column] = max(range(len(rows)), key=lambda row: rows[row][column])
            best = best_rows[column]
            if best < len(tokens):
                if best not in offsets:
                    offsets[best] = len(self.loaded.tgt_subword.decode([tokens[:best]])[0])
                anchors[symbol] = offsets[best]
        return anchors


def restored_offsets(masked: str, originals: dict[str, str]) -> list[int]:
    """The offset in `restore(masked, originals)` of each character of `masked` (a symbol's characters: where its
    original text starts), and of its end."""
    offsets, restored, position = [], 0, 0
    for match in SYMBOL.finditer(masked):
        offsets += range(restored, restored + match.start() - position)
        restored += match.start() - position
        offsets += [restored] * (match.end() - match.start())
        restored += len(originals.get(match.group(), ""))
        position = match.end()
    offsets += range(restored, restored + len(masked) - position + 1)
    return offsets


def _symbol_spans(masked: str, originals: dict[str, str]) -> list[tuple[re.Match, Span]]:
    """Each symbol of `masked` with the span of its original text in `restore(masked, originals)`."""
    offsets = restored_offsets(masked, originals)
    return [(match, Span(offsets[match.start()], offsets[match.start()] + len(originals[match.group()]), ""))
            for match in SYMBOL.finditer(masked) if match.group() in originals]


def _found(masked: str, originals: dict[str, str], patterns: Patterns) -> list[tuple[int, int]]:
    return [(span.start, span.end) for span in placeholder_spans(restore(masked, originals), patterns)]


def restores_exactly(masked: str, originals: dict[str, str], patterns: Patterns) -> bool:
    """Whether the placeholders `patterns` finds in the restored `masked` are exactly its symbols' original texts:
    none spelled out of ordinary pieces, none glued to the text beside it into another (`$HOME` + `s`)."""
    return set(_found(masked, originals, patterns)) == {(span.start, span.end)
                                                        for _, span in _symbol_spans(masked, originals)}


def _glued(masked: str, originals: dict[str, str], patterns: Patterns) -> list[tuple[int, re.Match, bool, bool]]:
    """Each symbol of `masked` whose original text, restored, is part of another placeholder: its rank among the
    symbols, whether that placeholder starts before it, whether it ends after it. The symbols and the placeholders
    found are each in order, none overlapping, so the placeholders over a symbol are found by bisection."""
    found = _found(masked, originals, patterns)
    exact, ends = set(found), [end for _, end in found]
    glued = []
    for rank, (match, span) in enumerate(_symbol_spans(masked, originals)):
        if (span.start, span.end) in exact:
            continue
        before = after = False
        index = bisect.bisect_right(ends, span.start)  # the first found placeholder that ends after it starts
        while index < len(found) and found[index][0] < span.end:
            before, after = before or found[index][0] < span.start, after or found[index][1] > span.end
            index += 1
        if before or after:
            glued.append((rank, match, before, after))
    return glued


def separate_glued(masked: str, originals: dict[str, str], patterns: Patterns) -> str:
    """`masked` with a space between a symbol and the text beside it where, restored, the two would read as another
    placeholder (`$HOME` + `s` = `$HOMEs`); again while that makes another, but never twice on one side of a
    symbol (a space that did not part them once would not the next time)."""
    parted: set[tuple[int, bool]] = set()  # (a symbol's rank, its end rather than its start) where a space went
    while True:
        cuts = set()
        for rank, match, before, after in _glued(masked, originals, patterns):
            for cut, side, wanted in ((match.start(), False, before), (match.end(), True, after)):
                if wanted and (rank, side) not in parted:
                    parted.add((rank, side))
                    cuts.add(cut)
        if not cuts:
            return masked
        bounds = [0, *sorted(cuts), len(masked)]
        masked = " ".join(masked[start:end] for start, end in zip(bounds, bounds[1:]))


def word_map(masked: str, originals: dict[str, str]) -> list[list[int]]:
    """For each whitespace word of `masked`, the words of its restored text (`restore(masked, originals)`) that it
    overlaps: a placeholder with spaces inside (`<a href="x">`) is one masked word and several original ones. Both
    lists of words are in order, so those of one masked word are a run, found by bisection."""
    offsets = restored_offsets(masked, originals)
    words = [match.span() for match in WORD.finditer(restore(masked, originals))]
    starts, ends = [begin for begin, _ in words], [end for _, end in words]
    return [list(range(bisect.bisect_right(ends, offsets[match.start()]),
                       bisect.bisect_left(starts, offsets[match.end()]))) for match in WORD.finditer(masked)]


def map_links(links: str, source: list[list[int]], target: list[list[int]]) -> str:
    """Pharaoh links `i-j` between masked words as links between the original words (`word_map` of each side)."""
    pairs = {(i, j) for link in links.split() for i in source[int(link.split("-")[0])]
             for j in target[int(link.split("-")[1])]}
    return " ".join(f"{i}-{j}" for i, j in sorted(pairs))
