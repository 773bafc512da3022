"""Training fixtures: a tiny copy task and a tiny model's complete config, reading a run's metrics, and reading a
run directory while `nmtkit train` runs in another process (for the resume and signal tests)."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

from nmtkit.config.run import build_config
from nmtkit.config.sections import Config, DataConfig
from nmtkit.data.prepare import SplitFiles, prepare_data
from nmtkit.training.config import completed

TINY_MODEL = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32}


def copy_task(root: Path) -> Path:
    """A prepared data directory of 260 training and 40 dev pairs whose target copies the source (word vocabulary
    of 8 letters)."""
    rng = random.Random(0)
    lines = [" ".join(rng.choices("abcdefgh", k=rng.randint(2, 6))) for _ in range(300)]
    for name, chunk in (("train", lines[:260]), ("dev", lines[260:])):
        for side in ("src", "tgt"):
            (root / f"{name}.{side}").write_text("\n".join(chunk) + "\n", encoding="utf-8")
    splits = {name: SplitFiles(root / f"{name}.src", root / f"{name}.tgt") for name in ("train", "dev")}
    prepare_data(splits, root / "data", DataConfig(subword="word", vocab_size=20))
    return root / "data"


def tiny_config(**train) -> Config:
    """The complete config of a one-layer Transformer on the CPU (one thread, float32), with `train` settings."""
    return completed(build_config({"model": TINY_MODEL, "train": {
        "batch_tokens": 256, "warmup": 10, "log_every": 5, "threads": 1, "amp": "none", "device": "cpu", **train}}))


def records(run_dir: Path) -> list[dict]:
    """The run's metrics.jsonl records."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train_losses(run_dir: Path) -> dict[int, float]:
    """Step -> training loss of every logged update in the run's metrics.jsonl."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {record["step"]: record["train_loss"] for record in records if "train_loss" in record}


def wait_for_step(run_dir: Path, step: int, process: subprocess.Popen) -> None:
    """Wait until training has logged `step` (its metrics.jsonl may end in a line being written)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if max(train_losses(run_dir), default=0) >= step:
                return
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"training did not reach step {step} (exit status {process.poll()})")
