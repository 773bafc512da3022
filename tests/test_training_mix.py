"""nmtkit/training/mix.py: each language pair's share of a training epoch, and epochs that repeat for the same seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from training_runs import copy_task

from nmtkit.data.dataset import ParallelData
from nmtkit.training.mix import epoch_batches, temperature_sample


@pytest.mark.parametrize("temperature", [1.0, 2.0, 100.0])
def test_temperature_sampling_shares(temperature: float):
    line_pairs = np.repeat(np.arange(3), [800, 150, 50])
    drawn = temperature_sample(line_pairs, temperature, np.random.default_rng(0))
    shares = np.bincount(line_pairs[drawn], minlength=3) / len(drawn)
    expected = np.array([800, 150, 50]) ** (1 / temperature)
    assert shares == pytest.approx(expected / expected.sum(), abs=0.01)
    assert abs(len(drawn) - 1000) <= 3


def test_one_pair_or_temperature_1_takes_every_kept_pair_once_in_the_datas_own_order(tmp_path: Path):
    data = ParallelData(copy_task(tmp_path), "train")
    assert data.corpus is None
    for temperature in (1.0, 5.0):  # one language pair: the temperature has nothing to mix
        mixed = epoch_batches(data, 100, 3, 2, temperature)
        assert [batch.tolist() for batch in mixed] == [batch.tolist() for batch in data.epoch_batches(100, 3, 2)]
    data.corpus = np.repeat([0, 1], [len(data.src) - 20, 20])  # as if its last 20 lines were a second pair
    assert [batch.tolist() for batch in epoch_batches(data, 100, 3, 2, 1.0)] == [
        batch.tolist() for batch in data.epoch_batches(100, 3, 2)]


def test_a_high_temperature_draws_the_small_pair_more_and_the_same_epoch_again_for_the_same_seed(tmp_path: Path):
    data = ParallelData(copy_task(tmp_path), "train")
    data.corpus = np.repeat([0, 1], [len(data.src) - 20, 20])
    drawn = np.concatenate(epoch_batches(data, 100, 3, 2, 100.0))
    assert abs(np.mean(data.corpus[drawn] == 1) - 0.5) < 0.05  # nearly equal shares instead of 20 in 238
    again = np.concatenate(epoch_batches(data, 100, 3, 2, 100.0))
    other_epoch = np.concatenate(epoch_batches(data, 100, 3, 3, 100.0))
    assert np.array_equal(drawn, again) and not np.array_equal(drawn, other_epoch)
