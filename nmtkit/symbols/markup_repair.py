"""The repair of a translation of a segment masked to symbols (`nmtkit.symbols.markup`): each symbol of the source
exactly once, none other, tag pairs properly nested, whatever the model wrote."""

from __future__ import annotations

import re

from nmtkit.symbols.placeholders import CLOSE, OPEN

SYMBOL_SPLIT = re.compile(f"({OPEN}/?(?:ph|t)[1-9][0-9]*{CLOSE})")


def _closing(symbol: str) -> str:
    return symbol.replace(OPEN, OPEN + "/", 1)


def _is_open(symbol: str) -> bool:
    return symbol.startswith(OPEN + "t")


def holds_brackets(source: str, originals: dict[str, str]) -> bool:
    """Whether `source`'s text (outside the symbols of `originals`) holds the symbols' brackets."""
    return any(OPEN in chunk or CLOSE in chunk for index, chunk in enumerate(SYMBOL_SPLIT.split(source))
               if not (index % 2 and chunk in originals))


def _known_once(output: str, originals: dict[str, str], literal: bool) -> tuple[list[str], bool]:
    """The output as text and symbols: the first of each of the source's symbols; others and stray brackets out,
    unless `literal` (the source's text holds brackets: they are text)."""
    tokens, seen, changed = [], set(), False
    for index, chunk in enumerate(SYMBOL_SPLIT.split(output)):
        if index % 2 and chunk in originals and chunk not in seen:
            seen.add(chunk)
            tokens.append(chunk)
        elif index % 2 and (chunk in originals or not literal):
            changed = True
        elif chunk:
            text = chunk if literal else chunk.replace(OPEN, "").replace(CLOSE, "")
            changed |= text != chunk
            tokens += [text] if text else []
    return tokens, changed


def _complete(tokens: list[str], originals: dict[str, str]) -> tuple[list[str], bool]:
    """Every symbol of the source present, each end tag after its start tag: an end tag before its start tag is
    dropped; a missing start tag goes first, other missing symbols last."""
    where = {token: index for index, token in enumerate(tokens) if token in originals}
    early = {_closing(symbol) for symbol in originals if _is_open(symbol) and symbol in where
             and where.get(_closing(symbol), len(tokens)) < where[symbol]}
    tokens = [token for token in tokens if token not in early]
    present = set(tokens) & originals.keys()
    head = [symbol for symbol in originals if _is_open(symbol) and symbol not in present
            and _closing(symbol) in present]
    tail = [symbol for symbol in originals if symbol not in present and symbol not in head]
    return head + tokens + tail, bool(early or head or tail)


def _nest(tokens: list[str], originals: dict[str, str]) -> tuple[list[str], bool]:
    """Tag pairs properly nested: an end tag that would cross an element still open waits until that one is
    closed (its element grows to hold the other)."""
    nested, open_tags, waiting = [], [], set()
    for token in tokens:
        if token not in originals or not token.startswith(OPEN + "/t"):
            nested.append(token)
            open_tags += [token] if token in originals and _is_open(token) else []
        elif open_tags[-1] != token.replace("/", "", 1):
            waiting.add(token.replace("/", "", 1))
        else:
            nested.append(token)
            open_tags.pop()
            while open_tags and open_tags[-1] in waiting:
                nested.append(_closing(open_tags.pop()))
    nested += [_closing(symbol) for symbol in reversed(open_tags)]
    return nested, bool(waiting)


def repair(output: str, originals: dict[str, str], literal: bool = False) -> tuple[list[str], bool]:
    """A translation's text and symbols with each symbol of the source (`originals`: symbol -> markup) exactly once,
    none other, tag pairs properly nested; and whether that took a repair. With `literal` (the source's text holds
    the symbols' brackets, as text), brackets and other symbols in the translation are text too."""
    tokens, changed = _known_once(output, originals, literal)
    tokens, completed = _complete(tokens, originals)
    tokens, nested = _nest(tokens, originals)
    return tokens, changed or completed or nested
