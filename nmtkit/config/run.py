"""A run's whole `Config`: its model section typed by the registered model it names.

This module sits above the models (it imports them all, so every built-in model is registered); `nmtkit.config.sections`
below them holds the dataclasses, YAML and overrides.
"""

from __future__ import annotations

import nmtkit.models  # noqa: F401  (registers the built-in models)
from nmtkit.config.sections import Config
from nmtkit.config.values import from_dict
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
