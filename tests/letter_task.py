"""A task that tiny Transformers learn in seconds: letters a-h to the same letters in upper case (so that separate
source and target vocabularies differ). Models trained on it end their translations with EOS, as real ones do."""

from __future__ import annotations

import random
from pathlib import Path

from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.prepare import SplitFiles, prepare_data
from nmtkit.training.config import completed
from nmtkit.training.loop import Trainer

LETTERS = "abcdefgh"


def letter_lines(count: int, seed: int, longest: int = 6) -> list[str]:
    """`count` lines of 1 to `longest` letters a-h, separated by spaces."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(LETTERS, k=rng.randint(1, longest))) for _ in range(count)]


def letter_task(root: Path, joint: bool) -> Path:
    """A prepared data directory: 300 pairs whose target is the source in upper case (word vocabulary)."""
    lines = letter_lines(300, seed=0)
    splits = {}
    for name, chunk in (("train", lines[:260]), ("dev", lines[260:])):
        for side, text in (("src", chunk), ("tgt", [line.upper() for line in chunk])):
            (root / f"{name}.{side}").write_text("\n".join(text) + "\n", encoding="utf-8")
        splits[name] = SplitFiles(root / f"{name}.src", root / f"{name}.tgt")
    prepare_data(splits, root / "data", DataConfig(subword="word", vocab_size=20, joint=joint))
    return root / "data"


def train_tiny(data: Path, out: Path, steps: int = 120, **model) -> Path:
    """A Transformer trained for a few seconds: well enough that its translations end with EOS."""
    config = completed(build_config({
        "model": {"encoder_layers": 1, "decoder_layers": 2, "d_model": 32, "heads": 4, "ffn": 64, "dropout": 0.0,
                  "max_positions": 64, **model},
        # no weight decay: the model these tests were written against (test_export's coverage-penalty case found a
        # beam that nmtkit and CTranslate2 score differently with the default's 0.1)
        "train": {"max_steps": steps, "batch_tokens": 512, "lr": 5e-3, "warmup": 20, "label_smoothing": 0.0,
                  "weight_decay": 0.0, "valid_every": 10_000, "valid_bleu": False, "log_every": 1000, "threads": 1,
                  "seed": 3}}))
    out.mkdir(parents=True)
    Trainer(config, data, out).run()
    return out / "model.pt"
