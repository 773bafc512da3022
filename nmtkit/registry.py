"""Small explicit registries: models, `@register_model("name", config=Cls)`, the attention scores of the RNN
models, `@register_score("dot")`, and the metrics of `nmtkit evaluate`, `@register_metric("chrf", options=Cls)`. A
name registered twice is an error; an unknown name lists the known ones.

Models are imported explicitly in `nmtkit.models`, scores defined in `nmtkit.modules.attention` and metric modules
imported explicitly in `nmtkit.metrics.builtin`, never discovered by scanning folders. This module imports no other
part of nmtkit but its errors, so that models, modules and metrics can import it without an import circle; the
base class every model subclasses is defined above it, in `nmtkit.models.base`, and declared here with
`@register_model_base`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, is_dataclass
from typing import Any

from nmtkit.errors import NmtkitError


@dataclass(frozen=True)
class ModelEntry:
    name: str
    cls: type
    config_cls: type


MODELS: dict[str, ModelEntry] = {}
MODEL_BASES: list[type] = []  # the class every registered model subclasses: EncoderDecoder
SCORES: dict[str, Callable[..., Any]] = {}  # name -> build(query_dim, key_dim, options) -> score Module
METRICS: dict[str, Callable[..., Any]] = {}  # name -> build(name, references, config, device) -> Metric


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


def _register_builder(table: dict[str, Callable[..., Any]], kind: str,
                      names: tuple[str, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that registers a builder in `table` under each of `names` (aliases share one builder)."""

    def decorate(build: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            if name in table:
                raise ValueError(f"{kind} {name!r} is registered twice")
            table[name] = build
        return build

    return decorate


def register_score(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a builder of an attention score Module under each of `names` (aliases share one builder)."""
    return _register_builder(SCORES, "attention score", names)


def get_score(name: str) -> Callable[..., Any]:
    """The builder registered under `name`. An unknown name is a ValueError, which the model that asked for it
    reports as an inconsistent configuration (see `build_model`)."""
    if name not in SCORES:
        raise ValueError(f"unknown attention score {name!r}; choose one of: {', '.join(SCORES)}")
    return SCORES[name]


def register_metric(*names: str, options: type | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a builder of a metric under each of `names`, with its options dataclass if it has options (as a
    model registers with its config; `nmtkit.metrics.options` lists every such class, so that evaluate's flags hold
    them); the builder is called as `build(name, references, config, device)` with the name asked for (so that
    aliases such as chrf and chrf++ share one builder), the reference streams, the `EvaluateConfig` (whose
    `options(cls)` gives the metric its own) and the torch device, and returns a `nmtkit.metrics.Metric`."""
    register = _register_builder(METRICS, "metric", names)

    def decorate(build: Callable[..., Any]) -> Callable[..., Any]:
        build.options = options  # kept with the builder: `metric_options`
        return register(build)

    return decorate


def metric_options(name: str) -> type | None:
    """The options dataclass the metric `name` registered with (None: it has none)."""
    return getattr(get_metric(name), "options", None)


def get_metric(name: str) -> Callable[..., Any]:
    """The builder registered under `name`; `nmtkit.metrics.builtin` registers the built-in metrics when imported."""
    if name not in METRICS:
        raise NmtkitError(f"unknown metric {name!r}; choose from {', '.join(METRICS)}")
    return METRICS[name]


def metric_names() -> list[str]:
    """Every registered metric's name, in the order registered."""
    return list(METRICS)
