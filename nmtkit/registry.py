"""A small explicit registry of models: `@register_model("name", config=Cls)`.

Models are imported explicitly in `nmtkit.models`, never discovered by scanning folders. This module imports no
other part of nmtkit but its errors, so that the models can import it without an import circle; the base class
they must subclass is defined above it, in `nmtkit.models.base`, and declared here with `@register_model_base`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, is_dataclass

from nmtkit.errors import NmtkitError


@dataclass(frozen=True)
class ModelEntry:
    name: str
    cls: type
    config_cls: type


MODELS: dict[str, ModelEntry] = {}
MODEL_BASES: list[type] = []  # the class every registered model subclasses: EncoderDecoder


def register_model_base(cls: type) -> type:
    """Declare `cls` (`EncoderDecoder`) the class every registered model must subclass."""
    MODEL_BASES.append(cls)
    return cls


def register_model(name: str, config: type) -> Callable[[type], type]:
    """Register an `EncoderDecoder` subclass under `name` with its config dataclass."""

    def decorate(cls: type) -> type:
        if name in MODELS:
            raise ValueError(f"model {name!r} is registered twice")
        if not issubclass(cls, tuple(MODEL_BASES)):  # a subclass imported its base, which declared itself
            raise TypeError(f"model {name!r}: {cls.__name__} does not subclass EncoderDecoder")
        if not is_dataclass(config):
            raise TypeError(f"model {name!r}: config {config.__name__} is not a dataclass")
        MODELS[name] = ModelEntry(name, cls, config)
        return cls

    return decorate


def get_model(name: str) -> ModelEntry:
    """The model registered under `name`; `nmtkit.models` registers the built-in ones when imported."""
    if name not in MODELS:
        raise NmtkitError(f"unknown model {name!r}; choose one of: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def build_model(model_config, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
    """Instantiate the registered model named by `model_config.name`."""
    try:
        return get_model(model_config.name).cls(model_config, src_vocab, tgt_vocab, shared_vocab)
    except ValueError as error:  # a model rejects an inconsistent configuration
        raise NmtkitError(f"model {model_config.name}: {error}") from error
