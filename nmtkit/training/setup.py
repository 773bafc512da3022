"""What a run trains with: its complete config, its directories, its place among the processes, the data (subword
models, languages, the train and dev splits without the pairs too long to train on) and the model on its device."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from nmtkit.config.sections import Config
from nmtkit.data.dataset import ParallelData
from nmtkit.data.multilingual import language_pairs
from nmtkit.data.prepare import load_subwords, read_manifest
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError
from nmtkit.metrics.tokenize import default_tokenizer
from nmtkit.models.transformer import TransformerConfig
from nmtkit.modules.checkpointing import checkpoint_activations
from nmtkit.registry import build_model
from nmtkit.runtime.distributed import World
from nmtkit.training.config import open_settings

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split


@dataclass
class RunSetup:
    """The parts of one run that training reads and never replaces (in each process under torchrun)."""

    config: Config
    data_dir: Path
    out_dir: Path
    world: World
    subwords: tuple[Subword, Subword]
    langs: tuple[str | None, str | None]
    tags: dict[str, int]  # a multilingual model's target languages and their tag ids
    pairs: list[tuple[str, str]]  # multilingual data's language pairs; empty for one pair
    model: nn.Module
    train_data: ParallelData
    dev_data: ParallelData | None
    placeholders: dict | None = None  # the data's placeholder masking (the manifest's record), kept in checkpoints

    @property
    def device(self) -> torch.device:
        return self.world.device

    @property
    def bleu_tokenizer(self) -> str:
        return "per target language" if self.pairs else default_tokenizer(self.langs[1])


def set_up(config: Config, data_dir: Path, out_dir: Path, world: World) -> RunSetup:
    """Seed, read the data directory, build the model and load the splits, in this order (the model's initial
    weights come from train.seed)."""
    left_open = open_settings(config.train)
    if left_open:
        raise NmtkitError(f"the config leaves {', '.join(left_open)} to the device; complete it first "
                          "(nmtkit.training.config.completed)")
    torch.manual_seed(config.train.seed)
    manifest = read_manifest(data_dir)
    check_language_tags(config, manifest, data_dir)
    subwords = load_subwords(data_dir)
    model = build_training_model(config, subwords, world.device)
    train_data = load_split(config, model, data_dir, "train", world.is_main)
    dev_data = load_split(config, model, data_dir, "dev", world.is_main) if "dev" in manifest["splits"] else None
    return RunSetup(config, data_dir, out_dir, world, subwords, (manifest.get("src_lang"), manifest.get("tgt_lang")),
                    manifest.get("tags", {}), language_pairs(manifest), model, train_data, dev_data,
                    manifest.get("placeholders"))


def check_language_tags(config: Config, manifest: dict, data_dir: Path) -> None:
    """A model that reads each source's first token as its target-language tag (an imported M2M100 or NLLB:
    model.language_tags=decoder) needs data whose sources start with one."""
    if isinstance(config.model, TransformerConfig) and config.model.language_tags == "decoder" \
            and not manifest.get("tags"):
        raise NmtkitError(f"{data_dir} has no target-language tags, and this model reads one at the start of each "
                          "source (an imported M2M100/NLLB model): prepare the data with --corpora naming each "
                          "corpus' src_lang and tgt_lang, and --subword-model of the model")


def build_training_model(config: Config, subwords: tuple[Subword, Subword], device: torch.device) -> nn.Module:
    shared = subwords[0] is subwords[1]
    model = build_model(config.model, subwords[0].vocab_size, subwords[1].vocab_size, shared)
    if config.train.activation_checkpointing:
        layers = model.checkpoint_layers()
        if not layers:
            raise NmtkitError(f"model {config.model.name} does not support train.activation_checkpointing "
                              "(transformer and convs2s do)")
        checkpoint_activations(layers)
    return model.to(device)


def load_split(config: Config, model: nn.Module, data_dir: Path, split: str, warn: bool) -> ParallelData:
    """A split without the pairs too long for train.max_length or the model."""
    limit = min(config.train.max_length, model.max_length() or config.train.max_length)
    data = ParallelData(data_dir, split, limit)
    if not len(data.src):
        raise NmtkitError(f"the {split} split of {data_dir} has no pairs; prepare it from non-empty files")
    if not len(data):
        raise NmtkitError(f"every {split} pair of {data_dir} is longer than {limit} positions; "
                          "raise train.max_length (and the model's max_positions) or prepare shorter data")
    if data.left_out and warn:
        log.warning("%s: left out %d of %d pairs longer than %d positions (train.max_length or the model's "
                    "max_positions)", split, data.left_out, len(data.src), limit)
    return data
