"""One shape for what a search may write: a `Restriction` rules out tokens of a batch of sentences at each step, keeps
a state per live hypothesis (row), and follows the hypotheses as the search keeps, reorders and extends them (the
spirit of fairseq's `init_constraints` / `update_constraints` hooks). The search (`nmtkit.decoding.search`) composes
them through `Restrictions` without knowing which they are:

- lexical constraints and the prefix: `nmtkit.decoding.constraint_tracker.ConstraintTracker`, which also ranks the
  candidates (dynamic beam allocation over the phrases met), so it is the one that `choose`s;
- the placeholder guarantee: `nmtkit.decoding.placeholder_guard.SymbolGuard`; its symbols are also the tracker's
  one-token goals, so that beams go to hypotheses that wrote them and EOS waits for them;
- the restrictions that lines ask for by a request field (`nmtkit.decoding.inputs.Request`), registered with
  `@register_restriction` (`nmtkit.decoding.builtin_restrictions` imports each): a new one is one class, its
  request field, and one import line.

Each restriction bans in place (-inf), and a token ruled out by one stays ruled out (bans are a union, whatever the
order). A restriction leaves rows with no step left alone (only EOS is left there).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from torch import Tensor


class Restriction(Protocol):
    """What a search of B sentences may write; its state holds one entry per live row."""

    def initial_state(self, rows: int) -> Any:
        """The state of `rows` rows that wrote nothing yet."""

    def restrict(self, scores: Tensor, sentences: Tensor, state: Any, steps_left: Tensor) -> None:
        """Set to -inf, in place, what each row of scores (R, V) may not write next; sentences (R,) says whose each
        row is, steps_left (R,) how many tokens it may still write before the EOS at its length limit."""

    def follow(self, state: Any, rows: Tensor, tokens: Tensor, sentences: Tensor) -> Any:
        """The state after each of `rows` (N,) of `state` writes its token (N,): the search keeps, reorders and
        extends its hypotheses in one call; sentences (N,) are the new rows' sentences."""

    def take(self, sentences: Tensor) -> Restriction | None:
        """The restriction of some of the sentences (indices (n,)), for a search of them alone; None: none left."""


class Ranker(Restriction, Protocol):
    """A restriction that also chooses which candidates a beam search keeps (`ConstraintTracker`)."""

    def choose(self, candidates: Tensor, sentences: Tensor, state: Any) -> Any:
        """A `constraint_tracker.Choice` over candidates (n, K, V), with `next_state` the kept rows' state."""


class Restrictions:
    """The restrictions of one search, applied together; at most one of them ranks."""

    def __init__(self, parts: Sequence[Restriction]):
        self.parts = tuple(parts)
        rankers = [index for index, part in enumerate(self.parts) if hasattr(part, "choose")]
        if len(rankers) > 1:
            raise ValueError("a search takes at most one restriction that ranks its candidates")
        self.ranker = rankers[0] if rankers else None

    def initial_state(self, rows: int) -> tuple:
        return tuple(part.initial_state(rows) for part in self.parts)

    def restrict(self, scores: Tensor, sentences: Tensor, states: tuple, steps_left: Tensor) -> None:
        for part, state in zip(self.parts, states):
            part.restrict(scores, sentences, state, steps_left)

    def follow(self, states: tuple, rows: Tensor, tokens: Tensor, sentences: Tensor, ranked: Any = None) -> tuple:
        """Every part's `follow`; the ranker's state is `ranked` where its `choose` already computed it."""
        return tuple(ranked if index == self.ranker and ranked is not None else part.follow(state, rows, tokens,
                                                                                            sentences)
                     for index, (part, state) in enumerate(zip(self.parts, states)))

    def choose(self, candidates: Tensor, sentences: Tensor, states: tuple, default: Callable[[Tensor], Any]) -> Any:
        """The ranker's choice of the candidates, or `default`'s where no part ranks."""
        if self.ranker is None:
            return default(candidates)
        return self.parts[self.ranker].choose(candidates, sentences, states[self.ranker])

    def take(self, sentences: Tensor) -> Restrictions:
        return Restrictions([kept for part in self.parts if (kept := part.take(sentences)) is not None])


@dataclass(frozen=True)
class RestrictionEntry:
    """A restriction that a line asks for by the request field `field`: `check(value)` turns the request's value into
    the one kept (ValueError says what is wrong); `cls` names its class, "module:Class", imported only by a search
    that needs it (reading requests imports no torch). The class makes the restriction of a batch with
    `for_lines(values, device)`, one value per line (None where a line does not ask)."""

    field: str
    check: Callable[[object], object]
    cls: str

    def build(self, values: list, device: Any) -> Restriction:
        module, name = self.cls.split(":")
        return getattr(importlib.import_module(module), name).for_lines(values, device)


RESTRICTIONS: dict[str, RestrictionEntry] = {}


def register_restriction(field: str, check: Callable[[object], object], cls: str) -> None:
    """Register the restriction class `cls` ("module:Class") for the request field `field`: a line that sets the
    field is searched under it (beam search, PyTorch models). `nmtkit.decoding.builtin_restrictions` registers
    nmtkit's own."""
    if field in RESTRICTIONS:
        raise ValueError(f"request field {field!r} has a restriction already")
    RESTRICTIONS[field] = RestrictionEntry(field, check, cls)


def requested(lines: Sequence[Any], device: Any) -> list[Restriction]:
    """The registered restrictions that some of `lines` (`Constraints`, or None) ask for, each for the whole batch."""
    asked = [dict(() if line is None else line.requested) for line in lines]
    return [RESTRICTIONS[field].build([values.get(field) for values in asked], device)
            for field in sorted({field for values in asked for field in values})]
