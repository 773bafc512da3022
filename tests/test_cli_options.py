"""Tests for nmtkit/cli_options.py: a config dataclass's fields become a command's options, with their defaults and
help, in the placeholder's place, and come back to the command as one dict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
import typer
import typer.rich_utils
from typer.testing import CliRunner

from nmtkit.cli_options import ConfigValues, config_options, field_options
from nmtkit.config.sections import option


@dataclass
class ToyConfig:
    size: int = option(3, "how many")
    rate: float = option(0.5, "how fast")
    mode: Literal["fast", "slow"] = option("fast", "fast or slow")
    names: list[str] = option(["a", "b"], "which ones")
    label: str | None = option(None, "what to call it")
    loud: bool = option(False, "shout")


RECEIVED: list[dict] = []  # what each call of a command below was given


def typer_app_of(command) -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    return app


def run(command, *args: str) -> dict:
    """What `command`, the only command of an app, received when invoked with `args`."""
    RECEIVED.clear()
    result = CliRunner().invoke(typer_app_of(command), list(args))
    assert result.exit_code == 0, result.output
    return RECEIVED[-1]


@config_options("settings", ToyConfig)
def full(first: Annotated[int, typer.Option()] = 1, *, settings: ConfigValues, last: bool = False) -> None:
    RECEIVED.append({"first": first, "last": last, **settings})


@config_options("settings", ToyConfig, skip=("label",), given_only=True)
def given(*, settings: ConfigValues) -> None:
    RECEIVED.append(settings)


def test_every_field_is_an_option_with_its_default_and_the_values_come_back_as_one_dict():
    assert run(full) == {"first": 1, "last": False, "size": 3, "rate": 0.5, "mode": "fast", "names": ["a", "b"],
                         "label": None, "loud": False}
    values = run(full, "--size", "7", "--rate", "2", "--mode", "slow", "--names", " x, y,,z ", "--label", "it",
                 "--loud", "--first", "4")
    assert values == {"first": 4, "last": False, "size": 7, "rate": 2.0, "mode": "slow", "names": ["x", "y", "z"],
                      "label": "it", "loud": True}


def test_the_options_take_the_placeholders_place_in_the_signature():
    names = list(full.__signature__.parameters)
    assert names == ["first", "size", "rate", "mode", "names", "label", "loud", "last"]
    assert full.__annotations__["size"].__metadata__[0].help == "how many"


def test_given_only_passes_the_options_given_and_a_false_flag_is_given():
    assert run(given) == {}
    assert run(given, "--rate", "1.5", "--no-loud") == {"rate": 1.5, "loud": False}
    assert run(given, "--loud", "--names", "c") == {"loud": True, "names": ["c"]}
    assert "label" not in given.__signature__.parameters


def test_each_options_help_is_its_fields(monkeypatch):
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 1000)  # one line per option
    help_text = CliRunner().invoke(typer_app_of(full), ["--help"]).output
    for item in field_options(ToyConfig):
        row = next(line for line in help_text.splitlines() if f"--{item.name.replace('_', '-')} " in line)
        assert item.help in row
    assert "[default: a,b]" in help_text


def test_a_missing_placeholder_a_clash_or_an_unknown_field_is_an_error():
    with pytest.raises(TypeError, match="needs a parameter 'settings'"):
        config_options("settings", ToyConfig)(lambda *, other: None)
    with pytest.raises(TypeError, match=r"none named \['size'\]"):
        config_options("settings", ToyConfig)(lambda *, settings, size=1: None)
    with pytest.raises(TypeError, match="ToyConfig has no field colour"):
        field_options(ToyConfig, only=("colour",))


def test_a_field_without_help_text_is_an_error():
    @dataclass
    class Bare:
        size: int = 3

    with pytest.raises(TypeError, match="config field size has no help text"):
        field_options(Bare)
