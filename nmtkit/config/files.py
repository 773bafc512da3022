"""Settings on disk and on the command line: YAML config files, `section.key=value` overrides and flags merged into
a config's sections, and prepare's `DataConfig` built from them (the typed configs themselves:
`nmtkit.config.sections`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmtkit.config.sections import DataConfig, to_dict
from nmtkit.config.values import from_dict
from nmtkit.errors import NmtkitError


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` overrides (values parsed as YAML scalars) to a nested dict."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise NmtkitError(f"override {item!r} is not of the form section.key=value")
        *sections, leaf = key.strip().split(".")
        node = data
        for section in sections:
            node = node.setdefault(section, {})
            if not isinstance(node, dict):
                raise NmtkitError(f"override {item!r}: {section} is not a section")
        node[leaf] = yaml_scalar(text) if text.strip() else ""
    return data


def merge_flags(section: dict | None, **flags: Any) -> dict:
    """A copy of config `section` (None, as YAML reads an empty one, counts as empty) with the command-line flags that
    were given: a flag left at None keeps the section's value."""
    if section is not None and not isinstance(section, dict):
        raise NmtkitError(f"config section: expected a mapping of keys, got {section!r}")
    return {**(section or {}), **{key: value for key, value in flags.items() if value is not None}}


def data_config(path: Path | None, overrides: list[str], **flags: Any) -> DataConfig:
    """`prepare`'s settings: the YAML file of data settings, the flags given, then `data.key=value` (or
    `key=value`) overrides."""
    data = merge_flags(load_yaml(path) if path else {}, **flags)
    overrides = [override.removeprefix("data.") for override in overrides]
    return from_dict(DataConfig, apply_overrides(data, overrides), "data.")


def yaml_scalar(text: str) -> Any:
    import yaml  # here, not at the top: PyYAML takes 30 ms to import, and `translate -m` reads no YAML

    return yaml.safe_load(text)


def load_yaml(path: str | Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise NmtkitError(f"cannot read config {path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise NmtkitError(f"config {path} is not valid YAML: {str(error).splitlines()[0]}") from error
    if data is not None and not isinstance(data, dict):
        raise NmtkitError(f"config {path} must hold a mapping of sections")
    return data or {}


def save_yaml(config: Any, path: str | Path) -> None:
    import yaml

    Path(path).write_text(yaml.safe_dump(to_dict(config), sort_keys=False), encoding="utf-8")
