"""chrF and chrF++ on the device against sacrebleu."""

from __future__ import annotations

import pytest
import torch
from metrics_corpus import edge_corpus, random_corpus
from sacrebleu.metrics import CHRF

from nmtkit.metrics.chrf import DeviceCHRF, f_scores

CPU = torch.device("cpu")


def assert_same_corpus_score(hypotheses, references, budget=None, **options):
    metric = DeviceCHRF(references, CPU, budget=budget, **options)
    stats = metric.statistics(hypotheses)
    reference = CHRF(**options)
    expected = reference.corpus_score(hypotheses, references)
    assert str(metric.corpus(stats.sum(dim=0).tolist())) == str(expected)
    assert metric.score(stats.sum(dim=0).tolist()) == expected.score
    assert metric.signature() == str(reference.get_signature())
    assert stats.tolist() == reference._extract_corpus_statistics(hypotheses, references)


@pytest.mark.parametrize("word_order", [0, 2])
@pytest.mark.parametrize("refs", [1, 3])
@pytest.mark.parametrize("options", [{}, {"lowercase": True}, {"whitespace": True}, {"eps_smoothing": True},
                                     {"beta": 1, "char_order": 4}])
def test_chrf_and_chrf_plus_plus_match_sacrebleu(word_order, refs, options):
    hypotheses, references = random_corpus(seed=refs + word_order, lines=40, refs=refs)
    assert_same_corpus_score(hypotheses, references, word_order=word_order, **options)


def test_identical_references_tie_as_in_sacrebleu():
    hypotheses, references = random_corpus(seed=3, lines=30)
    assert_same_corpus_score(hypotheses, references * 2, word_order=2)


@pytest.mark.parametrize("word_order", [0, 2])
def test_edge_cases_and_sentence_scores_match_sacrebleu(word_order):
    hypotheses, references = edge_corpus()
    assert_same_corpus_score(hypotheses, [references], word_order=word_order, budget=256)
    metric = DeviceCHRF([references], CPU, word_order=word_order)
    sentence = CHRF(word_order=word_order)
    assert metric.sentence_scores(metric.statistics(hypotheses)) == [
        sentence.sentence_score(hypothesis, [reference]).score for hypothesis, reference in zip(hypotheses, references)]


@pytest.mark.parametrize("word_order", [0, 2])
def test_chunks_of_lines_give_the_statistics_of_the_whole_corpus(word_order):
    hypotheses, references = random_corpus(seed=5, lines=60, refs=2)
    whole = DeviceCHRF(references, CPU, word_order=word_order).statistics(hypotheses)
    for chunk in (1, 100, 1000):
        metric = DeviceCHRF(references, CPU, word_order=word_order, chunk=chunk)
        assert torch.equal(metric.statistics(hypotheses), whole)


@pytest.mark.parametrize("eps_smoothing", [False, True])
def test_f_scores_are_bit_identical_to_sacrebleus_formula(eps_smoothing):
    generator = torch.Generator().manual_seed(0)
    stats = torch.randint(0, 6, (200, 8, 3), generator=generator)
    reference = CHRF(word_order=2, eps_smoothing=eps_smoothing)
    expected = [reference._compute_f_score(row.flatten().tolist()) for row in stats]
    assert f_scores(stats, 2, eps_smoothing).tolist() == expected
