"""Command-line options made from a config dataclass: each field's name, default and help text (declared once, with
`nmtkit.config.sections.option`) become the option `--field-name`, so a new config field gets its flag with no CLI
edit; and how every command reports a user's error (`handle_errors`: one line, no traceback unless `--debug`).

Typer reads a command's options from its function's signature. `config_options` rewrites that signature: one
placeholder parameter of the command becomes one option per field, and the command receives the values back as a
dict under the placeholder's name, from which it builds the config (as from YAML or `--set`).
"""

import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import typer

from nmtkit.errors import NmtkitError

ConfigValues = dict[str, Any]  # the type of a placeholder parameter: field name -> value from the command line
_tracebacks = {"shown": False}  # nmtkit --debug


def show_tracebacks(shown: bool) -> None:
    """`--debug`: errors go up as tracebacks instead of one line (`handle_errors`)."""
    _tracebacks["shown"] = shown


@dataclasses.dataclass(frozen=True)
class FieldOption:
    """What the command line needs of a config field."""

    name: str
    kind: Any  # the type typer parses
    default: Any
    help: str
    is_list: bool  # written as one comma-separated value


def field_options(cls: type, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[FieldOption]:
    """The fields of config dataclass `cls` that become options: those named in `only`, else all but `skip`."""
    hints = typing.get_type_hints(cls)
    fields = {item.name: item for item in dataclasses.fields(cls)}
    unknown = [name for name in (*only, *skip) if name not in fields]
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
    return [_field_option(fields[name], hints[name]) for name in (only or fields) if name not in skip]


def _field_option(item: dataclasses.Field, kind: Any) -> FieldOption:
    if "help" not in item.metadata:
        raise TypeError(f"config field {item.name} has no help text: declare it with nmtkit.config.sections.option")
    default = item.default_factory() if item.default is dataclasses.MISSING else item.default
    is_list = typing.get_origin(kind) is list
    if is_list:
        kind, default = str, ",".join(default)
    elif typing.get_origin(kind) is Literal:  # checked by the config, whose error names the choices
        kind = type(typing.get_args(kind)[0])
    return FieldOption(item.name, kind, default, item.metadata["help"], is_list)


def _parameter(option: FieldOption, given_only: bool) -> inspect.Parameter:
    kind, default = (option.kind | None, None) if given_only else (option.kind, option.default)
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(help=option.help)])


def _values(options: list[FieldOption], given: dict[str, Any], given_only: bool) -> ConfigValues:
    """The config values of the options' command-line values; with `given_only`, of those given."""
    values = {}
    for option in options:
        value = given[option.name]
        if option.is_list and value is not None:
            value = [item.strip() for item in value.split(",") if item.strip()]
        if value is not None or not given_only:
            values[option.name] = value
    return values


def config_options(placeholder: str, cls: type, only: tuple[str, ...] = (), skip: tuple[str, ...] = (),
                   given_only: bool = False) -> Callable[[Callable], Callable]:
    """A decorator for a command: its parameter `placeholder` (typed `ConfigValues`) becomes one option per field of
    config dataclass `cls` (see `field_options`), in its place, and receives their values as a dict. With
    `given_only`, the options have no default and the dict holds only those given, so that the config's other
    values come from elsewhere (a model's own decode settings)."""
    options = field_options(cls, only, skip)

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command)
        clashes = [option.name for option in options if option.name in signature.parameters]
        if placeholder not in signature.parameters or clashes:
            raise TypeError(f"{command.__name__}: needs a parameter {placeholder!r} and none named {clashes}")
        parameters = []
        for parameter in signature.parameters.values():
            if parameter.name == placeholder:
                parameters.extend(_parameter(option, given_only) for option in options)
            else:
                parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(command)
        def with_config_values(**kwargs):
            given = {option.name: kwargs.pop(option.name) for option in options}
            return command(**kwargs, **{placeholder: _values(options, given, given_only)})

        with_config_values.__signature__ = signature.replace(parameters=parameters)
        with_config_values.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
        return with_config_values

    return decorate


def handle_errors(command):
    """Report NmtkitError (and a closed stdout) in one line instead of a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except NmtkitError as error:
            if _tracebacks["shown"]:
                raise
            print(f"error: {error}", file=sys.stderr)
            raise typer.Exit(1) from None
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except OSError as error:  # e.g. a full disk under stdout: the system's reason, in one line
            if _tracebacks["shown"]:
                raise
            print(f"error: {error.strerror or error} ({error.filename or 'standard output'})",
                  file=sys.stderr)
            with contextlib.suppress(OSError, ValueError):  # stdout without a descriptor (in-process runs)
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when it closes
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper


class CurrentStderrHandler(logging.StreamHandler):
    """Writes each record to sys.stderr as it is then, not as it was when the command started: a command run
    in-process (tests, a notebook) may be given a sys.stderr that is closed when it returns, and records logged
    after that must not go to the closed stream."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _stream) -> None:
        pass  # StreamHandler assigns a stream in __init__ and setStream; this handler has none of its own
