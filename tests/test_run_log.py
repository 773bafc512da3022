"""nmtkit/training/run_log.py: metrics.jsonl and TensorBoard event files that TensorBoard's own reader reads."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from training_runs import copy_task

from nmtkit.config.run import build_config
from nmtkit.training.config import completed
from nmtkit.training.loop import train
from nmtkit.training.run_log import RunLog, scalars


def read_events(run: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_scalars_take_the_known_keys_only():
    record = {"step": 3, "epoch": 0, "train_loss": 2.5, "lr": 1e-3, "valid_bleu": 12.0, "elapsed": 7.0}
    assert scalars(record) == {"train/loss": 2.5, "train/lr": 1e-3, "valid/bleu": 12.0}


def test_records_go_to_jsonl_and_tensorboard_and_a_resumed_run_purges_the_redone_steps(tmp_path: Path):
    log = RunLog(tmp_path)
    for step in (5, 10, 15):
        log.write({"step": step, "train_loss": float(step)})
    log.close()
    time.sleep(1.1)  # event files are read in name order, and their names start with the second they were opened
    resumed = RunLog(tmp_path, first_step=10)  # last.pt was at step 10: steps 10 and 15 are redone
    for step in (10, 15):
        resumed.write({"step": step, "train_loss": step + 0.5})
    resumed.close()
    assert read_events(tmp_path)["train/loss"] == [(5, 5.0), (10, 10.5), (15, 15.5)]
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == \
        [5, 10, 15, 10, 15]  # metrics.jsonl is truncated by the trainer on resume (checkpoint.truncate_metrics)


def test_a_training_run_writes_tensorboard_events(tmp_path: Path):
    data = copy_task(tmp_path)
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32},
                           "train": {"batch_tokens": 256, "warmup": 10, "log_every": 5, "threads": 1,
                                     "max_steps": 10, "valid_every": 10}})
    train(completed(config), data, tmp_path / "run")
    events = read_events(tmp_path / "run")
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tgt_tokens_per_s", "valid/nll", "valid/bleu",
            "valid/chrf"} <= set(events)
    assert [step for step, _ in events["train/loss"]] == [5, 10]
