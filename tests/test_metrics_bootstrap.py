"""Paired bootstrap resampling on the device against sacrebleu's own paired bootstrap test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from metrics_corpus import random_corpus
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from nmtkit.metrics import bootstrap
from nmtkit.metrics.bleu import DeviceBLEU
from nmtkit.metrics.bootstrap import draw_counts, paired_bootstrap
from nmtkit.metrics.chrf import DeviceCHRF
from nmtkit.metrics.wer import DeviceWER

CPU = torch.device("cpu")


@pytest.mark.parametrize(("ours", "theirs"), [(DeviceBLEU, BLEU), (DeviceCHRF, CHRF)])
def test_paired_bootstrap_is_sacrebleus(ours, theirs):
    system, references = random_corpus(seed=1, lines=70, refs=2)
    baseline, _ = random_corpus(seed=2, lines=70)
    metric = ours(references, CPU)
    result = paired_bootstrap(metric.statistics(system), metric.statistics(baseline), metric.score)
    reference = theirs(references=references)
    _, scores = PairedTest([("baseline", baseline), ("system", system)], {"metric": reference}, None, "bs", 1000)()
    (expected_baseline, expected_system), = [value for key, value in scores.items() if key != "System"]
    assert (result.system, result.baseline, result.p_value) == (expected_system.score, expected_baseline.score,
                                                                 expected_system.p_value)
    assert (result.system_interval.mean, result.system_interval.half_width) == (expected_system.mean,
                                                                                  expected_system.ci)
    assert (result.baseline_interval.mean, result.baseline_interval.half_width) == (expected_baseline.mean,
                                                                                      expected_baseline.ci)


def test_draws_are_the_same_in_chunks(monkeypatch):
    whole = torch.cat(list(draw_counts(50, 40, 12345, CPU)))
    monkeypatch.setattr(bootstrap, "DRAWS_PER_CHUNK", 120)
    assert torch.equal(torch.cat(list(draw_counts(50, 40, 12345, CPU))), whole)
    indices = np.random.default_rng(12345).choice(50, size=(40, 50), replace=True)
    assert torch.equal(whole, torch.from_numpy(np.stack([np.bincount(row, minlength=50) for row in indices])).double())


def test_error_rates_can_be_compared():
    system, (references,) = random_corpus(seed=3, lines=50)
    metric = DeviceWER([references], CPU)
    result = paired_bootstrap(metric.statistics(system), metric.statistics(references), metric.score, samples=200)
    assert result.baseline == 0.0 and result.system > 0 and 0 < result.p_value <= 1
    assert result.samples == 200 and result.baseline_interval.half_width == 0.0
