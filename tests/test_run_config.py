"""Tests for nmtkit/run_config.py: a run's whole config, its model section typed by the model it names, and train's
config from its file, --model, flags and overrides."""

from __future__ import annotations

import pytest

from nmtkit.config import DecodeConfig, TrainConfig, load_yaml, save_yaml
from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import TransformerConfig
from nmtkit.run_config import build_config
from nmtkit.training.config import train_config


def test_defaults_build_a_transformer_config():
    config = build_config(None)
    assert isinstance(config.model, TransformerConfig)
    assert config.model == TransformerConfig()
    assert config.train == TrainConfig()
    assert config.decode == DecodeConfig()


def test_values_are_taken_from_the_sections():
    config = build_config({"model": {"d_model": 64, "norm": "post"}, "train": {"lr": 1e-3}, "decode": {"beam": 2}})
    assert config.model.d_model == 64
    assert config.model.norm == "post"
    assert config.train.lr == 1e-3
    assert config.decode.beam == 2
    assert config.train.max_steps == TrainConfig().max_steps


def test_yaml_round_trip_gives_an_equal_config(tmp_path):
    config = build_config({"model": {"d_model": 64, "norm": "post", "positions": "learned"},
                           "train": {"lr": 3e-4, "adam_eps": 1e-9, "valid_bleu": False},
                           "decode": {"length_penalty": "none", "max_len_a": 1.25}})
    path = tmp_path / "config.yaml"
    save_yaml(config, path)
    assert build_config(load_yaml(path)) == config


@pytest.mark.parametrize("model", ["transformer", 5, {"name": ["transformer"]}], ids=["string", "int", "list_name"])
def test_malformed_model_section_is_an_error(model):
    """`model: transformer` in a YAML file is an easy slip; it must be a one-line NmtkitError, not a traceback."""
    with pytest.raises(NmtkitError, match="model"):
        build_config({"model": model})


def test_unknown_model_name_lists_known_models():
    with pytest.raises(NmtkitError, match="lstm") as error:
        build_config({"model": {"name": "lstm"}})
    assert "transformer" in str(error.value)


def write_yaml(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_train_config_takes_the_file_then_the_flags_then_the_overrides(tmp_path):
    path = write_yaml(tmp_path / "run.yaml", "model:\n  name: luong\n  hidden: 32\ntrain:\n  max_steps: 5\n  seed: 2\n")
    config = train_config(path, None, None, ["train.seed=7"], max_steps=9, seed=3, device=None)
    assert (config.model.name, config.model.hidden) == ("luong", 32)
    assert (config.train.max_steps, config.train.seed, config.train.device) == (9, 7, "auto")
    assert train_config(None, None, None, []) == build_config(None)
    empty_section = write_yaml(tmp_path / "empty.yaml", "train:\n")  # a section with nothing under it is an empty one
    assert train_config(empty_section, None, None, [], max_steps=3).train.max_steps == 3


def test_train_config_of_a_resumed_run_is_its_saved_one_unless_a_file_is_given(tmp_path):
    save_yaml(build_config({"model": {"name": "gnmt", "hidden": 16}}), tmp_path / "config.yaml")
    assert train_config(None, tmp_path, None, []).model.hidden == 16
    other = write_yaml(tmp_path / "other.yaml", "model:\n  name: gnmt\n  hidden: 24\n")
    assert train_config(other, tmp_path, None, []).model.hidden == 24
    assert train_config(None, tmp_path / "new", None, []) == build_config(None)  # nothing saved yet


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
