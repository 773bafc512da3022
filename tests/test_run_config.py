"""Tests for nmtkit/config/run.py: a run's whole config, its model section typed by the model it names (train's config
from its file, --model, flags and overrides: tests/test_training_config.py)."""

from __future__ import annotations

import pytest

from nmtkit.config.files import load_yaml, save_yaml
from nmtkit.config.run import build_config
from nmtkit.config.sections import DecodeConfig, TrainConfig
from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import TransformerConfig


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
