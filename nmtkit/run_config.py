"""A run's whole `Config`: its model section typed by the registered model it names; `train`'s config from its file,
flags and overrides.

This module sits above the models (it imports them all, so every built-in model is registered); `nmtkit.config`
below them holds the dataclasses, YAML and overrides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nmtkit.models  # noqa: F401  (registers the built-in models)
from nmtkit.config import Config, apply_overrides, from_dict, load_yaml, merge_flags
from nmtkit.errors import NmtkitError
from nmtkit.registry import get_model


def build_config(data: dict | None) -> Config:
    """Build a full `Config`; the model section's type is chosen by its `name`."""
    data = dict(data or {})
    model_data = data.pop("model", None) or {}
    if not isinstance(model_data, dict):
        raise NmtkitError(f"config section model: expected a mapping, got {model_data!r}")
    name = model_data.get("name", "transformer")
    if not isinstance(name, str):
        raise NmtkitError(f"config key model.name: expected a model name, got {name!r}")
    entry = get_model(name)
    config = from_dict(Config, data)
    config.model = from_dict(entry.config_cls, model_data, "model.")
    return config


def train_config(path: Path | None, resumed: Path | None, model: str | None, overrides: list[str],
                 **train_flags: Any) -> Config:
    """`train`'s config: the YAML file at `path`, else the config.yaml of the run being resumed in `resumed`, if any;
    `model` (`--model`) names the model; the train flags given (None: not given), then `section.key=value`
    overrides, apply last."""
    saved = resumed / "config.yaml" if resumed is not None else None
    source = path if path else saved if saved is not None and saved.exists() else None
    raw = load_yaml(source) if source else {}
    if model:
        raw["model"] = model_section(raw.get("model"), model, source)
    raw["train"] = merge_flags(raw.get("train"), **train_flags)
    return build_config(apply_overrides(raw, overrides))


def model_section(section: Any, model: str, source: Path | None) -> dict:
    """The model section for `--model`: the file's own when it names this model or none; a section written for
    another model (or that is not a mapping) does not apply to this one and is left out."""
    if not isinstance(section, dict) or section.get("name", model) != model:
        return {"name": model}
    return merge_flags(section, name=model)
