"""The search-time guarantee for masked placeholders (`nmtkit.symbols.placeholders`): each reserved symbol that a
source holds comes out exactly once, no other reserved symbol comes out, and the tag pairs come out properly nested.

A search meets it with two parts, composed as restrictions (`nmtkit.decoding.restriction`). The source's symbols
become one-token positive constraints (`SymbolGuard.constraints`), so that the constrained beam search
(`nmtkit.decoding.constraint_tracker`) gives beams to hypotheses that have written them and makes EOS wait for them.
And the guard itself is a restriction: a ban mask per hypothesis, over the reserved symbols only (a few dozen
columns, whatever the vocabulary), rules out a symbol absent from the source, one already written, and a closing tag
｟/tk｠ unless ｟tk｠ is the innermost tag open: so an opening comes before its closing, and a pair opened inside
another closes before it. When a hypothesis has exactly as many tokens left before its length limit as symbols to
write, only those symbols are allowed; at every such step one is (the innermost open tag's closing, or any symbol
not yet written when no tag is open), so every hypothesis ends with all of them, in greedy search and sampling too.

A tag whose other half the source lacks (a source cut short) is guarded as a placeholder of its own.

A search by banks costs hypotheses the free search would keep (a bank of hypotheses that wrote a symbol early
takes beams from better ones that write it later), so the PyTorch engine runs beam search without the guard first
and searches again under it only the lines whose hypotheses break the rule (`SymbolGuard.kept`): where the model
keeps its symbols by itself, the guarantee changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from nmtkit.data.subword import EOS, Subword
from nmtkit.decoding.constraints import Constraints
from nmtkit.symbols.placeholders import SYMBOL, reserved_symbols

NEG_INF = float("-inf")


@dataclass(frozen=True)
class ReservedIds:
    """The reserved symbols that both vocabularies of a model hold as one piece each (N of them): their source and
    target ids, the index of each one's partner (a tag's other half; a placeholder's own), and which are closings."""

    src: tuple[int, ...]
    tgt: Tensor  # (N,)
    partner: Tensor  # (N,)
    closing: Tensor  # (N,) bool

    @classmethod
    def of(cls, src_subword: Subword, tgt_subword: Subword) -> ReservedIds | None:
        """None for vocabularies without reserved symbols (a model trained without placeholders)."""
        symbols = [symbol for symbol in reserved_symbols() if _piece(src_subword, symbol) is not None
                   and _piece(tgt_subword, symbol) is not None]
        if not symbols:
            return None
        index = {symbol: position for position, symbol in enumerate(symbols)}
        partner = [index.get(_partner(symbol), position) for position, symbol in enumerate(symbols)]
        return cls(tuple(_piece(src_subword, symbol) for symbol in symbols),
                   torch.tensor([_piece(tgt_subword, symbol) for symbol in symbols]), torch.tensor(partner),
                   torch.tensor([SYMBOL.fullmatch(symbol).group(1) == "/" for symbol in symbols]))

    def guard(self, sources: Sequence[Sequence[int]], device: torch.device) -> SymbolGuard:
        """The guard of a batch of sources (subword ids)."""
        position = {token: index for index, token in enumerate(self.src)}
        present = torch.zeros(len(sources), len(self.src), dtype=torch.bool)
        for row, source in enumerate(sources):
            present[row, [position[token] for token in source if token in position]] = True
        return SymbolGuard(self.tgt.to(device), self.partner.to(device), self.closing.to(device), present.to(device))


def _piece(subword: Subword, symbol: str) -> int | None:
    token = subword.processor.piece_to_id(symbol)
    return None if subword.processor.is_unknown(token) else token


def _partner(symbol: str) -> str:
    return symbol.replace("/", "") if "/" in symbol else symbol.replace("t", "/t", 1)


class SymbolGuard:
    """The guarantee for a batch of B sentences over the N reserved symbols. A hypothesis' state is `order` (R, N):
    for each symbol written, how many symbols it had written before it; -1 for one not written yet."""

    def __init__(self, ids: Tensor, partner: Tensor, closing: Tensor, present: Tensor):
        self.ids, self.partner, self.closing, self.present = ids, partner, closing, present  # (N,) x 3, (B, N)
        paired = present & present[:, partner] & (partner != torch.arange(len(partner), device=partner.device))
        self.paired_close, self.paired_open = paired & closing, paired & ~closing  # (B, N)

    @property
    def active(self) -> bool:
        """Whether some sentence holds a symbol (else the guard only bans them all)."""
        return bool(self.present.any())

    def take(self, sentences: Tensor) -> SymbolGuard:
        """The guard of some of the sentences (indices (n,))."""
        return SymbolGuard(self.ids, self.partner, self.closing, self.present[sentences])

    @functools.cached_property
    def _lookup(self) -> tuple[dict[int, int], list[int]]:
        """Target id -> symbol index, and each symbol's partner, as Python objects for `kept` (once per guard)."""
        return {token: index for index, token in enumerate(self.ids.tolist())}, self.partner.tolist()

    def kept(self, row: int, tokens: Sequence[int]) -> bool:
        """Whether `tokens`, a hypothesis of sentence `row` searched without the guard, keeps its rule all the same:
        each symbol of the sentence exactly once, no other, and each tag pair closed inside the pair open around it."""
        position, partner = self._lookup
        written = [position[token] for token in tokens if token in position]
        if sorted(written) != self.present[row].nonzero().flatten().tolist():
            return False
        paired_open, paired_close = self.paired_open[row].tolist(), self.paired_close[row].tolist()
        open_tags = []
        for symbol in written:
            if paired_open[symbol]:
                open_tags.append(symbol)
            elif paired_close[symbol]:
                if not open_tags or open_tags.pop() != partner[symbol]:
                    return False
        return True

    def constraints(self, lines: Sequence[Constraints | None] | None) -> list[Constraints]:
        """Each sentence's constraints (`lines`, or none) plus its symbols as one-token positive phrases."""
        lines = [None] * self.present.size(0) if lines is None else lines
        symbols = [[(token,) for token in self.ids[row].tolist()] for row in self.present]
        return [replace(line or Constraints(), positive=(*(line or Constraints()).positive, *wanted))
                for line, wanted in zip(lines, symbols)]

    def initial_state(self, rows: int) -> Tensor:
        return torch.full((rows, self.ids.size(0)), -1, dtype=torch.long, device=self.ids.device)

    def advance(self, order: Tensor, tokens: Tensor) -> Tensor:
        """The state after each row (R,) writes its token (R,)."""
        written = (order >= 0).sum(dim=1, keepdim=True)
        return torch.where((order < 0) & (tokens.unsqueeze(1) == self.ids), written, order)

    def follow(self, order: Tensor, rows: Tensor, tokens: Tensor, sentences: Tensor) -> Tensor:
        """`Restriction.follow`."""
        return self.advance(order[rows], tokens)

    def restrict(self, scores: Tensor, sentences: Tensor, order: Tensor, steps_left: Tensor) -> None:
        """Set to -inf, in place, what each row (R,) of scores (R, V) may not write next: the symbols the rule
        bans, EOS while a symbol is missing, and anything but a symbol when there are only as many tokens left
        (steps_left (R,), EOS excluded) as missing symbols. Rows with no token left (only EOS) are left alone."""
        if not self.active:  # no sentence holds a symbol: each is banned everywhere (at the limit only EOS is left)
            scores.index_fill_(1, self.ids, NEG_INF)
            return
        emitted = order >= 0
        missing = self.present[sentences] & ~emitted  # (R, N)
        open_now = self.paired_open[sentences] & emitted & ~emitted[:, self.partner]
        innermost = order.masked_fill(~open_now, -1).argmax(dim=1, keepdim=True)  # (R, 1), if any is open
        closable = open_now.any(dim=1, keepdim=True) & (self.partner == innermost)
        allowed = missing & (~self.paired_close[sentences] | closable)  # (R, N)
        free = (steps_left > 0).unsqueeze(1)  # (R, 1)
        symbol_scores = scores[:, self.ids].masked_fill(free & ~allowed, NEG_INF)
        counts = missing.sum(dim=1, keepdim=True)
        forced = free & (counts >= steps_left.unsqueeze(1))
        if bool(forced.any()):  # rare: a whole pass over the scores only then
            scores.masked_fill_(forced, NEG_INF)
        scores.select(1, EOS).masked_fill_((free & (counts > 0)).squeeze(1), NEG_INF)
        scores.index_copy_(1, self.ids, symbol_scores)
