"""TER against sacrebleu's own: corpus and sentence scores, string and signature, for every option."""

from __future__ import annotations

import pytest
import torch
from metrics_corpus import edge_corpus, random_corpus
from sacrebleu.metrics import TER

from nmtkit.errors import NmtkitError
from nmtkit.metrics import corpus_totals
from nmtkit.metrics.ter import SacrebleuTER

CORPORA = {"one reference": lambda: random_corpus(seed=31, lines=30),
           "three references": lambda: random_corpus(seed=32, lines=30, refs=3),
           "edge": lambda: (edge_corpus()[0], [edge_corpus()[1]]),
           "an empty line among references": lambda: (["a b c", "d e", "f"], [["a b", "d", "f g"], ["a c", "", "f"]])}
OPTIONS = [
    {}, {"normalized": True}, {"no_punct": True}, {"case_sensitive": True},
    {"normalized": True, "asian_support": True},
    {"no_punct": True, "asian_support": True, "case_sensitive": True},
]


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: "-".join(options) or "default")
def test_ter_is_sacrebleus(corpus, options):
    hypotheses, references = CORPORA[corpus]()
    metric = SacrebleuTER(references, **options)
    stats = metric.statistics(hypotheses)
    reference = TER(**options)
    expected = reference.corpus_score(hypotheses, references)
    report = metric.report(stats)
    assert (report["score"], report["text"], report["num_edits"]) == (expected.score, str(expected),
                                                                        expected.num_edits)
    assert report["signature"] == str(reference.get_signature())
    assert metric.sentence_scores(stats) == [reference.sentence_score(hypothesis, list(refs)).score
                                             for hypothesis, *refs in zip(hypotheses, *references)]


def test_fractional_statistics_are_summed_in_sentence_order():
    stats = torch.tensor([[1.0, 0.1], [2.0, 0.2], [3.0, 0.3]], dtype=torch.float64)
    assert corpus_totals(stats) == [6.0, (0.1 + 0.2) + 0.3]
    assert corpus_totals(stats.long()) == [6, 0]


def test_hypotheses_must_match_the_references():
    with pytest.raises(NmtkitError, match="2 hypotheses for 1 references"):
        SacrebleuTER([["a"]]).statistics(["a", "b"])
