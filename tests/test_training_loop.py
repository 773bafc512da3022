"""nmtkit/training/loop.py: the loop's budgets, patience, logging and validation points, and the schedule it steps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from training_runs import copy_task, records, tiny_config

from nmtkit.config.sections import TrainConfig
from nmtkit.errors import NmtkitError
from nmtkit.runtime.distributed import World
from nmtkit.training.loop import Trainer, TrainingClock, budget_left, new_window, training_record
from nmtkit.training.mix import BatchOrder
from nmtkit.training.state import Progress


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def test_patience_stops_training_without_improvement(data_dir: Path, tmp_path: Path):
    config = tiny_config(lr=0.0, valid_every=2, patience=2, best_metric="loss", valid_bleu=False, max_steps=100)
    summary = Trainer(config, data_dir, tmp_path).run()
    assert summary["stopped_early"] and summary["steps"] == 6  # the first validation sets best, two more fail
    assert [r["step"] for r in records(tmp_path) if "valid_nll" in r] == [2, 4, 6]


def test_training_reduces_dev_loss_and_writes_checkpoints(data_dir: Path, tmp_path: Path):
    config = tiny_config(lr=3e-3, valid_every=20, max_steps=40, valid_bleu=True)
    summary = Trainer(config, data_dir, tmp_path).run()
    validations = [r for r in records(tmp_path) if "valid_nll" in r]
    assert summary["steps"] == 40 and len(validations) == 2
    assert validations[1]["valid_nll"] < validations[0]["valid_nll"]
    assert "valid_bleu" in validations[0]
    assert (tmp_path / "model.pt").exists() and (tmp_path / "last.pt").exists()
    assert [r["step"] for r in records(tmp_path) if "train_loss" in r] == [5, 10, 15, 20, 25, 30, 35, 40]


def test_max_time_budget(data_dir: Path, tmp_path: Path):
    summary = Trainer(tiny_config(max_time=1e-9, valid_bleu=False), data_dir, tmp_path).run()
    assert summary["steps"] == 1  # the budget is checked before each update


def test_linear_schedule_decays_the_lr_to_zero_at_the_step_budget(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(lr=1e-3, warmup=5, lr_schedule="linear", max_steps=20, valid_bleu=False),
                      data_dir, tmp_path)
    trainer.run()
    rates = [r["lr"] for r in records(tmp_path) if "lr" in r]
    assert [round(rate, 6) for rate in rates] == [round(1e-3 * (1 - step / 20), 6) for step in (5, 10, 15, 20)]
    assert trainer.updater.optimizer.param_groups[0]["lr"] == 0.0


def test_linear_schedule_without_a_budget_is_an_error(data_dir: Path, tmp_path: Path):
    with pytest.raises(NmtkitError, match="--max-steps or --max-time"):
        Trainer(tiny_config(lr_schedule="linear"), data_dir, tmp_path)


def test_a_budget_is_spent_at_its_step_or_second_and_no_budget_never():
    budgets = TrainConfig(max_steps=3, max_time=10.0)
    assert budget_left(budgets, Progress(step=2, elapsed=9.9))
    assert not budget_left(budgets, Progress(step=3))
    assert not budget_left(budgets, Progress(step=1, elapsed=10.0))
    assert budget_left(TrainConfig(), Progress(step=10**9, elapsed=1e9))


def test_the_training_clock_counts_from_the_saved_time_and_takes_the_agreed_count(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr("nmtkit.training.loop.time.monotonic", lambda: now[0])
    progress = Progress(elapsed=50.0)  # as resumed from last.pt
    clock = TrainingClock(progress)
    assert clock.last == 50.0  # the first vote: the saved count
    clock.agree(50.0)
    now[0] += 3.0
    clock.read()
    assert clock.last == 53.0 and progress.elapsed == 50.0  # read at the end of an update; agreed at the next vote
    now[0] += 0.5
    clock.agree(54.0)  # rank 0's reading (its clock ran a second ahead): this process takes it
    now[0] += 2.0
    clock.read()
    assert progress.elapsed == 54.0 and clock.last == 56.5  # 54 at its own reading (t=1003), 2.5 s since


class FivePairs:
    """Stands in for the training data of one language pair: five pairs, one a batch, in their own order."""

    kept, corpus = np.arange(5), None

    def batches_of(self, lines: np.ndarray, max_tokens: int, rng: np.random.Generator) -> list[list[int]]:
        return [[int(line)] for line in lines]

    def batch(self, indices: list[int]) -> list[int]:
        return indices


def test_each_process_takes_its_share_of_an_update_and_a_process_left_without_one_joins_with_weight_0():
    progress = Progress()
    orders = [BatchOrder(FivePairs(), TrainConfig(update_freq=2, max_epochs=2), World(rank, rank, 2), progress)
              for rank in (0, 1)]
    group = orders[0].next_group()
    assert group == [[0], [1], [2], [3]]
    assert [order.local_batches(group) for order in orders] == [([[0], [1]], 1.0), ([[2], [3]], 1.0)]
    orders[0].advance(group)
    group = orders[0].next_group()
    assert group == [[4]] and orders[1].local_batches(group) == ([[4]], 0.0)  # the epoch's last batch: rank 0's
    orders[0].advance(group)
    assert orders[0].next_group()[0] == [0] and progress.epoch == 1 and progress.batch_in_epoch == 0
    progress.epoch = 2
    assert orders[0].next_group() is None  # train.max_epochs done


def test_a_training_record_holds_the_means_of_its_window():
    window = {"loss": 6.0, "nll": 3.0, "grad_norm": 1.5, "tokens": 400, "updates": 3, "seconds": 2.0}
    record = training_record(Progress(step=9, epoch=1, elapsed=12.34), window, 1e-3)
    assert record == {"step": 9, "epoch": 1, "train_loss": 2.0, "train_nll": 1.0, "grad_norm": 0.5, "lr": 1e-3,
                      "tgt_tokens": 400, "tgt_tokens_per_s": 200.0, "elapsed": 12.3}
    assert new_window() == {"loss": 0.0, "nll": 0.0, "grad_norm": 0.0, "tokens": 0, "updates": 0, "seconds": 0.0}
