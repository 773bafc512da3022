"""nmtkit/training/setup.py: the data and the model a run trains, from a complete config only."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_runs import TINY_MODEL, copy_task, tiny_config

from nmtkit.config.run import build_config
from nmtkit.errors import NmtkitError
from nmtkit.runtime.distributed import World
from nmtkit.training.config import completed
from nmtkit.training.setup import set_up


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def test_pairs_longer_than_max_length_or_the_positions_are_left_out(data_dir: Path, tmp_path: Path, caplog):
    setup = set_up(tiny_config(max_length=5), data_dir, tmp_path, World())
    for data in (setup.train_data, setup.dev_data):
        assert 0 < len(data) < len(data.src)
        assert max(max(len(data.src[i]), len(data.tgt[i])) for i in data.kept) == 4
    assert "train: left out" in caplog.text
    positions = completed(build_config({"model": {**TINY_MODEL, "max_positions": 6}}))
    assert set_up(positions, data_dir, tmp_path, World()).train_data.left_out > 0  # the model bounds it below 1024
    assert set_up(tiny_config(max_length=7), data_dir, tmp_path, World()).train_data.left_out == 0
    with pytest.raises(NmtkitError, match="every train pair .* is longer than 2 positions"):
        set_up(tiny_config(max_length=2), data_dir, tmp_path, World())


def test_the_same_seed_builds_the_same_model_and_another_seed_another(data_dir: Path, tmp_path: Path):
    weights = [set_up(tiny_config(seed=seed), data_dir, tmp_path, World()).model.state_dict() for seed in (4, 4, 5)]
    assert all(weights[0][name].equal(weights[1][name]) for name in weights[0])
    assert not all(weights[0][name].equal(weights[2][name]) for name in weights[0])


def test_a_config_that_leaves_settings_to_the_device_is_refused(data_dir: Path, tmp_path: Path):
    config = build_config({"model": TINY_MODEL, "train": {"batch_tokens": 256, "device": "cpu"}})
    with pytest.raises(NmtkitError, match=r"leaves train.warmup, train.lr, train.lr_schedule to the device"):
        set_up(config, data_dir, tmp_path, World())


def test_multilingual_and_single_pair_setups_name_their_bleu_tokenizer(data_dir: Path, tmp_path: Path):
    setup = set_up(tiny_config(), data_dir, tmp_path, World())
    assert setup.pairs == [] and setup.tags == {} and setup.bleu_tokenizer == "13a"
    assert setup.device.type == "cpu" and setup.subwords[0] is setup.subwords[1]
