"""WER and CER on the device against jiwer: the rates, the S/D/I/H counts and the mean of sentence rates."""

from __future__ import annotations

import jiwer
import pytest
import torch
from metrics_corpus import edge_corpus, random_corpus

from nmtkit.metrics.wer import DeviceWER, error_rate, jiwer_words

CPU = torch.device("cpu")


def jiwer_result(references, hypotheses, characters):
    output = (jiwer.process_characters if characters else jiwer.process_words)(references, hypotheses)
    rate = output.cer if characters else output.wer
    return rate, output.substitutions, output.deletions, output.insertions, output.hits


def assert_same_as_jiwer(hypotheses, references, characters):
    metric = DeviceWER([references], CPU, characters=characters)
    stats = metric.statistics(hypotheses)
    report = metric.report(stats)
    ours = (report["score"], report["substitutions"], report["deletions"], report["insertions"], report["hits"])
    assert ours == jiwer_result(references, hypotheses, characters)
    per_sentence = [(jiwer.cer if characters else jiwer.wer)(reference, hypothesis)
                    for reference, hypothesis in zip(references, hypotheses)]
    assert metric.sentence_scores(stats) == per_sentence
    assert report["sentence_mean"] == pytest.approx(sum(per_sentence) / len(per_sentence), rel=1e-12)


@pytest.mark.parametrize("characters", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_text_matches_jiwer(characters, seed):
    hypotheses, (references,) = random_corpus(seed, lines=80)
    references = [reference if reference.strip() else "x" for reference in references]
    assert_same_as_jiwer(hypotheses, references, characters)


@pytest.mark.parametrize("characters", [False, True])
def test_edge_cases_match_jiwer(characters):
    hypotheses, references = edge_corpus()
    assert_same_as_jiwer(hypotheses, references, characters)


@pytest.mark.parametrize("characters", [False, True])
def test_references_without_words_score_the_insertions_as_jiwer(characters):
    assert_same_as_jiwer(["a b", "", "c"], ["", " ", "\t"], characters)


def test_whitespace_is_normalised_as_jiwer_does():
    assert jiwer_words("  a \t b\u00a0 c  ") == "a b c"
    assert jiwer_words("a\tb\u00a0c") == "a\tb\u00a0c"  # lone tab or no-break space: no run, one word as in jiwer
    assert_same_as_jiwer(["a\tb c", "a  b", "x\u3000\u3000y"], ["a b c", "a b", "x y"], characters=False)


@pytest.mark.parametrize("characters", [False, True])
def test_chunks_of_lines_give_the_statistics_of_the_whole_corpus(characters):
    hypotheses, (references,) = random_corpus(seed=4, lines=60)
    whole = DeviceWER([references], CPU, characters=characters).statistics(hypotheses)
    for chunk in (1, 100, 1000):
        assert torch.equal(DeviceWER([references], CPU, characters=characters, chunk=chunk).statistics(hypotheses),
                           whole)


def test_error_rate_formula():
    assert error_rate(1, 2, 3, 4) == 6 / 7
    assert error_rate(0, 0, 2, 0) == 2.0
