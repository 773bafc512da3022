"""A small explicit registry of models: `@register_model("name", config=Cls)`.

Models are imported explicitly in `nmtkit.models`, never discovered by scanning folders.
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


def register_model(name: str, config: type) -> Callable[[type], type]:
    """Register an `EncoderDecoder` subclass under `name` with its config dataclass."""

    def decorate(cls: type) -> type:
        from nmtkit.models.base import EncoderDecoder

        if name in MODELS:
            raise ValueError(f"model {name!r} is registered twice")
        if not issubclass(cls, EncoderDecoder):
            raise TypeError(f"model {name!r}: {cls.__name__} does not subclass EncoderDecoder")
        if not is_dataclass(config):
            raise TypeError(f"model {name!r}: config {config.__name__} is not a dataclass")
        MODELS[name] = ModelEntry(name, cls, config)
        return cls

    return decorate


def get_model(name: str) -> ModelEntry:
    import nmtkit.models  # noqa: F401  (registers the built-in models)

    if name not in MODELS:
        raise NmtkitError(f"unknown model {name!r}; choose one of: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def build_model(model_config, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
    """Instantiate the registered model named by `model_config.name`."""
    try:
        return get_model(model_config.name).cls(model_config, src_vocab, tgt_vocab, shared_vocab)
    except ValueError as error:  # a model rejects an inconsistent configuration
        raise NmtkitError(f"model {model_config.name}: {error}") from error
