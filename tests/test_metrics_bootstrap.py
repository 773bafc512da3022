"""Paired bootstrap resampling on the device against sacrebleu's own paired bootstrap test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from devices import device_params
from metrics_corpus import random_corpus
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from nmtkit.metrics import bootstrap
from nmtkit.metrics.bleu import DeviceBLEU
from nmtkit.metrics.bootstrap import draw_counts, paired_bootstrap, resampled_totals
from nmtkit.metrics.chrf import DeviceCHRF
from nmtkit.metrics.ter import SacrebleuTER
from nmtkit.metrics.wer import DeviceWER

CPU = torch.device("cpu")
METRICS = {  # ours on a device, sacrebleu's
    "bleu": (lambda references, device: DeviceBLEU(references, device), lambda references: BLEU(references=references)),
    "chrf": (lambda references, device: DeviceCHRF(references, device), lambda references: CHRF(references=references)),
    "ter": (lambda references, device: SacrebleuTER(references, normalized=True),
            lambda references: TER(normalized=True, references=references)),
}


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize(("name", "refs"), [("bleu", 2), ("chrf", 2), ("ter", 1), ("ter", 3)])
def test_paired_bootstrap_is_sacrebleus(name, refs, device):
    system, references = random_corpus(seed=1, lines=70, refs=refs)
    baseline, _ = random_corpus(seed=2, lines=70)
    ours, theirs = METRICS[name]
    metric = ours(references, torch.device(device))
    result = paired_bootstrap(metric.statistics(system), metric.statistics(baseline), metric.score)
    reference = theirs(references)
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


def test_fractional_statistics_are_resampled_as_sacrebleu_sums_them():
    stats = torch.rand(40, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 30
    draws = np.random.default_rng(7).choice(40, size=(25, 40), replace=True)
    expected = np.stack([sample.sum(0) for sample in stats.numpy().astype("float32")[draws]])
    assert np.array_equal(resampled_totals(stats, 25, 7), expected)


def test_error_rates_can_be_compared():
    system, (references,) = random_corpus(seed=3, lines=50)
    metric = DeviceWER([references], CPU)
    result = paired_bootstrap(metric.statistics(system), metric.statistics(references), metric.score, samples=200)
    assert result.baseline == 0.0 and result.system > 0 and 0 < result.p_value <= 1
    assert result.samples == 200 and result.baseline_interval.half_width == 0.0
