"""nmtkit/schedule.py: the batch size and schedule a run gets from its device when the config leaves them open."""

from __future__ import annotations

import pytest

from nmtkit.config import TrainConfig
from nmtkit.schedule import CPU_SCHEDULE, GPU_SCHEDULE, resolve_schedule


@pytest.mark.parametrize("device, schedule", [("cpu", CPU_SCHEDULE), ("cuda", GPU_SCHEDULE)])
def test_bare_defaults_take_the_device_schedule(device, schedule):
    train = resolve_schedule(TrainConfig(), device)
    assert (train.batch_tokens, train.warmup, train.lr) == (schedule.batch_tokens, schedule.warmup, schedule.lr)
    assert train.amp == "auto"


def test_the_cpu_schedule_is_the_bible_recipes():
    from pathlib import Path

    import yaml

    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes/bible/transformer.yaml").read_text())
    assert (recipe["train"]["batch_tokens"], recipe["train"]["warmup"], recipe["train"]["lr"]) == \
        (CPU_SCHEDULE.batch_tokens, CPU_SCHEDULE.warmup, CPU_SCHEDULE.lr)


@pytest.mark.parametrize("max_steps, warmup", [(0, 500), (100_000, 500), (2000, 200), (300, 30), (5, 1)])
def test_warmup_is_at_most_a_tenth_of_a_step_budget(max_steps, warmup):
    assert resolve_schedule(TrainConfig(max_steps=max_steps), "cpu").warmup == warmup


def test_settings_given_are_kept():
    given = TrainConfig(batch_tokens=2048, warmup=0, lr=5e-4, max_steps=100)
    assert resolve_schedule(given, "cuda") == given
