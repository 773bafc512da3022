"""Word links as pure functions: hard links from word attention, symmetrization, Pharaoh format, AER.

Hard links are the argmax per target word (or every link above a threshold); two directions are combined by
intersection, union or grow-diag-final-and (Koehn et al. 2003). Links are (source index, target index) pairs,
0-based, written `i-j` (Pharaoh format).

Evaluation follows Och & Ney (2003), Section 5: with sure links S, possible links P (S included) and
predicted links A, precision = |A & P| / |A|, recall = |A & S| / |S|, AER = 1 - (|A & S| + |A & P|) / (|A| + |S|).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from nmtkit.data.corpus import read_lines
from nmtkit.errors import NmtkitError

Link = tuple[int, int]  # (source word, target word)
SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and")


def hard_links(matrix: Tensor, threshold: float | None = None) -> set[Link]:
    """(target words, source words) attention -> links: argmax per target word, or all weights >= threshold."""
    if matrix.numel() == 0:
        return set()
    if threshold is None:  # a row without attention (a pair left unaligned) links nothing
        best = matrix.max(dim=1)
        return {(source, target) for target, (value, source) in enumerate(zip(best.values.tolist(),
                                                                              best.indices.tolist())) if value > 0}
    return {(int(source), int(target)) for target, source in (matrix >= threshold).nonzero().tolist()}


def source_links(matrix: Tensor) -> set[Link]:
    """The argmax per source word of the same (target words, source words) attention: a second direction from
    one model, to symmetrize with `hard_links` when no target -> source model is at hand."""
    if matrix.numel() == 0:
        return set()
    best = matrix.max(dim=0)
    return {(source, target) for source, (value, target) in enumerate(zip(best.values.tolist(),
                                                                          best.indices.tolist())) if value > 0}


def transpose(links: Iterable[Link]) -> set[Link]:
    """Links of the other direction, (target, source) -> (source, target)."""
    return {(j, i) for i, j in links}


def grow_diag_final_and(forward: set[Link], backward: set[Link]) -> set[Link]:
    """Koehn et al. (2003)'s heuristic as in Moses: start from the intersection, grow into diagonal neighbours
    in the union that cover an unaligned word, then add union links whose words are both unaligned."""
    union, links = forward | backward, set(forward & backward)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                candidate = (i + di, j + dj)
                if candidate in union and candidate not in links and _covers_unaligned(links, candidate, either=True):
                    links.add(candidate)
                    grown = True
    for direction in (forward, backward):
        for candidate in sorted(direction):
            if candidate not in links and _covers_unaligned(links, candidate, either=False):
                links.add(candidate)
    return links


def _covers_unaligned(links: set[Link], candidate: Link, either: bool) -> bool:
    source_free = all(i != candidate[0] for i, _ in links)
    target_free = all(j != candidate[1] for _, j in links)
    return (source_free or target_free) if either else (source_free and target_free)


def symmetrize(forward: set[Link], backward: set[Link], method: str) -> set[Link]:
    """Combine the links of two directions, both given as (source, target) pairs."""
    if method == "intersection":
        return forward & backward
    if method == "union":
        return forward | backward
    if method == "grow-diag-final-and":
        return grow_diag_final_and(forward, backward)
    raise NmtkitError(f"unknown symmetrization {method!r}; use one of {', '.join(SYMMETRIZATIONS)}")


def format_pharaoh(links: Iterable[Link]) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_pharaoh(line: str, where: str = "") -> tuple[set[Link], set[Link]]:
    """`i-j` (sure) and `ipj` (possible) links -> (sure, possible); possible includes sure, as AER needs."""
    sure, possible = set(), set()
    for token in line.split():
        separator = "-" if "-" in token else "p"
        left, _, right = token.partition(separator)
        if not (left.isdigit() and right.isdigit()):
            raise NmtkitError(f"{where}: cannot read alignment link {token!r}; write i-j (sure) or ipj (possible)")
        link = (int(left), int(right))
        possible.add(link)
        if separator == "-":
            sure.add(link)
    return sure, possible


def read_pharaoh(path: str | Path) -> list[tuple[set[Link], set[Link]]]:
    return [parse_pharaoh(line, f"{path}:{number}") for number, line in enumerate(read_lines(path), 1)]


@dataclass
class AlignmentScores:
    precision: float
    recall: float
    aer: float
    links: int

    def as_dict(self) -> dict[str, float]:
        return {"precision": round(self.precision, 4), "recall": round(self.recall, 4), "aer": round(self.aer, 4),
                "links": self.links}


def alignment_error(predicted: list[set[Link]], gold: list[tuple[set[Link], set[Link]]]) -> AlignmentScores:
    """Corpus-level precision, recall and AER (Och & Ney 2003), counts summed over sentence pairs."""
    if len(predicted) != len(gold):
        raise NmtkitError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones; they must pair up")
    found = sure = with_sure = with_possible = 0
    for links, (sure_links, possible_links) in zip(predicted, gold):
        found, sure = found + len(links), sure + len(sure_links)
        with_sure += len(links & sure_links)
        with_possible += len(links & (possible_links | sure_links))
    precision = with_possible / found if found else 0.0
    recall = with_sure / sure if sure else 0.0
    aer = 1.0 - (with_sure + with_possible) / (found + sure) if found + sure else 0.0
    return AlignmentScores(precision, recall, aer, found)
