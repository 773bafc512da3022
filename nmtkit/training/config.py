"""`train`'s config: from its YAML file (or the run being resumed), `--model`, the flags given and the overrides; a
fine-tuning run without a model section takes its checkpoint's. A config is complete when it is built (`completed`):
the settings left to the device are filled in and the settings that clash are refused, in that one place."""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import Any

from nmtkit.config.files import apply_overrides, load_yaml, merge_flags
from nmtkit.config.run import build_config
from nmtkit.config.sections import Config, TrainConfig
from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import pick_device
from nmtkit.training.finetune import read_start, saved_model_section
from nmtkit.training.modifiers import check_modifier_names
from nmtkit.training.schedule import resolve_schedule

log = logging.getLogger(__package__)


def train_config(path: Path | None, resumed: Path | None, model: str | None, overrides: list[str],
                 start: dict | None = None, **train_flags: Any) -> Config:
    """`train`'s complete config: the YAML file at `path`, else the config.yaml of the run being resumed in
    `resumed`, if any; `model` (`--model`) names the model (else a fine-tuning run without a model section takes
    its `init_from` checkpoint's, `start` when the caller has read it already); the train flags given (None: not
    given), then `section.key=value` overrides, apply last."""
    saved = resumed / "config.yaml" if resumed is not None else None
    source = path if path else saved if saved is not None and saved.exists() else None
    raw = load_yaml(source) if source else {}
    if model:
        raw["model"] = model_section(raw.get("model"), model, source)
    elif train_flags.get("init_from") and "model" not in raw:  # fine-tuning keeps the checkpoint's architecture
        raw["model"] = saved_model_section(start or read_start(train_flags["init_from"]))
    raw["train"] = merge_flags(raw.get("train"), **train_flags)
    return completed(build_config(apply_overrides(raw, overrides)))


def completed(config: Config) -> Config:
    """`config` with the train settings left to the device (train.device's type) filled in and checked: what a run
    trains with and its config.yaml records. A complete config comes back equal."""
    train = resolve_schedule(config.train, pick_device(config.train.device).type)
    check_train_config(train)
    return dataclasses.replace(config, train=train)


def open_settings(train: TrainConfig) -> list[str]:
    """The train settings that `completed` has yet to fill in."""
    left = {"batch_tokens": train.batch_tokens == 0, "warmup": train.warmup < 0, "lr": train.lr < 0,
            "lr_schedule": train.lr_schedule == "auto"}
    return [f"train.{name}" for name, is_open in left.items() if is_open]


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


def check_train_config(train) -> None:
    """Settings that are each valid alone but not together, or out of range."""
    if not 0.0 <= train.scheduled_sampling <= 1.0:
        raise NmtkitError(f"train.scheduled_sampling must be a probability, got {train.scheduled_sampling}")
    if train.update_freq < 1 or train.batch_tokens < 1:
        raise NmtkitError("train.update_freq and train.batch_tokens must be at least 1")
    if train.max_length < 2:
        raise NmtkitError(f"train.max_length must be at least 2 (a subword and EOS), got {train.max_length}")
    if train.lr_schedule in ("linear", "wsd") and not (train.max_steps or train.max_time):
        raise NmtkitError(f"train.lr_schedule={train.lr_schedule} decays to zero at the end of the budget: give "
                          "--max-steps or --max-time")
    if train.lr_schedule == "wsd" and not 0.0 < train.cooldown <= 1.0:
        raise NmtkitError(f"train.cooldown is the share of the budget the wsd schedule decays over, in (0, 1], got "
                          f"{train.cooldown}")
    if train.dropout_from and not (0.0 < train.dropout_from < 1.0 and (train.max_steps or train.max_time)):
        raise NmtkitError(f"train.dropout_from is a fraction of the budget in [0, 1) and needs --max-steps or "
                          f"--max-time, got {train.dropout_from}")
    if train.init_layers and not train.init_from:
        raise NmtkitError("train.init_layers maps the layers of the checkpoint a run starts from: give --init-from "
                          "(or train.init_layers= for random weights)")
    if train.init_width not in ("", "prune"):
        raise NmtkitError(f"train.init_width is prune (or empty), got {train.init_width!r}")
    if train.init_width and not train.init_from:
        raise NmtkitError("train.init_width prunes the checkpoint a run starts from: give --init-from")
    check_stages(train)
    if train.compile and train.scheduled_sampling > 0:
        raise NmtkitError("train.compile does not combine with train.scheduled_sampling (the decoder unrolled step by "
                          "step would be recompiled); use one or the other")


def check_stages(train) -> None:
    """train.stages with the settings they replace, or a stage before the last that never ends. (The corpora they
    name are checked against the data directory when training starts: `nmtkit.training.mix`.)"""
    if not train.stages:
        return
    if train.max_epochs or train.pair_temperature != 1.0:
        raise NmtkitError("train.stages mix the corpora themselves: drop train.max_epochs (end a stage with "
                          "until.epochs) and train.pair_temperature (give each corpus its weight)")
    for stage in train.stages:
        for chances in stage.modifiers.values():
            check_modifier_names(list(chances), "train.stages modifiers")
    for index, stage in enumerate(train.stages, 1):
        if not math.isfinite(sum(stage.mix.values())):
            raise NmtkitError(f"train.stages: stage {index}'s mix weights sum to more than a float holds; give them on "
                              "a smaller scale (only their ratios count)")
    for index, stage in enumerate(train.stages[:-1], 1):
        if not (stage.until.updates or stage.until.epochs or stage.until.time):
            raise NmtkitError(f"train.stages: stage {index} of {len(train.stages)} has no until (updates, epochs "
                              "or time), so the stages after it would never start")
    warn_unreached_stages(train)


def warn_unreached_stages(train) -> None:
    """A warning for the first stage that the budget ends before, where the stages before it end by updates
    alone (or by time alone) and those add up to train.max_steps (train.max_time) or more: it would never start.
    (Each stage's until counts from the stage's own start.) A warning, not an error: a short trial run of a staged
    config (a smaller --max-steps) is meant to stop early."""
    for budget, name, setting, unit in ((train.max_steps, "updates", "max_steps", " updates"),
                                        (train.max_time, "time", "max_time", " s")):
        spent = 0.0
        for index, stage in enumerate(train.stages[:-1], 1):
            only = [key for key in ("updates", "epochs", "time") if getattr(stage.until, key)] == [name]
            if not (budget and only):
                break
            spent += getattr(stage.until, name)
            if spent >= budget:
                log.warning("train.stages: stage %d of %d never starts: the stages before it last %g%s, the run's "
                            "budget (train.%s) %g%s", index + 1, len(train.stages), spent, unit, setting, budget, unit)
                return
