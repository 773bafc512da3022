"""Fine-tuning: a run that starts from another run's weights (`train.init_from`), with a fresh optimizer and schedule
unless `train.init_optimizer` keeps them.

The checkpoint and the new run must agree on what the weights mean: the same subword vocabularies (prepare the new
data with `nmtkit prepare --subword-model CHECKPOINT`) and the same architecture. Settings that do not shape the
weights (dropout) may change; anything else is a one-line error naming the differences.
"""

from __future__ import annotations

from pathlib import Path

from nmtkit.checkpoint_file import load_checkpoint
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError

# model settings that do not change the weights' shapes
CHANGEABLE = frozenset({"dropout", "attention_dropout", "activation_dropout"})


def model_differences(saved: dict, wanted: dict) -> list[str]:
    """`key: saved -> wanted` for each architecture setting that differs (dropout may differ)."""
    keys = sorted((set(saved) | set(wanted)) - CHANGEABLE)
    return [f"{key}: {saved.get(key)!r} -> {wanted.get(key)!r}" for key in keys if saved.get(key) != wanted.get(key)]


def read_start(path: str | Path) -> dict:
    """The checkpoint a fine-tuning run starts from (read once: for its model section and its weights)."""
    return load_checkpoint(path, "start from another checkpoint, e.g. model.pt of the run")


def check_start(payload: dict, path: str | Path, subwords: tuple[Subword, Subword], model_config: dict,
                data_dir: Path) -> dict:
    """The checkpoint to start from, checked against the new run's vocabularies and architecture."""
    saved = payload["subword"]
    if (saved["src"], saved["tgt"]) != (subwords[0].proto, subwords[1].proto):
        raise NmtkitError(f"{path} was trained with other subword vocabularies than {data_dir}; prepare the new data "
                          f"with its vocabulary: nmtkit prepare --subword-model {path} ...")
    differences = model_differences(payload["config"]["model"], model_config)
    if differences:
        raise NmtkitError(f"{path} has another architecture than this run ({'; '.join(differences)}); fine-tune "
                          "with its model settings (leave the model section out of --config)")
    return payload


def saved_model_section(start: dict) -> dict:
    """The model settings of the checkpoint `start`: what a fine-tuning run without its own model section takes."""
    return dict(start["config"]["model"])
