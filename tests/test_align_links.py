"""nmtkit.align.links: hard links, symmetrization, Pharaoh I/O, AER."""

from __future__ import annotations

import pytest
import torch

from nmtkit.align.links import (
    alignment_error,
    format_pharaoh,
    hard_links,
    parse_pharaoh,
    source_links,
    symmetrize,
    transpose,
)
from nmtkit.errors import NmtkitError

# --- hard links and symmetrization ------------------------------------------------------------------------------


def test_hard_links_argmax_and_threshold():
    matrix = torch.tensor([[0.1, 0.9], [0.6, 0.4]])  # (target words, source words)
    assert hard_links(matrix) == {(1, 0), (0, 1)}
    assert hard_links(matrix, threshold=0.35) == {(1, 0), (0, 1), (1, 1)}
    assert hard_links(torch.zeros(0, 3)) == set()
    assert source_links(matrix) == {(0, 1), (1, 0)}
    assert source_links(torch.tensor([[0.1, 0.9], [0.2, 0.8]])) == {(0, 1), (1, 0)}


FORWARD, BACKWARD = {(0, 0), (1, 2), (3, 3)}, {(0, 0), (2, 1), (3, 3), (3, 4)}


@pytest.mark.parametrize("method, expected", [
    ("intersection", {(0, 0), (3, 3)}),
    ("union", {(0, 0), (1, 2), (2, 1), (3, 3), (3, 4)}),
    # (3, 4) grows next to (3, 3) (target 4 unaligned); (1, 2) and (2, 1) join in final-and (both words unaligned)
    ("grow-diag-final-and", {(0, 0), (1, 2), (2, 1), (3, 3), (3, 4)}),
])
def test_symmetrize(method, expected):
    assert symmetrize(FORWARD, BACKWARD, method) == expected


def test_grow_diag_final_and_skips_links_of_aligned_words():
    # (0, 2) is not next to (0, 0) and source 0 is aligned, so final-and leaves it out; union keeps it
    assert symmetrize({(0, 0), (0, 2)}, {(0, 0)}, "grow-diag-final-and") == {(0, 0)}
    # a diagonal neighbour of the intersection that covers an unaligned word grows in
    assert symmetrize({(0, 0), (1, 1)}, {(0, 0)}, "grow-diag-final-and") == {(0, 0), (1, 1)}
    assert transpose({(0, 1)}) == {(1, 0)}
    with pytest.raises(NmtkitError, match="unknown symmetrization"):
        symmetrize(set(), set(), "both")


# --- Pharaoh and AER --------------------------------------------------------------------------------------------


def test_parse_and_format_pharaoh():
    sure, possible = parse_pharaoh("0-1 2p3 4-4")
    assert sure == {(0, 1), (4, 4)} and possible == {(0, 1), (2, 3), (4, 4)}
    assert format_pharaoh({(4, 4), (0, 1), (10, 2)}) == "0-1 4-4 10-2"
    with pytest.raises(NmtkitError, match="x-1"):
        parse_pharaoh("x-1", "gold:1")


@pytest.mark.parametrize("predicted, precision, recall, aer", [
    ({(0, 0), (1, 1)}, 1.0, 1.0, 0.0),  # all sure links
    ({(0, 0), (1, 1), (2, 2)}, 1.0, 1.0, 0.0),  # a possible link costs nothing
    ({(0, 0), (1, 1), (2, 2), (0, 3)}, 0.75, 1.0, 1 - (2 + 3) / (4 + 2)),
    ({(0, 0)}, 1.0, 0.5, 1 - (1 + 1) / (1 + 2)),
    (set(), 0.0, 0.0, 1.0),
])
def test_alignment_error(predicted, precision, recall, aer):
    gold = [parse_pharaoh("0-0 1-1 2p2")]
    scores = alignment_error([predicted], gold)
    assert (scores.precision, scores.recall) == pytest.approx((precision, recall))
    assert scores.aer == pytest.approx(aer)


def test_alignment_error_sums_over_the_corpus_and_needs_pairs():
    gold = [parse_pharaoh("0-0"), parse_pharaoh("0-0 1-1 2-2")]
    scores = alignment_error([{(0, 0)}, {(0, 0)}], gold)
    assert scores.recall == pytest.approx(2 / 4) and scores.precision == 1.0
    with pytest.raises(NmtkitError, match="pair up"):
        alignment_error([set()], gold)
