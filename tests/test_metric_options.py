"""Tests for nmtkit/metrics/options.py: each metric registers with its own options dataclass, and evaluate's flags
and checks come from those classes."""

from __future__ import annotations

import dataclasses

import pytest

import nmtkit.metrics.builtin  # noqa: F401  (registers the metrics)
from nmtkit.errors import NmtkitError
from nmtkit.metrics.options import OPTIONS, BleuOptions, ChrfOptions, EditOptions, EvaluateConfig, TerOptions
from nmtkit.registry import METRICS, metric_options


def test_every_metric_with_options_has_flags_and_every_options_class_a_metric():
    registered = {metric_options(name) for name in METRICS} - {None}
    assert registered == set(OPTIONS)
    assert [metric_options(name) for name in ("chrf", "chrf++", "bleu", "wer")] == [ChrfOptions, ChrfOptions,
                                                                                  BleuOptions, None]


def test_the_config_holds_each_options_field_under_its_prefix():
    names = {item.name for item in dataclasses.fields(EvaluateConfig)}
    for cls in OPTIONS:
        assert {cls.prefix + item.name for item in dataclasses.fields(cls)} <= names
    config = EvaluateConfig(chrf_word_order=2, ter_no_punct=True, smooth="floor", edit_unit="word")
    assert config.options(ChrfOptions) == ChrfOptions(word_order=2)
    assert config.options(TerOptions) == TerOptions(no_punct=True)
    assert config.options(BleuOptions) == BleuOptions(smooth="floor")
    assert config.options(EditOptions) == EditOptions(unit="word")


@pytest.mark.parametrize(("settings", "needle"), [
    ({"chrf_beta": -1}, "beta must not be negative"), ({"chrf_char_order": 0}, "character n-gram order >= 1"),
    ({"smooth": "lots"}, "unknown BLEU smoothing"), ({"smooth_value": 0.5}, "not exp"),
    ({"max_ngram_order": 0}, "at least 1"), ({"edit_costs": "1,x,1"}, "three integers"),
    ({"edit_unit": "byte"}, "char or word"), ({"chrf_beta": 2**70}, "chrf_beta")])
def test_each_class_checks_its_options_when_the_config_is_built(settings, needle):
    with pytest.raises(NmtkitError, match=needle):
        EvaluateConfig(**settings)
