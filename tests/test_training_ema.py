"""nmtkit/training/ema.py (`train.ema`): the moving average of the weights against a float64 computation, what
validation and the checkpoints hold, an exact resume, and the hostile settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from training_runs import copy_task, tiny_config

from nmtkit.errors import NmtkitError
from nmtkit.training.ema import WeightAverage
from nmtkit.training.loop import Trainer


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def test_the_average_follows_its_formula_in_float64_with_the_ramped_decay():
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    average = WeightAverage(model, 0.9)
    expected = None
    for step in range(1, 31):
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn_like(param))
        average.update(step)
        weights = [param.detach().double() for param in model.parameters()]
        decay = min(0.9, (1 + step) / (10 + step))
        expected = weights if expected is None else [decay * old + (1 - decay) * new
                                                     for old, new in zip(expected, weights)]
    assert [round(average.decay_at(step), 4) for step in (1, 10, 100)] == [0.1818, 0.55, 0.9]
    for mine, reference in zip(average.average, expected):
        torch.testing.assert_close(mine.double(), reference, rtol=0, atol=1e-5)


def test_the_model_holds_the_average_inside_the_block_and_its_exact_weights_after_it():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    average = WeightAverage(model, 0.5)
    with average.swapped_in():  # before any update: the weights themselves
        pass
    trained = [param.detach().clone() for param in model.parameters()]
    average.update(1)
    with torch.no_grad():
        model.weight.mul_(3.0)
    average.update(2)
    trained = [param.detach().clone() for param in model.parameters()]
    with average.swapped_in():
        assert all(torch.equal(param, mine) for param, mine in zip(model.parameters(), average.average))
        assert not torch.equal(model.weight, trained[0])
    assert all(torch.equal(param, weights) for param, weights in zip(model.parameters(), trained))
    with pytest.raises(RuntimeError), average.swapped_in():
        raise RuntimeError("validation failed")  # the weights come back on an error too
    assert all(torch.equal(param, weights) for param, weights in zip(model.parameters(), trained))


def test_model_pt_holds_the_average_and_last_pt_the_weights_and_the_average(data_dir: Path, tmp_path: Path):
    Trainer(tiny_config(max_steps=6, valid_every=3, keep_checkpoints=2, valid_bleu=False, ema=0.9), data_dir,
            tmp_path).run()
    last, best, *kept = (torch.load(tmp_path / name, weights_only=True)["model"] if name != "last.pt" else
                         torch.load(tmp_path / name, weights_only=True)
                         for name in ("last.pt", "model.pt", "checkpoint_3.pt", "checkpoint_6.pt"))
    names = [name for name, _ in Trainer(tiny_config(), data_dir, tmp_path / "x").setup.model.named_parameters()]
    average = dict(zip(names, last["train_state"]["weight_average"]["average"], strict=True))
    assert all(torch.equal(kept[1][name], tensor) for name, tensor in average.items())  # the step-6 average
    assert not all(torch.equal(last["model"][name], tensor) for name, tensor in average.items())  # not the weights
    assert not all(torch.equal(kept[0][name], tensor) for name, tensor in average.items())
    # model.pt: the validated average with the lower dev loss, one of the two kept
    assert any(all(torch.equal(best[name], checkpoint[name]) for name in names) for checkpoint in kept)


def test_a_resumed_run_ends_with_the_average_of_an_uninterrupted_one(data_dir: Path, tmp_path: Path):
    settings = {"valid_every": 4, "valid_bleu": False, "ema": 0.8, "lr_schedule": "inverse_sqrt", "warmup_share": 0.0}
    Trainer(tiny_config(max_steps=8, **settings), data_dir, tmp_path / "whole").run()
    Trainer(tiny_config(max_steps=4, **settings), data_dir, tmp_path / "parts").run()
    resumed = Trainer(tiny_config(max_steps=8, **settings), data_dir, tmp_path / "parts")
    resumed.resume()
    resumed.run()
    whole, parts = (torch.load(tmp_path / name / "last.pt", weights_only=True) for name in ("whole", "parts"))
    for mine, reference in zip(parts["train_state"]["weight_average"]["average"],
                               whole["train_state"]["weight_average"]["average"]):
        assert torch.equal(mine, reference)
    assert all(torch.equal(parts["model"][name], tensor) for name, tensor in whole["model"].items())


def test_resuming_a_run_trained_without_an_average_starts_one(data_dir: Path, tmp_path: Path):
    Trainer(tiny_config(max_steps=3, valid_bleu=False), data_dir, tmp_path).run()
    resumed = Trainer(tiny_config(max_steps=5, valid_bleu=False, ema=0.9), data_dir, tmp_path)
    resumed.resume()
    resumed.run()
    state = torch.load(tmp_path / "last.pt", weights_only=True)["train_state"]["weight_average"]
    assert state["decay"] == 0.9 and len(state["average"]) > 0


def test_without_ema_last_pt_holds_no_average(data_dir: Path, tmp_path: Path):
    Trainer(tiny_config(max_steps=2, valid_bleu=False), data_dir, tmp_path).run()
    assert "weight_average" not in torch.load(tmp_path / "last.pt", weights_only=True)["train_state"]


@pytest.mark.parametrize("value", [1.0, -0.1, 2, float("nan"), float("inf")])
def test_an_ema_decay_outside_0_to_1_is_a_one_line_error(value):
    with pytest.raises(NmtkitError, match="ema"):
        tiny_config(ema=value)
