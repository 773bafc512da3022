"""Tests for nmtkit/config/sections.py: typed dataclass configs, YAML files, dotted overrides, and command-line flags
merged into a section."""

from __future__ import annotations

import dataclasses

import pytest

from nmtkit.config.files import apply_overrides, data_config, load_yaml, merge_flags
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig, TrainConfig, help_for, option
from nmtkit.config.values import check_numbers, from_dict
from nmtkit.errors import NmtkitError


@pytest.mark.parametrize("data, key", [
    ({"bogus": 1}, "bogus"),
    ({"train": {"lrr": 0.1}}, "lrr"),
    ({"decode": {"beam_size": 4}}, "beam_size"),
    ({"model": {"layers": 2}}, "model.layers"),
])
def test_unknown_keys_are_errors_naming_the_key(data, key):
    with pytest.raises(NmtkitError, match=key):
        build_config(data)


@pytest.mark.parametrize("data, key", [
    ({"train": {"lr": "abc"}}, "train.lr"),
    ({"train": {"max_steps": 1.5}}, "train.max_steps"),
    ({"train": {"max_steps": True}}, "train.max_steps"),
    ({"train": {"valid_bleu": "yes"}}, "train.valid_bleu"),
    ({"train": {"device": 3}}, "train.device"),
    ({"model": {"norm": "middle"}}, "model.norm"),
    ({"model": {"d_model": "wide"}}, "model.d_model"),
    ({"train": "fast"}, "train"),
])
def test_wrong_types_are_errors_naming_the_key(data, key):
    with pytest.raises(NmtkitError, match=key):
        build_config(data)


def test_numbers_are_coerced_to_the_annotated_type():
    config = build_config({"train": {"lr": 1, "max_steps": 10.0, "max_time": "2.5"}})
    assert isinstance(config.train.lr, float) and config.train.lr == 1.0
    assert isinstance(config.train.max_steps, int) and config.train.max_steps == 10
    assert config.train.max_time == 2.5


@pytest.mark.parametrize(("written", "seconds"), [(90, 90.0), ("90s", 90.0), ("45m", 2700.0), ("1.5h", 5400.0)])
def test_durations_are_seconds_or_written_as_the_max_time_flag_takes_them(written, seconds: float):
    config = build_config({"train": {"max_time": written, "stages": [{"mix": {"a": 1}, "until": {"time": written}}]}})
    assert config.train.max_time == config.train.stages[0].until.time == seconds
    with pytest.raises(NmtkitError, match="train.max_time: cannot read duration '45 minutes'"):
        build_config({"train": {"max_time": "45 minutes"}})


def test_override_in_yaml_11_exponent_syntax_ends_as_float():
    data = apply_overrides({}, ["train.lr=3e-4"])
    config = build_config(data)
    assert isinstance(config.train.lr, float)
    assert config.train.lr == pytest.approx(0.0003, rel=0, abs=1e-15)


def test_overrides_create_nested_sections_and_replace_values():
    data = {"train": {"lr": 0.1, "seed": 3}}
    apply_overrides(data, ["train.lr=0.5", "model.d_model=32", "a.b.c=hello", "train.device=cpu"])
    assert data == {"train": {"lr": 0.5, "seed": 3, "device": "cpu"}, "model": {"d_model": 32},
                    "a": {"b": {"c": "hello"}}}


def test_override_with_empty_value_is_an_empty_string():
    assert apply_overrides({}, ["train.device="]) == {"train": {"device": ""}}


@pytest.mark.parametrize("override", ["train.lr", "=3", " =3"])
def test_malformed_override_is_an_error(override):
    with pytest.raises(NmtkitError, match="section.key=value"):
        apply_overrides({}, [override])


def test_override_through_a_scalar_is_an_error():
    with pytest.raises(NmtkitError, match="not a section"):
        apply_overrides({"train": 5}, ["train.lr=1"])


def test_load_yaml_errors(tmp_path):
    with pytest.raises(NmtkitError, match="cannot read"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed\n", encoding="utf-8")
    with pytest.raises(NmtkitError, match="not valid YAML"):
        load_yaml(bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(NmtkitError, match="mapping"):
        load_yaml(listing)


@pytest.mark.parametrize("settings, needle", [
    ({"nbest": 2, "sample": True}, "--nbest needs beam search"),
    ({"nbest": 3, "beam": 2}, "--nbest 3"),
    ({"nbest": 2, "stop_finished": 1}, "--stop-finished"),
    ({"beam": 1, "coverage_penalty": 0.2}, "--coverage-penalty"),
    ({"sample": True, "coverage_penalty": 0.2}, "--coverage-penalty"),
    ({"beam": 0}, "--beam"),
    ({"temperature": 0.0}, "--temperature"),
    ({"top_p": 1.5}, "--top-p"),
])
def test_decode_settings_that_contradict_each_other_are_errors(settings, needle):
    with pytest.raises(NmtkitError, match=needle):
        DecodeConfig(**settings)
    with pytest.raises(NmtkitError, match=needle):
        build_config({"decode": settings})


def test_merge_flags_takes_the_flags_given_and_keeps_the_rest():
    section = {"beam": 5, "nbest": 2}
    merged = merge_flags(section, beam=1, nbest=None, seed=3)
    assert merged == {"beam": 1, "nbest": 2, "seed": 3}
    assert section == {"beam": 5, "nbest": 2}  # a copy: the section read is left as it was
    assert merge_flags(None, max_steps=10, seed=None) == {"max_steps": 10}  # `train:` with nothing under it
    assert merge_flags({"sample": True}, sample=False) == {"sample": False}  # False is given, only None is not


def test_merge_flags_refuses_a_section_that_is_not_a_mapping():
    with pytest.raises(NmtkitError, match="expected a mapping"):
        merge_flags("fast", max_steps=10)


def test_help_for_is_the_fields_help_text():
    assert help_for(DecodeConfig, "beam") == "beam size (1 = greedy)"
    assert help_for(TrainConfig, "max_steps") == "stop after this many updates (0 = no limit)"
    with pytest.raises(KeyError, match="beam_size"):
        help_for(DecodeConfig, "beam_size")


def test_data_config_reads_the_file_then_the_flags_then_the_overrides(tmp_path):
    path = tmp_path / "data.yaml"
    path.write_text("subword: unigram\nvocab_size: 500\nseed: 4\n", encoding="utf-8")
    config = data_config(path, ["data.seed=5", "max_words=9"], vocab_size=300, joint=None)
    assert (config.subword, config.vocab_size, config.joint, config.seed, config.max_words) == ("unigram", 300, True,
                                                                                               5, 9)
    assert data_config(None, [], subword=None) == DataConfig()
    with pytest.raises(NmtkitError, match="data.vocab"):
        data_config(None, ["vocab=3"])


@pytest.mark.parametrize("data, key", [
    ({"train": {"lr": float("nan")}}, "train.lr"),
    ({"train": {"max_time": "inf"}}, "train.max_time"),
    ({"decode": {"alpha": "NaN"}}, "decode.alpha"),
    ({"decode": {"word_penalty": float("-inf")}}, "decode.word_penalty"),
    ({"decode": {"max_len_b": float("inf")}}, "decode.max_len_b"),
    ({"model": {"dropout": float("nan")}}, "model.dropout"),
])
def test_infinity_and_nan_are_errors_naming_the_key(data, key):
    with pytest.raises(NmtkitError, match=rf"{key}: expected (a finite number|int)"):
        build_config(data)


def test_infinity_and_nan_are_errors_in_every_section():
    with pytest.raises(NmtkitError, match="data.max_ratio: expected a finite number"):
        data_config(None, ["max_ratio=.nan"])


@pytest.mark.parametrize("data, key", [
    ({"decode": {"max_len_b": 10**40}}, "decode.max_len_b: .* too large"),
    ({"decode": {"max_len_b": 1e39}}, "decode.max_len_b: .* too large"),  # a JSON request's 1e39 is a float
    ({"train": {"seed": -(2**64)}}, "train.seed: .* too large"),
    ({"train": {"max_time": 10**400}}, "train.max_time: .* too large"),  # beyond any float
    ({"decode": {"max_len_a": 1e39}}, r"decode.max_len_a: must be in \[0, 1000\]"),
    ({"decode": {"max_len_a": -0.5}}, r"decode.max_len_a: must be in \[0, 1000\]"),
    ({"decode": {"beam": 5000}}, r"decode.beam: must be in \[1, 1024\]"),
    ({"decode": {"min_len": 10**7}}, "decode.min_len"),
    ({"decode": {"alpha": 1e6}}, "decode.alpha"),
    ({"train": {"valid_every": 0}}, "train.valid_every: must be"),  # was ZeroDivisionError once training ran
    ({"train": {"log_every": 0}}, "train.log_every: must be"),
    ({"train": {"update_freq": 0}}, "train.update_freq: must be"),
])
def test_numbers_out_of_range_are_errors_naming_the_key(data, key):
    with pytest.raises(NmtkitError, match=key):
        build_config(data)


def test_numbers_at_the_ends_of_their_range_are_accepted():
    config = build_config({"decode": {"max_len_a": 1000, "max_len_b": -1_000_000, "beam": 1024, "alpha": 0},
                           "train": {"seed": 2**63 - 1}})
    assert (config.decode.max_len_a, config.decode.max_len_b, config.decode.beam) == (1000.0, -1_000_000, 1024)
    assert config.train.seed == 2**63 - 1


def test_an_optional_number_is_none_or_checked_as_a_number():
    @dataclasses.dataclass
    class Optional:
        value: float | None = option(None, "a number, or none")

    assert from_dict(Optional, {"value": None}).value is None
    assert from_dict(Optional, {"value": "0.5"}).value == 0.5
    with pytest.raises(NmtkitError, match="value: expected a finite number"):
        from_dict(Optional, {"value": "nan"})


def test_check_numbers_checks_a_config_built_without_from_dict():
    check_numbers(DecodeConfig(alpha=0.6, max_len_a=2.0))
    with pytest.raises(NmtkitError, match="decode.alpha: expected a finite number"):
        check_numbers(DecodeConfig(alpha=float("nan")), "decode.")
    with pytest.raises(NmtkitError, match=r"max_len_a: must be in \[0, 1000\]"):
        check_numbers(DecodeConfig(max_len_a=1e39))
