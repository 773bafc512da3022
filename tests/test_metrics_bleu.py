"""BLEU on the device against sacrebleu: same statistics, same printed string, same signature."""

from __future__ import annotations

import pytest
import torch
from devices import device_params
from metrics_corpus import edge_corpus, random_corpus
from sacrebleu.metrics import BLEU

from nmtkit.errors import NmtkitError
from nmtkit.metrics import tokenize
from nmtkit.metrics.bleu import DeviceBLEU, check_options, closest_ref_lengths
from nmtkit.metrics.tokenize import tokenizer_usable

CPU = torch.device("cpu")
MECAB = [pytest.param(name, marks=pytest.mark.skipif(not tokenizer_usable(name), reason=f"{name} is not installed"))
         for name in ("ja-mecab", "ko-mecab")]
CORPORA = {"random": lambda: random_corpus(seed=21, lines=30, refs=2),
           "edge": lambda: (edge_corpus()[0], [edge_corpus()[1]])}


def assert_same_corpus_score(hypotheses, references, device, budget=None, **options):
    metric = DeviceBLEU(references, torch.device(device), budget=budget, **options)
    stats = metric.statistics(hypotheses)
    reference = BLEU(**options)
    expected = reference.corpus_score(hypotheses, references)
    assert str(metric.corpus(stats.sum(dim=0).tolist())) == str(expected)
    assert metric.score(stats.sum(dim=0).tolist()) == expected.score
    assert metric.signature() == str(reference.get_signature())
    assert stats.tolist() == reference._extract_corpus_statistics(hypotheses, references)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("tokenize", ["13a", "intl", "char", "zh", "none", *MECAB])
@pytest.mark.parametrize("refs", [1, 3])
def test_tokenizers_and_references_match_sacrebleu(tokenize, refs, device):
    hypotheses, references = random_corpus(seed=refs, lines=50, refs=refs)
    assert_same_corpus_score(hypotheses, references, device, tokenize=tokenize)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("smooth_method", ["exp", "floor", "add-k", "none"])
@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("effective_order", [False, True])
def test_smoothing_case_and_effective_order_match_sacrebleu(smooth_method, lowercase, effective_order, device):
    hypotheses, references = random_corpus(seed=5, lines=12, refs=2)
    assert_same_corpus_score(hypotheses, references, device, smooth_method=smooth_method, lowercase=lowercase,
                             effective_order=effective_order)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize(("smooth_method", "smooth_value"), [("floor", 0.0), ("floor", 0.5), ("add-k", 0.5),
                                                             ("add-k", 3)])
def test_smoothing_values_match_sacrebleu(corpus, smooth_method, smooth_value, device):
    hypotheses, references = CORPORA[corpus]()
    assert_same_corpus_score(hypotheses, references, device, smooth_method=smooth_method, smooth_value=smooth_value)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("max_ngram_order", [1, 2, 6])
@pytest.mark.parametrize("effective_order", [False, True])
def test_max_ngram_orders_match_sacrebleu(corpus, max_ngram_order, effective_order, device):
    hypotheses, references = CORPORA[corpus]()
    assert_same_corpus_score(hypotheses, references, device, max_ngram_order=max_ngram_order,
                             effective_order=effective_order)
    metric = DeviceBLEU(references, torch.device(device), max_ngram_order=max_ngram_order)
    sentence = BLEU(effective_order=True, max_ngram_order=max_ngram_order)
    assert metric.sentence_scores(metric.statistics(hypotheses)) == [
        sentence.sentence_score(hypothesis, list(refs)).score for hypothesis, *refs in zip(hypotheses, *references)]


@pytest.mark.parametrize("device", device_params())
def test_edge_cases_match_sacrebleu(device):
    hypotheses, references = edge_corpus()
    assert_same_corpus_score(hypotheses, [references], device)
    assert_same_corpus_score(hypotheses, [references], device, tokenize="char")


@pytest.mark.parametrize("device", device_params())
def test_sentence_scores_are_sacrebleus_sentence_bleu(device):
    hypotheses, references = edge_corpus()
    metric = DeviceBLEU([references], torch.device(device))
    stats = metric.statistics(hypotheses)
    sentence = BLEU(effective_order=True)
    assert metric.sentence_scores(stats) == [sentence.sentence_score(hypothesis, [reference]).score
                                             for hypothesis, reference in zip(hypotheses, references)]


@pytest.mark.parametrize("device", device_params())
def test_small_batches_give_the_same_statistics(device):
    hypotheses, references = random_corpus(seed=11, lines=120, refs=2)
    assert_same_corpus_score(hypotheses, references, device, budget=64)


@pytest.mark.parametrize("device", device_params())
def test_forked_tokenizers_and_cached_references(monkeypatch, device):
    monkeypatch.setattr(tokenize, "MIN_LINES_FOR_WORKERS", 10)
    hypotheses, references = random_corpus(seed=12, lines=100, refs=2)
    baseline, _ = random_corpus(seed=13, lines=100)
    metric = DeviceBLEU(references, torch.device(device), workers=2)
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


@pytest.mark.parametrize(("options", "needle"), [
    (("exp", 0.5, 4), "for floor and add-k smoothing, not exp"),
    (("floor", -1.0, 4), "must not be negative"),
    (("exp", None, 0), "order must be at least 1"),
])
def test_bad_smoothing_values_and_orders_are_user_errors(options, needle):
    with pytest.raises(NmtkitError, match=needle):
        check_options(*options)
    with pytest.raises(NmtkitError, match=needle):
        DeviceBLEU([["a"]], CPU, smooth_method=options[0], smooth_value=options[1], max_ngram_order=options[2])


def test_report_names_the_tokenizer():
    assert DeviceBLEU([["a b"]], CPU).report(torch.zeros(1, 10, dtype=torch.int64))["tokenize"] == "13a"
    assert DeviceBLEU([["a b"]], CPU, tokenize="zh").report(torch.zeros(1, 10, dtype=torch.int64))["tokenize"] == "zh"
