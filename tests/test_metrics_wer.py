"""WER, CER, MER, WIL and WIP on the device against jiwer: the rates, the S/D/I/H counts and the mean of sentence
rates."""

from __future__ import annotations

import jiwer
import pytest
import torch
from devices import device_params
from metrics_corpus import edge_corpus, random_corpus

from nmtkit.errors import NmtkitError
from nmtkit.metrics.wer import (
    DeviceWER,
    error_rate,
    jiwer_words,
    match_error_rate,
    word_information_lost,
    word_information_preserved,
)

CPU = torch.device("cpu")
WORD_MEASURES = {"mer": jiwer.mer, "wil": jiwer.wil, "wip": jiwer.wip}


def jiwer_result(references, hypotheses, characters):
    output = (jiwer.process_characters if characters else jiwer.process_words)(references, hypotheses)
    rate = output.cer if characters else output.wer
    return rate, output.substitutions, output.deletions, output.insertions, output.hits


def assert_same_as_jiwer(hypotheses, references, characters, device="cpu"):
    metric = DeviceWER([references], torch.device(device), characters=characters)
    stats = metric.statistics(hypotheses)
    report = metric.report(stats)
    ours = (report["score"], report["substitutions"], report["deletions"], report["insertions"], report["hits"])
    assert ours == jiwer_result(references, hypotheses, characters)
    per_sentence = [(jiwer.cer if characters else jiwer.wer)(reference, hypothesis)
                    for reference, hypothesis in zip(references, hypotheses)]
    assert metric.sentence_scores(stats) == per_sentence
    assert report["sentence_mean"] == pytest.approx(sum(per_sentence) / len(per_sentence), rel=1e-12)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("characters", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_text_matches_jiwer(characters, seed, device):
    hypotheses, (references,) = random_corpus(seed, lines=80)
    references = [reference if reference.strip() else "x" for reference in references]
    assert_same_as_jiwer(hypotheses, references, characters, device)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("characters", [False, True])
def test_edge_cases_match_jiwer(characters, device):
    hypotheses, references = edge_corpus()
    assert_same_as_jiwer(hypotheses, references, characters, device)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("characters", [False, True])
def test_references_without_words_score_the_insertions_as_jiwer(characters, device):
    assert_same_as_jiwer(["a b", "", "c"], ["", " ", "\t"], characters, device)


def one_reference_corpus(seed: int) -> tuple[list[str], list[str]]:
    hypotheses, (references,) = random_corpus(seed, lines=60)
    return hypotheses, references


WORD_CORPORA = {
    "random": lambda: one_reference_corpus(seed=6),
    "edge": edge_corpus,
    "no reference words": lambda: (["a b", "", "c"], ["", " ", "\t"]),
    "no words at all": lambda: (["", " "], ["\t", ""]),
    "no hypothesis words": lambda: (["", " "], ["a b", "c"]),
}


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("corpus", WORD_CORPORA)
@pytest.mark.parametrize("measure", WORD_MEASURES)
def test_mer_wil_and_wip_match_jiwer(measure, corpus, device):
    hypotheses, references = WORD_CORPORA[corpus]()
    metric = DeviceWER([references], torch.device(device), measure=measure)
    stats = metric.statistics(hypotheses)
    assert metric.report(stats)["score"] == WORD_MEASURES[measure](references, hypotheses)
    assert metric.sentence_scores(stats) == [WORD_MEASURES[measure](reference, hypothesis)
                                             for reference, hypothesis in zip(references, hypotheses)]


def test_whitespace_is_normalised_as_jiwer_does():
    assert jiwer_words("  a \t b\u00a0 c  ") == "a b c"
    assert jiwer_words("a\tb\u00a0c") == "a\tb\u00a0c"  # lone tab or no-break space: no run, one word as in jiwer
    assert_same_as_jiwer(["a\tb c", "a  b", "x\u3000\u3000y"], ["a b c", "a b", "x y"], characters=False)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("characters", [False, True])
def test_chunks_of_lines_give_the_statistics_of_the_whole_corpus(characters, device):
    hypotheses, (references,) = random_corpus(seed=4, lines=60)
    device = torch.device(device)
    whole = DeviceWER([references], device, characters=characters).statistics(hypotheses)
    for chunk in (1, 100, 1000):
        assert torch.equal(DeviceWER([references], device, characters=characters, chunk=chunk).statistics(hypotheses),
                           whole)


def test_error_rate_formula():
    assert error_rate(1, 2, 3, 4) == 6 / 7
    assert error_rate(0, 0, 2, 0) == 2.0


def test_word_information_formulas():  # S, D, I, H
    assert match_error_rate(1, 2, 3, 4) == 6 / 10
    assert word_information_preserved(1, 2, 3, 4) == (4 / 7) * (4 / 8)
    assert word_information_lost(1, 2, 3, 4) == 1 - (4 / 7) * (4 / 8)
    assert (match_error_rate(0, 0, 0, 0), word_information_preserved(0, 0, 0, 0)) == (0.0, 1.0)
    assert (match_error_rate(0, 0, 2, 0), word_information_preserved(0, 0, 2, 0)) == (1.0, 0.0)
    assert word_information_preserved(0, 3, 0, 0) == 0.0


def test_word_measures_over_characters_are_refused():
    with pytest.raises(NmtkitError, match="unknown measure 'mer'"):
        DeviceWER([["a"]], CPU, characters=True, measure="mer")
