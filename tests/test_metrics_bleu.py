"""BLEU on the device against sacrebleu: same statistics, same printed string, same signature."""

from __future__ import annotations

import pytest
import torch
from metrics_corpus import edge_corpus, random_corpus
from sacrebleu.metrics import BLEU

from nmtkit.errors import NmtkitError
from nmtkit.metrics import tokenize
from nmtkit.metrics.bleu import DeviceBLEU, closest_ref_lengths

CPU = torch.device("cpu")


def device_bleu(hypotheses, references, **options):
    metric = DeviceBLEU(references, CPU, **options)
    return metric, metric.statistics(hypotheses)


def assert_same_corpus_score(hypotheses, references, budget=None, **options):
    metric = DeviceBLEU(references, CPU, budget=budget, **options)
    stats = metric.statistics(hypotheses)
    reference = BLEU(**options)
    expected = reference.corpus_score(hypotheses, references)
    assert str(metric.corpus(stats.sum(dim=0).tolist())) == str(expected)
    assert metric.score(stats.sum(dim=0).tolist()) == expected.score
    assert metric.signature() == str(reference.get_signature())
    assert stats.tolist() == reference._extract_corpus_statistics(hypotheses, references)


@pytest.mark.parametrize("tokenize", ["13a", "intl", "char", "zh", "none"])
@pytest.mark.parametrize("refs", [1, 3])
def test_tokenizers_and_references_match_sacrebleu(tokenize, refs):
    hypotheses, references = random_corpus(seed=refs, lines=50, refs=refs)
    assert_same_corpus_score(hypotheses, references, tokenize=tokenize)


@pytest.mark.parametrize("smooth_method", ["exp", "floor", "add-k", "none"])
@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("effective_order", [False, True])
def test_smoothing_case_and_effective_order_match_sacrebleu(smooth_method, lowercase, effective_order):
    hypotheses, references = random_corpus(seed=5, lines=12, refs=2)
    assert_same_corpus_score(hypotheses, references, smooth_method=smooth_method, lowercase=lowercase,
                             effective_order=effective_order)


def test_edge_cases_match_sacrebleu():
    hypotheses, references = edge_corpus()
    assert_same_corpus_score(hypotheses, [references])
    assert_same_corpus_score(hypotheses, [references], tokenize="char")


def test_sentence_scores_are_sacrebleus_sentence_bleu():
    hypotheses, references = edge_corpus()
    metric, stats = device_bleu(hypotheses, [references])
    sentence = BLEU(effective_order=True)
    assert metric.sentence_scores(stats) == [sentence.sentence_score(hypothesis, [reference]).score
                                             for hypothesis, reference in zip(hypotheses, references)]


def test_small_batches_give_the_same_statistics():
    hypotheses, references = random_corpus(seed=11, lines=120, refs=2)
    assert_same_corpus_score(hypotheses, references, budget=64)


def test_forked_tokenizers_and_cached_references(monkeypatch):
    monkeypatch.setattr(tokenize, "MIN_LINES_FOR_WORKERS", 10)
    hypotheses, references = random_corpus(seed=12, lines=100, refs=2)
    baseline, _ = random_corpus(seed=13, lines=100)
    metric = DeviceBLEU(references, CPU, workers=2)
    for system in (hypotheses, baseline):  # the second call reuses the tokenized references
        expected = BLEU()._extract_corpus_statistics(system, references)
        assert metric.statistics(system).tolist() == expected


def test_closest_reference_length_prefers_the_shorter_on_ties():
    lengths = closest_ref_lengths(torch.tensor([5, 5, 0]), torch.tensor([[7, 3, 4], [6, 4, 9], [2, 1, 3]]))
    assert lengths.tolist() == [4, 4, 1]


def test_unknown_tokenizer_and_smoothing_are_user_errors():
    with pytest.raises(NmtkitError, match="tokenizer"):
        DeviceBLEU([["a"]], CPU, tokenize="nope")
    with pytest.raises(NmtkitError, match="smoothing"):
        DeviceBLEU([["a"]], CPU, smooth_method="nope")
