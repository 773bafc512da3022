"""Repairing a masked translation that lost or broke its placeholders, so that what
`nmtkit.symbols.placeholder_check.check` asks holds for every line an engine returns, whether or not its search
guarantees it (CTranslate2 cannot constrain its search; nmtkit's own search may be told not to): each symbol of the
source exactly once, no other symbol, no stray bracket, and tag pairs opened before they close and properly nested.

The repair changes as little as it can: a missing symbol is inserted where the model's attention puts it
(`anchors`: the character offset of the target token that attends most to the symbol's source token), a
placeholder or an opening tag before that word, a closing tag at the end of the word before it; without an anchor,
at the end of the line. Of a symbol written twice the first stays; a symbol the source lacks and a stray bracket are
removed; a pair closed before it opens has its two symbols swapped, and a pair that closes while pairs opened inside
it are still open closes those first, there.

A model may also spell a placeholder out of ordinary pieces (`%1$s` as `%`, `1`, `$`, `s`): no symbol, but one more
placeholder once restored. Given the patterns, the repair finds those in the text between symbols (`spelled`) and
removes them, as a symbol the source lacks; a space left doubled is single again.
"""

from __future__ import annotations

import re

from nmtkit.symbols.placeholders import CLOSE, OPEN, RESERVED, SYMBOL, Patterns, placeholder_spans

STRAY = re.compile(f"[{OPEN}{CLOSE}]")


def symbols(text: str) -> list[str]:
    """The symbols of a masked text, in order."""
    return [match.group() for match in SYMBOL.finditer(text)]


def _is_tag(part: str, closing: bool) -> bool:
    return part.startswith(f"{OPEN}/" if closing else f"{OPEN}t")


def _partner(symbol: str) -> str:
    return symbol.replace(f"{OPEN}/", OPEN) if _is_tag(symbol, True) else symbol.replace(OPEN, f"{OPEN}/")


def _insertion_points(text: str) -> list[int]:
    """Where a symbol anchored at each offset of `text` (and at its end) goes: before the word that starts there or
    holds it (a symbol is never cut), or the end of the line. One walk each way, whatever the number of symbols."""
    word_starts = [0] * (len(text) + 1)  # the start of the word each offset is in (a symbol ends a word too)
    for offset in range(1, len(text) + 1):
        word_starts[offset] = offset if text[offset - 1].isspace() or text[offset - 1] == CLOSE else \
            word_starts[offset - 1]
    points, following = [len(text)] * (len(text) + 1), len(text)  # following: the next offset that is no space
    for offset in reversed(range(len(text))):
        following = following if text[offset].isspace() else offset
        points[offset] = word_starts[following]
    return points


def insert_missing(text: str, missing: list[str], anchors: dict[str, int]) -> str:
    """`text` with the `missing` symbols inserted (see the module's doc): a placeholder or an opening tag before
    the word of its anchor, a closing tag at the end of the word before; those of one place side by side, in the
    given order."""
    points = _insertion_points(text) if missing else []
    places: dict[int, list[str]] = {}
    for symbol in missing:
        offset = anchors.get(symbol)
        place = len(text) if offset is None or offset >= len(text) else points[offset]
        if _is_tag(symbol, True) and 0 < place < len(text) and text[place - 1].isspace():
            place -= 1
        places.setdefault(place, []).append(symbol)
    pieces, position = [], 0
    for place in sorted(places):
        run = "".join(places[place])
        if place == len(text):
            glued = not text or text[-1].isspace() or text[-1] == CLOSE or _is_tag(run, True)
            pieces += [text[position:], "" if glued else " ", run]
        else:
            pieces += [text[position:place], run, "" if text[place].isspace() else " "]
        position = place
    return "".join(pieces) + text[position:]


def _parts(text: str) -> list[str]:
    """`text` as alternating text and symbols (text parts without brackets: a stray one is dropped)."""
    parts, position = [], 0
    for match in SYMBOL.finditer(text):
        parts += [STRAY.sub("", text[position:match.start()]), match.group()]
        position = match.end()
    return [*parts, STRAY.sub("", text[position:])]


def _keep(parts: list[str], wanted: set[str]) -> list[str]:
    """`parts` without the symbols not `wanted` and the repeats of a symbol; a space left doubled where one went is
    single again."""
    kept, seen = [parts[0]], set()
    for index in range(1, len(parts), 2):
        symbol, after = parts[index], parts[index + 1]
        if symbol in wanted and symbol not in seen:
            seen.add(symbol)
            kept += [symbol, after]
        elif kept[-1][-1:].isspace() and after[:1] == " ":
            kept[-1] += after[1:]
        else:
            kept[-1] += after
    return kept


def _nest(parts: list[str]) -> list[str]:
    """`parts` (text without brackets, and symbols) with every tag pair opened before it closes and the pairs
    properly nested."""
    parts = list(parts)
    where = {part: index for index, part in enumerate(parts) if _is_tag(part, True) or _is_tag(part, False)}
    for symbol, index in where.items():
        if _is_tag(symbol, True) and where.get(_partner(symbol), -1) > index:
            parts[index], parts[where[_partner(symbol)]] = _partner(symbol), symbol
    nested, open_tags, depths, closed_early = [], [], {}, set()  # depths: open tag -> its place in open_tags
    for part in parts:
        if part in closed_early:
            continue
        if _is_tag(part, False):
            depths[part] = len(open_tags)
            open_tags.append(part)
        elif _is_tag(part, True) and _partner(part) in depths:  # the pairs opened inside it close here first
            depth = depths[_partner(part)]
            inner = [_partner(opening) for opening in reversed(open_tags[depth + 1:])]
            nested += inner
            closed_early.update(inner)
            for opening in open_tags[depth:]:
                del depths[opening]
            del open_tags[depth:]
        nested.append(part)
    return nested


def spelled(text: str, patterns: Patterns) -> list[tuple[int, int]]:
    """The (start, end) of each placeholder of `patterns` that masked `text` spells out of ordinary characters,
    outside its symbols (every placeholder of the source is a symbol, so each of these is one the source lacks)."""
    spans, position = [], 0
    for match in [*SYMBOL.finditer(text), None]:
        end = match.start() if match else len(text)
        spans += [(position + span.start, position + span.end)
                  for span in placeholder_spans(text[position:end], patterns) if span.family != RESERVED]
        position = match.end() if match else end
    return spans


def remove_spelled(text: str, patterns: Patterns) -> str:
    """`text` without what `spelled` finds, again until none is left (a removal can join two halves into one); a
    space left doubled where one went is single again, and one left at the end goes."""
    while spans := spelled(text, patterns):
        for start, end in reversed(spans):
            before, after = text[:start], text[end:]
            if (not before or before[-1:].isspace()) and after[:1] == " ":
                after = after[1:]
            elif not after and before[-1:] == " ":
                before = before[:-1]
            text = before + after
    return text


def repair(source: str, hypothesis: str, anchors: dict[str, int] | None = None,
           patterns: Patterns | None = None) -> str:
    """`hypothesis` (a masked translation of the masked `source`) with each of the source's symbols exactly once, no
    other and no stray bracket, its tag pairs opened before they close and properly nested, and, given `patterns`,
    no placeholder spelled out (see the module's doc); `anchors`: symbol -> character offset in `hypothesis` where a
    missing one belongs."""
    wanted = symbols(source)
    present = set(symbols(hypothesis))
    text = insert_missing(hypothesis, [symbol for symbol in wanted if symbol not in present], anchors or {})
    text = "".join(_nest(_keep(_parts(text), set(wanted))))
    return remove_spelled(text, patterns) if patterns is not None else text
