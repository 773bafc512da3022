"""nmtkit/training/state.py: the progress, exact resume (the schedule's time and the loss scale included) and the
step checkpoints kept."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from training_runs import copy_task, records, tiny_config

from nmtkit.training.loop import Trainer
from nmtkit.training.state import Progress


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def test_linear_schedule_after_resume_goes_on_from_the_time_trained(data_dir: Path, tmp_path: Path):
    first = Trainer(tiny_config(warmup=0, lr_schedule="linear", max_time=100.0, max_steps=4, valid_bleu=False),
                    data_dir, tmp_path)
    first.run()
    resumed = Trainer(tiny_config(warmup=0, lr_schedule="linear", max_time=100.0, max_steps=8, valid_bleu=False),
                      data_dir, tmp_path)
    resumed.resume()
    resumed.progress.elapsed = 75.0  # as if 75 of the 100 seconds were spent
    resumed.updater.scheduler.step()
    assert resumed.updater.optimizer.param_groups[0]["lr"] == pytest.approx(resumed.config.train.lr * 0.25)


def test_fp16_training_keeps_its_loss_scale_across_resume(data_dir: Path, tmp_path: Path):
    summary = Trainer(tiny_config(amp="fp16", max_steps=6, valid_every=3, valid_bleu=False), data_dir, tmp_path).run()
    assert summary["precision"] == "fp16 autocast" and summary["steps"] == 6
    assert math.isfinite(records(tmp_path)[-1]["valid_nll"])
    saved = torch.load(tmp_path / "last.pt", weights_only=True)["train_state"]["scaler"]
    resumed = Trainer(tiny_config(amp="fp16", max_steps=8, valid_bleu=False), data_dir, tmp_path)
    resumed.resume()
    assert resumed.updater.scaler.get_scale() == saved["scale"] and resumed.progress.step == 6


def test_progress_restores_in_place_and_ignores_counters_it_does_not_know():
    progress = Progress(step=3, epoch=2)
    schedule_reads = progress  # the schedule and the updates hold this object
    progress.restore({"step": 7, "best": 1.5, "retired_counter": 9})
    assert schedule_reads.step == 7 and progress.best == 1.5 and progress.epoch == 0
    assert not hasattr(progress, "retired_counter")


def test_resume_restores_weights_optimizer_schedule_progress_and_random_state(data_dir: Path, tmp_path: Path):
    Trainer(tiny_config(max_steps=4, valid_bleu=False), data_dir, tmp_path).run()
    saved = torch.load(tmp_path / "last.pt", weights_only=True)
    resumed = Trainer(tiny_config(max_steps=8, valid_bleu=False), data_dir, tmp_path)
    resumed.resume()
    assert resumed.progress == Progress(**saved["train_state"]["progress"])
    assert resumed.progress.step == resumed.validator.last_validated == resumed.updater.scheduler.last_epoch == 4
    assert all(torch.equal(value, saved["model"][name]) for name, value in resumed.setup.model.state_dict().items())
    state = resumed.updater.optimizer.state_dict()["state"]
    assert all(torch.equal(state[0][key], saved["train_state"]["optimizer"]["state"][0][key]) for key in state[0])
    assert torch.equal(torch.get_rng_state(), saved["train_state"]["rng"][0]["torch"])


def test_keep_saves_the_step_checkpoint_and_deletes_all_but_the_newest(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(), data_dir, tmp_path)
    for step in (5, 10, 15, 20):
        trainer.progress.step = step
        trainer.checkpoints.keep(3)
    assert sorted(path.name for path in tmp_path.glob("*.pt")) == [f"checkpoint_{step}.pt" for step in (10, 15, 20)]
