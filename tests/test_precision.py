"""nmtkit/runtime/precision.py and train.amp=auto: the precision is chosen by timing the model, never by CPU
flags alone."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from training_runs import copy_task, tiny_config

import nmtkit.training.amp as training_amp
from nmtkit.runtime.precision import MARGIN, auto_candidates, fastest, time_precisions
from nmtkit.training.loop import Trainer, train

BF16, FP32 = torch.bfloat16, None


@pytest.mark.parametrize("timings, chosen", [
    ({FP32: 1.0, BF16: 0.5}, BF16),
    ({FP32: 1.0, BF16: MARGIN}, BF16),
    ({FP32: 1.0, BF16: 0.97}, FP32),  # within the noise: float32
    ({FP32: 1.0, BF16: 1.7}, FP32),  # emulated, or slow kernels on an Intel Xeon without AMX
    ({FP32: 1.0}, FP32),
    ({FP32: 1.0, BF16: 0.8, torch.float16: 0.6}, torch.float16),
])
def test_fastest_keeps_float32_unless_a_reduced_precision_is_clearly_faster(timings, chosen):
    assert fastest(timings) is chosen


def test_time_precisions_warms_up_then_takes_turns_and_keeps_the_fastest_round(monkeypatch):
    calls, cost = [], {FP32: [0.0, 0.3, 0.2], BF16: [0.0, 0.1, 0.4]}  # seconds of each call, warm-up first
    clock = [0.0]

    def run(dtype):
        calls.append(dtype)
        clock[0] += cost[dtype][sum(1 for call in calls if call is dtype) - 1]

    monkeypatch.setattr("nmtkit.runtime.precision.time.perf_counter", lambda: clock[0])
    timings = time_precisions(run, [FP32, BF16], torch.device("cpu"))
    assert calls == [FP32, BF16, FP32, BF16, FP32, BF16]
    assert timings == pytest.approx({FP32: 0.2, BF16: 0.1})


def test_a_device_without_bf16_kernels_is_not_measured(monkeypatch):
    monkeypatch.setattr("nmtkit.runtime.precision.native_bf16", lambda device: False)
    assert auto_candidates(torch.device("cpu")) == [FP32]
    monkeypatch.setattr("nmtkit.runtime.precision.native_bf16", lambda device: True)
    assert auto_candidates(torch.device("cpu")) == [FP32, BF16]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def auto_config(amp: str = "auto", **train_settings):
    return tiny_config(**{"amp": amp, "max_steps": 10, "valid_every": 10, "valid_bleu": False, **train_settings})


def losses(run: Path) -> list[float]:
    return [json.loads(line)["train_loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
            if "train_loss" in json.loads(line)]


@pytest.mark.parametrize("measured, expected", [({FP32: 1.0, BF16: 0.5}, "bf16 autocast"),
                                                ({FP32: 1.0, BF16: 1.5}, "float32")])
def test_amp_auto_takes_what_it_measured_and_logs_it(data_dir, tmp_path, monkeypatch, caplog, measured, expected):
    monkeypatch.setattr("nmtkit.training.amp.auto_candidates", lambda device: [FP32, BF16])
    seen = []

    def fake_timings(run, candidates, device):
        run(FP32), run(BF16)  # the trial steps themselves must run in both precisions
        seen.extend(candidates)
        return measured

    monkeypatch.setattr(training_amp, "time_precisions", fake_timings)
    with caplog.at_level(logging.INFO, logger="nmtkit"):
        summary = train(auto_config(), data_dir, tmp_path / "run")
    assert summary["precision"] == expected and seen == [FP32, BF16]
    assert "train.amp=auto" in caplog.text and "float32 1000 ms" in caplog.text


def test_measuring_does_not_change_the_run_and_resume_keeps_the_choice(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("nmtkit.training.amp.auto_candidates", lambda device: [FP32, BF16])
    measured = {FP32: 1.0, BF16: 2.0}  # float32 wins: the run must equal amp=none exactly, measurement and all
    monkeypatch.setattr(training_amp, "time_precisions",
                        lambda run, candidates, device: (run(FP32), run(BF16), measured)[-1])
    train(auto_config(), data_dir, tmp_path / "auto")
    train(auto_config("none"), data_dir, tmp_path / "none")
    assert losses(tmp_path / "auto") == losses(tmp_path / "none")

    def must_not_measure(*args):
        raise AssertionError("a resumed run measured again")

    monkeypatch.setattr(training_amp, "time_precisions", must_not_measure)
    summary = train(auto_config(max_steps=15), data_dir, tmp_path / "auto", resume=True)
    assert summary["steps"] == 15 and summary["precision"] == "float32"


def test_amp_auto_really_times_both_precisions(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("nmtkit.training.amp.auto_candidates", lambda device: [FP32, BF16])
    trainer = Trainer(auto_config(), data_dir, tmp_path)
    trainer.settle_precision()
    assert trainer.progress.precision in ("float32", "bfloat16")
    assert trainer.updater.precision is (BF16 if trainer.progress.precision == "bfloat16" else None)
