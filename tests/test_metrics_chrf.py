"""chrF and chrF++ on the device against sacrebleu."""

from __future__ import annotations

import pytest
import torch
from devices import device_params
from metrics_corpus import edge_corpus, random_corpus
from sacrebleu.metrics import CHRF

from nmtkit.errors import NmtkitError
from nmtkit.metrics.chrf import DeviceCHRF, check_options, f_scores

CORPORA = {"random": lambda: random_corpus(seed=22, lines=30, refs=2),
           "edge": lambda: (edge_corpus()[0], [edge_corpus()[1]])}


def assert_same_corpus_score(hypotheses, references, device="cpu", budget=None, **options):
    metric = DeviceCHRF(references, torch.device(device), budget=budget, **options)
    stats = metric.statistics(hypotheses)
    reference = CHRF(**options)
    expected = reference.corpus_score(hypotheses, references)
    assert str(metric.corpus(stats.sum(dim=0).tolist())) == str(expected)
    assert metric.score(stats.sum(dim=0).tolist()) == expected.score
    assert metric.signature() == str(reference.get_signature())
    assert stats.tolist() == reference._extract_corpus_statistics(hypotheses, references)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("word_order", [0, 2])
@pytest.mark.parametrize("refs", [1, 3])
@pytest.mark.parametrize("options", [{}, {"lowercase": True}, {"whitespace": True}, {"eps_smoothing": True},
                                     {"beta": 1, "char_order": 4}])
def test_chrf_and_chrf_plus_plus_match_sacrebleu(word_order, refs, options, device):
    hypotheses, references = random_corpus(seed=refs + word_order, lines=40, refs=refs)
    assert_same_corpus_score(hypotheses, references, device, word_order=word_order, **options)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("options", [
    {"beta": 0}, {"beta": 3}, {"char_order": 1}, {"char_order": 8, "whitespace": True}, {"word_order": 1},
    {"word_order": 3, "eps_smoothing": True}, {"char_order": 3, "word_order": 2, "beta": 1, "whitespace": True},
])
def test_orders_beta_whitespace_and_smoothing_match_sacrebleu(corpus, options, device):
    hypotheses, references = CORPORA[corpus]()
    assert_same_corpus_score(hypotheses, references, device, **options)
    metric = DeviceCHRF(references, torch.device(device), **options)
    sentence = CHRF(**options)
    assert metric.sentence_scores(metric.statistics(hypotheses)) == [
        sentence.sentence_score(hypothesis, list(refs)).score for hypothesis, *refs in zip(hypotheses, *references)]


@pytest.mark.parametrize("device", device_params())
def test_identical_references_tie_as_in_sacrebleu(device):
    hypotheses, references = random_corpus(seed=3, lines=30)
    assert_same_corpus_score(hypotheses, references * 2, device, word_order=2)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("word_order", [0, 2])
def test_edge_cases_and_sentence_scores_match_sacrebleu(word_order, device):
    hypotheses, references = edge_corpus()
    assert_same_corpus_score(hypotheses, [references], device, word_order=word_order, budget=256)
    metric = DeviceCHRF([references], torch.device(device), word_order=word_order)
    sentence = CHRF(word_order=word_order)
    assert metric.sentence_scores(metric.statistics(hypotheses)) == [
        sentence.sentence_score(hypothesis, [reference]).score for hypothesis, reference in zip(hypotheses, references)]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("word_order", [0, 2])
def test_chunks_of_lines_give_the_statistics_of_the_whole_corpus(word_order, device):
    hypotheses, references = random_corpus(seed=5, lines=60, refs=2)
    whole = DeviceCHRF(references, torch.device(device), word_order=word_order).statistics(hypotheses)
    for chunk in (1, 100, 1000):
        metric = DeviceCHRF(references, torch.device(device), word_order=word_order, chunk=chunk)
        assert torch.equal(metric.statistics(hypotheses), whole)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("beta", [0, 2, 3])
@pytest.mark.parametrize("eps_smoothing", [False, True])
def test_f_scores_are_bit_identical_to_sacrebleus_formula(eps_smoothing, beta, device):
    generator = torch.Generator().manual_seed(0)
    stats = torch.randint(0, 6, (200, 8, 3), generator=generator)
    reference = CHRF(word_order=2, beta=beta, eps_smoothing=eps_smoothing)
    expected = [reference._compute_f_score(row.flatten().tolist()) for row in stats]
    assert f_scores(stats.to(device), beta, eps_smoothing).tolist() == expected


@pytest.mark.parametrize(("orders", "needle"), [((0, 0, 2), "character n-gram order >= 1"),
                                                ((6, -1, 2), "word order >= 0"), ((6, 0, -1), "beta")])
def test_bad_orders_and_beta_are_user_errors(orders, needle):
    with pytest.raises(NmtkitError, match=needle):
        check_options(*orders)
