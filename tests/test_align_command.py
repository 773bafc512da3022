"""nmtkit.align.command: the align command's options and output lines (end to end in test_align_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nmtkit.align.command import AlignOptions, AlignResult, alignment_lines
from nmtkit.errors import NmtkitError

FILES = {"model": Path("model.pt"), "src": Path("test.src"), "tgt": Path("test.tgt")}


@pytest.mark.parametrize("option, needle", [({"symmetrize": "both"}, "unknown --symmetrize 'both'"),
                                            ({"format": "xml"}, "unknown --format 'xml'")])
def test_options_refuse_an_unknown_symmetrization_or_format(option, needle):
    with pytest.raises(NmtkitError, match=needle):
        AlignOptions(**FILES, **option)


def test_options_take_the_known_ones():
    options = AlignOptions(**FILES, symmetrize="grow-diag-final-and", format="soft-json")
    assert (options.symmetrize, options.format) == ("grow-diag-final-and", "soft-json")


def test_alignment_lines_are_pharaoh_or_soft_json():
    attention = torch.tensor([[0.25, 0.75], [1.0, 0.0]])  # (target words, source words)
    result = AlignResult([["a", "b"], []], [["B", "A"], []], [attention, torch.zeros(0, 0)], None,
                         {"forward": [{(1, 0), (0, 1)}, set()]}, "forward")
    assert alignment_lines(result, "pharaoh") == "0-1 1-0\n\n"
    first, second = alignment_lines(result, "soft-json").splitlines()
    assert json.loads(first) == {"src": ["a", "b"], "tgt": ["B", "A"], "attention": [[0.25, 0.75], [1.0, 0.0]]}
    assert json.loads(second) == {"src": [], "tgt": [], "attention": []}
