"""nmtkit/training/config.py: train's config from its file (or the resumed run's), --model, flags and overrides, a
fine-tuning run's model section from its checkpoint, and complete when built: the settings left to the device filled
in, clashing settings refused."""

from __future__ import annotations

import dataclasses

import pytest

from nmtkit.config.files import save_yaml
from nmtkit.config.run import build_config
from nmtkit.config.sections import TrainConfig
from nmtkit.errors import NmtkitError
from nmtkit.training.config import completed, open_settings, train_config
from nmtkit.training.schedule import CPU_SCHEDULE


def write_yaml(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_train_config_takes_the_file_then_the_flags_then_the_overrides(tmp_path):
    path = write_yaml(tmp_path / "run.yaml", "model:\n  name: luong\n  hidden: 32\ntrain:\n  max_steps: 5\n  seed: 2\n")
    config = train_config(path, None, None, ["train.seed=7"], max_steps=9, seed=3, device=None)
    assert (config.model.name, config.model.hidden) == ("luong", 32)
    assert (config.train.max_steps, config.train.seed, config.train.device) == (9, 7, "auto")
    assert train_config(None, None, None, []) == completed(build_config(None))
    empty_section = write_yaml(tmp_path / "empty.yaml", "train:\n")  # a section with nothing under it is an empty one
    assert train_config(empty_section, None, None, [], max_steps=3).train.max_steps == 3


def test_train_config_of_a_resumed_run_is_its_saved_one_unless_a_file_is_given(tmp_path):
    save_yaml(build_config({"model": {"name": "gnmt", "hidden": 16}}), tmp_path / "config.yaml")
    assert train_config(None, tmp_path, None, []).model.hidden == 16
    other = write_yaml(tmp_path / "other.yaml", "model:\n  name: gnmt\n  hidden: 24\n")
    assert train_config(other, tmp_path, None, []).model.hidden == 24
    assert train_config(None, tmp_path / "new", None, []) == completed(build_config(None))  # nothing saved yet


@pytest.mark.parametrize("section", ["  name: luong\n  hidden: 32\n", "  hidden: 32\n"], ids=["same_name", "no_name"])
def test_model_flag_takes_a_model_section_for_the_same_model_or_none(tmp_path, section):
    path = write_yaml(tmp_path / "run.yaml", f"model:\n{section}")
    config = train_config(path, None, "luong", [])
    assert (config.model.name, config.model.hidden) == ("luong", 32)


def test_model_flag_that_disagrees_with_the_config_file_is_an_error(tmp_path):
    path = write_yaml(tmp_path / "run.yaml", "model:\n  name: transformer\n  layers: 2\n")
    with pytest.raises(NmtkitError, match="--model luong disagrees with .*run.yaml, whose model section is for "
                                          "'transformer'"):
        train_config(path, None, "luong", [])


def test_model_flag_alone_names_the_model():
    config = train_config(None, None, "seq2seq", [])
    assert config.model == build_config({"model": {"name": "seq2seq"}}).model


def test_a_built_config_is_complete_and_completing_it_again_changes_nothing():
    config = train_config(None, None, None, [], device="cpu", max_steps=100)
    assert open_settings(config.train) == []
    assert (config.train.batch_tokens, config.train.lr, config.train.lr_schedule) == (
        CPU_SCHEDULE.batch_tokens, CPU_SCHEDULE.lr, "linear")
    assert config.train.warmup == 10  # at most a tenth of max_steps
    assert completed(config) == config
    assert open_settings(TrainConfig()) == ["train.batch_tokens", "train.warmup", "train.lr", "train.lr_schedule"]


def test_completing_leaves_the_config_it_was_given_alone():
    config = build_config({"train": {"device": "cpu"}})
    before = dataclasses.replace(config.train)
    assert completed(config).train != before and config.train == before


@pytest.mark.parametrize("override, message", [
    ("train.scheduled_sampling=1.5", "must be a probability"),
    ("train.update_freq=0", "at least 1"),
    ("train.lr_schedule=linear", "--max-steps or --max-time"),
    ("train.dropout_from=0.5", "dropout_from"),
])
def test_settings_that_clash_are_refused_when_the_config_is_built(override, message):
    with pytest.raises(NmtkitError, match=message):
        train_config(None, None, None, [override], device="cpu")


def test_a_fine_tuning_run_without_a_model_section_takes_its_start_checkpoints(monkeypatch):
    start = {"config": {"model": {"name": "luong", "hidden": 24}}}
    monkeypatch.setattr("nmtkit.training.config.read_start", lambda path: pytest.fail("read the checkpoint again"))
    config = train_config(None, None, None, [], start, init_from="parent.pt", device="cpu")
    assert (config.model.name, config.model.hidden, config.train.init_from) == ("luong", 24, "parent.pt")
    monkeypatch.setattr("nmtkit.training.config.read_start", lambda path: start)  # not read yet: read here
    assert train_config(None, None, None, [], init_from="parent.pt", device="cpu").model.hidden == 24
