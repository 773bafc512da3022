"""Typed values of the config dataclasses (`nmtkit.config.sections`): a section built from a dict (YAML, overrides, a
checkpoint's config) with unknown keys, wrong types and numbers out of their `option` range refused, durations read
from text. Imports no other part of nmtkit but its errors.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import types
import typing
from typing import Any, Literal

from nmtkit.errors import NmtkitError

LARGEST_INT = 2**63 - 1  # what a tensor, a seed or a C library takes: a larger number is a mistake, not a setting
LARGEST_FLOAT = sys.float_info.max
Seconds = typing.NewType("Seconds", float)  # a duration: a number of seconds, or text such as 90s, 45m or 1.5h


def parse_duration(text: str) -> float:
    """'3600', '90s', '45m', '1.5h' -> seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not match:
        raise NmtkitError(f"cannot read duration {text!r}; write e.g. 3600, 90s, 45m or 1.5h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def _type_name(kind: Any) -> str:
    if typing.get_origin(kind) is Literal:
        return " | ".join(repr(choice) for choice in typing.get_args(kind))
    return getattr(kind, "__name__", str(kind))


def _coerce(value: Any, kind: Any, where: str) -> Any:
    """Check `value` against the annotated type; numbers written as strings are accepted."""
    if typing.get_origin(kind) is Literal:
        if value in typing.get_args(kind):
            return value
    elif kind is bool:
        if isinstance(value, bool):
            return value
    elif kind in (int, float):
        return _number(value, kind, where)
    elif kind is Seconds:
        return _seconds(value, where)
    elif kind is str and isinstance(value, str):
        return value
    elif typing.get_origin(kind) in (list, dict):
        return _collection(value, kind, where)
    elif isinstance(kind, types.UnionType):
        return _union(value, kind, where)
    elif kind is Any:
        return value
    raise NmtkitError(f"config key {where}: expected {_type_name(kind)}, got {value!r}")


def _collection(value: Any, kind: Any, where: str) -> Any:
    """A `list[X]` or a `dict[str, X]` of checked items; an X that is a dataclass is built with `from_dict`."""
    origin, item_kind = typing.get_origin(kind), typing.get_args(kind)[-1]
    if not isinstance(value, origin) or (origin is dict and not all(isinstance(key, str) for key in value)):
        raise NmtkitError(f"config key {where}: expected a {'list' if origin is list else 'mapping of names'}, "
                          f"got {value!r}")
    items = enumerate(value) if origin is list else value.items()
    checked = {key: from_dict(item_kind, child, f"{where}[{key}].") if dataclasses.is_dataclass(item_kind)
               else _coerce(child, item_kind, f"{where}.{key}") for key, child in items}
    return list(checked.values()) if origin is list else checked


def _number(value: Any, kind: type, where: str) -> int | float:
    """`value` as an int or a float. Infinity and NaN are refused (a NaN penalty would rank every hypothesis NaN, an
    infinite length limit overflows), and so is an int beyond 64 bits, which no tensor or library call takes."""
    if isinstance(value, str):
        try:
            value = kind(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NmtkitError(f"config key {where}: expected {_type_name(kind)}, got {value!r}")
    _check_size(value, kind, where)
    if kind is int and not float(value).is_integer():
        raise NmtkitError(f"config key {where}: expected int, got {value!r}")
    return kind(value)


def _seconds(value: Any, where: str) -> float:
    """A duration written as a number of seconds (checked as any number) or as text such as 45m."""
    if not isinstance(value, str):
        return _number(value, float, where)
    try:
        return _number(float(value), float, where)
    except ValueError:
        pass
    try:
        return parse_duration(value)
    except NmtkitError as error:
        raise NmtkitError(f"config key {where}: {error}") from error


def _union(value: Any, kind: types.UnionType, where: str) -> Any:
    """An optional setting (`float | None`): None, or a value of its one other type; other unions are unchecked."""
    others = [member for member in typing.get_args(kind) if member is not type(None)]
    if value is None and len(others) < len(typing.get_args(kind)):
        return None
    return _coerce(value, others[0], where) if len(others) == 1 else value


def _check_size(value: int | float, kind: type, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NmtkitError(f"config key {where}: expected a finite number, got {value!r}")
    if abs(value) > (LARGEST_INT if kind is int else LARGEST_FLOAT):
        raise NmtkitError(f"config key {where}: {value!r} is too large")


def check_numbers(config: Any, where: str = "") -> None:
    """Every number setting of dataclass `config` finite, within 64 bits (an int) and within its `option` range:
    what `from_dict` checks, for a config built another way (from command-line flags, say)."""
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            _check_size(value, type(value), f"{where}{item.name}")
            _check_range(value, item, f"{where}{item.name}")


def _check_range(value: Any, item: dataclasses.Field, where: str) -> None:
    low, high = item.metadata.get("range", (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"at most {high}" if low is None else f"in [{low}, {high}]"
        raise NmtkitError(f"config key {where}: must be {bounds}, got {value!r}")


def from_dict(cls: type, data: Any, where: str = "") -> Any:
    """Build dataclass `cls` from a dict, rejecting unknown keys, wrong types and numbers out of their range."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise NmtkitError(f"config section {where or '(top)'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {item.name: item for item in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            raise NmtkitError(f"unknown config key {where}{key}; known keys: {', '.join(sorted(fields))}")
        kind = hints[key]
        if dataclasses.is_dataclass(kind):
            kwargs[key] = from_dict(kind, value, f"{where}{key}.")
        else:
            kwargs[key] = _coerce(value, kind, f"{where}{key}")
    config = cls(**kwargs)  # its own checks first: they word the errors of the settings they cover
    check_numbers(config, where)
    return config
