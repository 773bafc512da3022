"""LateDropout: every dropout of a model at 0 until its fraction of the budget, then at the model's own rates."""

from __future__ import annotations

from nmtkit.config.sections import TrainConfig
from nmtkit.models.transformer import Transformer, TransformerConfig
from nmtkit.training.late_dropout import LateDropout


def rates_now(late: LateDropout) -> set[float]:
    return {getattr(module, attribute) for module, attribute, _ in late.rates}


def test_dropout_is_off_before_the_fraction_and_back_at_the_models_rates_after():
    model = Transformer(TransformerConfig(encoder_layers=1, decoder_layers=1, d_model=16, heads=2, ffn=32,
                                          dropout=0.1, attention_dropout=0.2, activation_dropout=0.3), 20, 20, False)
    late = LateDropout(model, TrainConfig(dropout_from=0.5, max_steps=0, max_time=100.0))
    assert rates_now(late) == {0.1, 0.2, 0.3}
    assert late.follow(step=0, elapsed=0.0) is False and rates_now(late) == {0.0}
    assert late.follow(step=40, elapsed=49.0) is False and rates_now(late) == {0.0}
    assert late.follow(step=41, elapsed=50.0) is True and rates_now(late) == {0.1, 0.2, 0.3}
    assert late.follow(step=42, elapsed=51.0) is False and rates_now(late) == {0.1, 0.2, 0.3}


def test_without_a_fraction_dropout_stays_on():
    config = TransformerConfig(encoder_layers=1, decoder_layers=1, d_model=16, heads=2, ffn=32)
    model = Transformer(config, 20, 20, False)
    late = LateDropout(model, TrainConfig(max_steps=10))
    assert late.follow(step=0, elapsed=0.0) is False and rates_now(late) == {0.0, 0.1}
