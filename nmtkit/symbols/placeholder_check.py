"""The check after decoding: whether a masked translation keeps its masked source's placeholder symbols, each
exactly once, no other, tag pairs properly nested (for an engine that cannot constrain its search, and for the
repair, `nmtkit/translate/repair.py`). The symbols are `nmtkit.symbols.placeholders`' (`｟phk｠`, `｟tk｠` ...
`｟/tk｠`)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from nmtkit.symbols.placeholders import CLOSE, OPEN, SYMBOL


@dataclass(frozen=True)
class Check:
    """How a masked translation keeps its masked source's symbols: each symbol (names as `ph1`, `t1`, `/t1`) the
    source has and it lacks, it has and the source lacks, it has more often than the source; the tag pairs it
    closes before opening or across another pair; and its reserved brackets outside any symbol (a broken one)."""

    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    duplicated: tuple[str, ...] = ()
    misnested: tuple[str, ...] = ()
    stray: int = 0

    @property
    def ok(self) -> bool:
        return self == Check()


def _names(text: str) -> list[str]:
    return [f"{match.group(1)}{match.group(2)}{match.group(3)}" for match in SYMBOL.finditer(text)]


def _misnested(names: list[str]) -> tuple[str, ...]:
    """The tag pairs of `names` that are not properly nested (a close before its open, or across another pair). A
    stack of the open tags and, per pair, where in it its opens are: each is pushed and popped once."""
    bad, open_tags, depths = set(), [], {}
    for name in names:
        if name.startswith("t"):
            depths.setdefault(name, []).append(len(open_tags))
            open_tags.append(name)
        elif name.startswith("/t"):
            pair = name[1:]
            if depths.get(pair):  # the pairs opened inside it and still open cross it
                depth = depths[pair][-1]
                bad.update(open_tags[depth:] if depth < len(open_tags) - 1 else ())
                while len(open_tags) > depth:
                    depths[open_tags.pop()].pop()
            else:
                bad.add(pair)
    closes = set(names)
    bad.update(name for name in open_tags if f"/{name}" in closes)
    return tuple(sorted(bad))


def check(source_masked: str, hypothesis_masked: str) -> Check:
    """Whether a masked translation has each symbol of its masked source exactly once, no other, and its tag pairs
    properly nested (the check after decoding, for an engine that cannot constrain its search)."""
    source, hypothesis = Counter(_names(source_masked)), Counter(_names(hypothesis_masked))
    stray = len(re.findall(f"[{OPEN}{CLOSE}]", SYMBOL.sub("", hypothesis_masked)))
    return Check(missing=tuple(sorted(source - hypothesis)), extra=tuple(sorted(hypothesis.keys() - source.keys())),
                 duplicated=tuple(sorted(name for name in source if hypothesis[name] > source[name] > 0)),
                 misnested=_misnested(_names(hypothesis_masked)), stray=stray)
