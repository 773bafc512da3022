"""`train`'s config: from its YAML file (or the run being resumed), `--model`, the flags given and the overrides; a
fine-tuning run without a model section takes its checkpoint's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmtkit.config import Config, apply_overrides, load_yaml, merge_flags
from nmtkit.errors import NmtkitError
from nmtkit.finetune import saved_model_section
from nmtkit.run_config import build_config


def train_config(path: Path | None, resumed: Path | None, model: str | None, overrides: list[str],
                 **train_flags: Any) -> Config:
    """`train`'s config: the YAML file at `path`, else the config.yaml of the run being resumed in `resumed`, if any;
    `model` (`--model`) names the model (else a fine-tuning run without a model section takes its `init_from`
    checkpoint's); the train flags given (None: not given), then `section.key=value`
    overrides, apply last."""
    saved = resumed / "config.yaml" if resumed is not None else None
    source = path if path else saved if saved is not None and saved.exists() else None
    raw = load_yaml(source) if source else {}
    if model:
        raw["model"] = model_section(raw.get("model"), model, source)
    elif train_flags.get("init_from") and "model" not in raw:  # fine-tuning keeps the checkpoint's architecture
        raw["model"] = saved_model_section(train_flags["init_from"])
    raw["train"] = merge_flags(raw.get("train"), **train_flags)
    return build_config(apply_overrides(raw, overrides))


def model_section(section: Any, model: str, source: Path | None) -> dict:
    """The model section for `--model`: the file's own when it names this model or no model; a section written for
    another model is an error (its settings would otherwise be silently dropped)."""
    if section is None:
        return {"name": model}
    if not isinstance(section, dict):
        raise NmtkitError(f"config section model: expected a mapping, got {section!r}")
    if section.get("name", model) != model:
        raise NmtkitError(f"--model {model} disagrees with {source}, whose model section is for "
                          f"{section['name']!r}; drop --model, or use a config written for {model}")
    return merge_flags(section, name=model)
