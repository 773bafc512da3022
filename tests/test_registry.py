"""Tests for nmtkit/registry.py: models register once, under a known base class, with a dataclass config; attention
scores register once per name; an unknown name lists the known ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from torch import nn

import nmtkit.models  # noqa: F401  (registers the built-in models, and they the attention scores)
from nmtkit import registry
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder
from nmtkit.models.transformer import TransformerConfig


@dataclass
class TinyConfig:
    name: str = "tiny"


class Tiny(EncoderDecoder):
    def __init__(self, config: TinyConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        self.config = config


def test_a_model_registers_under_its_name(monkeypatch):
    monkeypatch.setattr(registry, "MODELS", dict(registry.MODELS))
    assert registry.register_model("tiny", config=TinyConfig)(Tiny) is Tiny
    assert registry.get_model("tiny") == registry.ModelEntry("tiny", Tiny, TinyConfig)
    assert isinstance(registry.build_model(TinyConfig(), 5, 5, True), Tiny)


def test_a_name_registered_twice_is_an_error():
    with pytest.raises(ValueError, match="'transformer' is registered twice"):
        registry.register_model("transformer", config=TransformerConfig)(Tiny)
    assert registry.MODELS["transformer"].cls is not Tiny


def test_a_model_of_another_base_class_is_an_error():
    with pytest.raises(TypeError, match="does not subclass EncoderDecoder"):
        registry.register_model("plain", config=TinyConfig)(nn.Module)
    assert "plain" not in registry.MODELS


def test_a_config_that_is_not_a_dataclass_is_an_error():
    with pytest.raises(TypeError, match="not a dataclass"):
        registry.register_model("undeclared", config=dict)(Tiny)
    assert "undeclared" not in registry.MODELS


def test_an_unknown_model_lists_the_registered_ones():
    with pytest.raises(NmtkitError, match="unknown model 'lstm'; choose one of: bahdanau, convs2s, gnmt, luong"):
        registry.get_model("lstm")


def test_the_attention_scores_keep_their_names_and_order():
    assert list(registry.SCORES) == ["dot", "scaled_dot", "general", "bilinear", "additive", "mlp", "concat",
                                     "cosine", "location"]
    assert registry.SCORES["general"] is registry.SCORES["bilinear"]  # aliases share one builder


def test_a_score_registered_twice_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "SCORES", dict(registry.SCORES))
    with pytest.raises(ValueError, match="attention score 'dot' is registered twice"):
        registry.register_score("dot")(lambda query_dim, key_dim, options: nn.Identity())
    with pytest.raises(ValueError, match="attention score 'twin' is registered twice"):
        registry.register_score("twin", "twin")(lambda query_dim, key_dim, options: nn.Identity())


def test_a_registered_score_is_found_and_an_unknown_one_lists_the_known_ones(monkeypatch):
    monkeypatch.setattr(registry, "SCORES", {})

    @registry.register_score("zero", "nothing")
    def zero(query_dim, key_dim, options):
        return nn.Identity()

    assert registry.get_score("nothing") is zero
    with pytest.raises(ValueError, match="unknown attention score 'dot'; choose one of: zero, nothing"):
        registry.get_score("dot")


def test_the_builtin_metrics_register_under_their_names():
    import nmtkit.metrics.builtin  # noqa: F401

    assert set(registry.METRICS) == {"bleu", "chrf", "chrf++", "ter", "wer", "cer", "mer", "wil", "wip", "edit"}
    assert registry.METRICS["chrf"] is registry.METRICS["chrf++"]  # one builder, told which name was asked for
    assert registry.METRICS["wer"] is registry.METRICS["cer"]


def test_a_metric_registered_twice_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "METRICS", {})
    registry.register_metric("exact")(lambda name, references, config, device: None)
    with pytest.raises(ValueError, match="metric 'exact' is registered twice"):
        registry.register_metric("exact")(lambda name, references, config, device: None)


def test_a_registered_metric_is_found_and_an_unknown_one_lists_the_known_ones(monkeypatch):
    monkeypatch.setattr(registry, "METRICS", {})

    @registry.register_metric("exact", "same")
    def exact(name, references, config, device):
        return name

    assert registry.get_metric("same") is exact
    with pytest.raises(NmtkitError, match="unknown metric 'bleu'; choose from exact, same"):
        registry.get_metric("bleu")
