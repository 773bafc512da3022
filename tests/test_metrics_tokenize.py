"""sacrebleu's BLEU preprocessing over a corpus: joined 13a calls and forked workers change nothing."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metrics_corpus import edge_corpus, random_corpus

from nmtkit.errors import NmtkitError
from nmtkit.metrics import tokenize
from nmtkit.metrics.tokenize import bleu_metric, bleu_token_slices, preprocess

AWKWARD = "ab1.,-&;:<>/\"'()[]{}~`@#$%^*+=|\\?!ΣσςİI\u00a0\u3000 \t\r\x0b日本。，«»—…"


def per_line(lines, tokenize_name=None, lowercase=False):
    return [bleu_metric(tokenize_name, lowercase)._preprocess_segment(line) for line in lines]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=AWKWARD, max_size=20), max_size=8), st.booleans())
def test_joined_13a_equals_line_by_line(lines, lowercase):
    assert preprocess(lines, None, lowercase) == per_line(lines, None, lowercase)


def test_entities_skipped_markers_and_dashes_at_line_ends():
    lines = ["&amp;lt; a-", "-b &quot;", "<skip", "ped>", "x <skipped> y", "9-", "-5", ".5", "5.", "&", "amp;"]
    assert preprocess(lines) == per_line(lines)


def test_a_line_holding_the_separator_falls_back_to_line_by_line():
    lines = ["a\x00b", "c d."]
    assert preprocess(lines) == per_line(lines)


@pytest.mark.parametrize("name", ["intl", "zh", "char", "none"])
def test_other_tokenizers_are_sacrebleus(name):
    hypotheses, _ = edge_corpus()
    assert preprocess(hypotheses, name) == per_line(hypotheses, name)


def joined(slices) -> list[np.ndarray]:
    """Per stream: all token hashes, then all lengths, of the slices."""
    return [np.concatenate([piece[part] for piece in pieces]) for pieces in zip(*slices) for part in (0, 1)]


def test_workers_give_the_same_tokens(monkeypatch):
    monkeypatch.setattr(tokenize, "MIN_LINES_FOR_WORKERS", 10)
    hypotheses, references = random_corpus(seed=4, lines=90, refs=2)
    random.Random(0).shuffle(hypotheses)
    alone = joined(bleu_token_slices([hypotheses, *references], None, True, workers=0))
    for workers in (1, 3):
        slices = list(bleu_token_slices([hypotheses, *references], None, True, workers=workers))
        assert len(slices) == 4 * workers and all(len(pieces) == 3 for pieces in slices)
        assert all(np.array_equal(ours, theirs) for ours, theirs in zip(joined(slices), alone))


def test_unknown_tokenizer_is_a_user_error():
    with pytest.raises(NmtkitError, match="unknown BLEU tokenizer"):
        bleu_metric("nope")
