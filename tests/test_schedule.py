"""nmtkit/training/schedule.py: the learning-rate shapes, and the batch size and schedule a run gets from its device
when the config leaves them open."""

from __future__ import annotations

import dataclasses
import math

import pytest

from nmtkit.config.sections import TrainConfig
from nmtkit.training.schedule import (
    CPU_SCHEDULE,
    GPU_SCHEDULE,
    budget_spent,
    inverse_sqrt,
    linear_to_budget,
    resolve_schedule,
)


@pytest.mark.parametrize("device, schedule", [("cpu", CPU_SCHEDULE), ("cuda", GPU_SCHEDULE)])
def test_bare_defaults_take_the_device_schedule(device, schedule):
    train = resolve_schedule(TrainConfig(max_time=600.0), device)
    assert (train.batch_tokens, train.warmup, train.lr, train.lr_schedule) == \
        (schedule.batch_tokens, schedule.warmup, schedule.lr, schedule.lr_schedule)
    assert train.amp == "auto"


@pytest.mark.parametrize("budget", [{"max_time": 600.0}, {"max_steps": 5000}, {}])
def test_the_cpu_decays_linearly_to_a_budget_only(budget):
    """A CPU run given a budget decays to zero at its end; one without (until max_epochs or by hand) cannot."""
    expected = "linear" if budget else "inverse_sqrt"
    assert resolve_schedule(TrainConfig(**budget), "cpu").lr_schedule == expected
    assert resolve_schedule(TrainConfig(**budget), "cuda").lr_schedule == "inverse_sqrt"
    assert resolve_schedule(TrainConfig(lr_schedule="inverse_sqrt", **budget), "cpu").lr_schedule == "inverse_sqrt"


def test_the_cpu_schedule_is_the_bible_recipes():
    from pathlib import Path

    import yaml

    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes/bible/transformer.yaml").read_text())
    train = recipe["train"]
    assert (train["batch_tokens"], train["warmup"], train["lr"], train["lr_schedule"]) == \
        (CPU_SCHEDULE.batch_tokens, CPU_SCHEDULE.warmup, CPU_SCHEDULE.lr, CPU_SCHEDULE.lr_schedule)


def test_the_bare_defaults_train_the_bible_recipes_model_with_its_weight_decay():
    """What the recipe learnt (GELU, no feed-forward dropout, weight decay 0.1) is what a bare `nmtkit train` gets."""
    from pathlib import Path

    import yaml

    from nmtkit.models.transformer import TransformerConfig

    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes/bible/transformer.yaml").read_text())
    model, bare = recipe["model"], TransformerConfig()
    assert {key: getattr(bare, key) for key in model} == model
    assert TrainConfig().weight_decay == recipe["train"]["weight_decay"]


@pytest.mark.parametrize("max_steps, warmup", [(0, 500), (100_000, 500), (2000, 200), (300, 30), (5, 1)])
def test_warmup_is_at_most_a_tenth_of_a_step_budget(max_steps, warmup):
    assert resolve_schedule(TrainConfig(max_steps=max_steps), "cpu").warmup == warmup


def test_warmup_share_sets_the_step_budgets_cap_and_zero_leaves_the_devices_warmup():
    assert resolve_schedule(TrainConfig(max_steps=2000, warmup_share=0.05), "cpu").warmup == 100
    assert resolve_schedule(TrainConfig(max_steps=2000, warmup_share=0.0), "cpu").warmup == 500


def test_a_short_time_budget_ends_the_warmup_at_its_share_of_the_time():
    """8 minutes that buy ~800 updates: the 500-step warmup ends after 48 s (a tenth), not after 500 updates."""
    factor = linear_to_budget(warmup=500, max_steps=0, max_time=480.0, warmup_share=0.1)
    assert factor(10, 24.0) == pytest.approx(0.5 * (1 - 0.05))  # half of the warmup's time: half the lr
    assert factor(80, 48.0) == pytest.approx(1 - 0.1)  # 80 updates in, the warmup is over
    assert factor(80, 48.0) > linear_to_budget(warmup=500, max_steps=0, max_time=480.0)(80, 48.0)
    ramp = [factor(step, step * 0.6) for step in range(1, 81)]
    assert all(later > earlier for earlier, later in zip(ramp, ramp[1:]))  # rising through the warmup


def test_a_long_budget_keeps_the_step_warmup():
    """The Bible recipe's hour (thousands of updates): the 500 warmup steps end before a tenth of the time does, so
    the share changes nothing."""
    shared = linear_to_budget(warmup=500, max_steps=0, max_time=3240.0, warmup_share=0.1)
    steps_only = linear_to_budget(warmup=500, max_steps=0, max_time=3240.0)
    for step, elapsed in ((1, 0.2), (100, 30.0), (250, 80.0), (500, 160.0), (5000, 1700.0)):
        assert shared(step, elapsed) == pytest.approx(steps_only(step, elapsed))


def test_warmup_share_of_a_step_budget_matches_the_capped_warmup():
    """With max_steps alone the share is the resolved warmup's cap: the same factor at every step."""
    shared = linear_to_budget(warmup=500, max_steps=300, max_time=0.0, warmup_share=0.1)
    capped = linear_to_budget(warmup=30, max_steps=300, max_time=0.0)
    for step in range(1, 301):
        assert shared(step, 0.0) == pytest.approx(capped(step, 0.0))


def test_settings_given_are_kept():
    given = TrainConfig(batch_tokens=2048, warmup=0, lr=5e-4, max_steps=100, lr_schedule="linear")
    assert resolve_schedule(given, "cuda") == given
    assert resolve_schedule(dataclasses.replace(given, lr_schedule="inverse_sqrt"), "cpu").lr_schedule == "inverse_sqrt"


def test_linear_decay_reaches_zero_at_the_end_of_a_step_budget():
    factor = linear_to_budget(warmup=10, max_steps=110, max_time=0)
    assert factor(5, 0.0) == pytest.approx(0.5 * (1 - 5 / 110))  # warmup, already decaying: no jump at its end
    assert factor(10, 0.0) == pytest.approx(1 - 10 / 110)
    assert factor(60, 0.0) == pytest.approx(0.5 / 1.1)
    assert factor(110, 0.0) == 0.0 and factor(200, 0.0) == 0.0
    steps = [factor(step, 0.0) for step in range(10, 111)]
    assert all(later < earlier for earlier, later in zip(steps, steps[1:]))


def test_linear_decay_follows_the_time_spent_or_the_steps_whichever_is_further():
    factor = linear_to_budget(warmup=0, max_steps=0, max_time=600.0)
    assert factor(1000, 150.0) == pytest.approx(0.75)
    assert factor(1000, 600.0) == 0.0
    both = linear_to_budget(warmup=0, max_steps=100, max_time=600.0)
    assert both(50, 60.0) == pytest.approx(0.5)  # half the steps, a tenth of the time
    assert both(10, 450.0) == pytest.approx(0.25)  # a tenth of the steps, three quarters of the time


def test_linear_decay_needs_a_budget():
    with pytest.raises(ValueError, match="max_steps or max_time"):
        linear_to_budget(warmup=10, max_steps=0, max_time=0)


def test_wsd_holds_the_peak_then_decays_linearly_to_zero_over_the_cooldown():
    factor = linear_to_budget(warmup=10, max_steps=100, max_time=0, cooldown=0.2)
    assert factor(5, 0.0) == pytest.approx(0.5)  # warmup
    assert [factor(step, 0.0) for step in (10, 50, 79)] == [1.0, 1.0, 1.0]  # stable
    assert factor(80, 0.0) == pytest.approx(1.0)  # the cool-down starts
    assert factor(90, 0.0) == pytest.approx(0.5) and factor(100, 0.0) == 0.0 and factor(150, 0.0) == 0.0
    by_time = linear_to_budget(warmup=0, max_steps=0, max_time=1000.0, cooldown=0.1)
    assert by_time(7, 850.0) == 1.0 and by_time(7, 950.0) == pytest.approx(0.5)
    whole = linear_to_budget(warmup=0, max_steps=100, max_time=0, cooldown=1.0)  # the linear schedule itself
    assert whole(25, 0.0) == pytest.approx(linear_to_budget(warmup=0, max_steps=100, max_time=0)(25, 0.0))


@pytest.mark.parametrize("cooldown", [0.0, -0.5, 1.5])
def test_a_wsd_cooldown_outside_0_to_1_is_a_one_line_error(cooldown):
    from training_runs import tiny_config

    from nmtkit.errors import NmtkitError
    with pytest.raises(NmtkitError, match="cooldown"):
        tiny_config(lr_schedule="wsd", cooldown=cooldown, max_steps=10)


def test_wsd_needs_a_budget():
    from training_runs import tiny_config

    from nmtkit.errors import NmtkitError
    with pytest.raises(NmtkitError, match="lr_schedule=wsd decays to zero"):
        tiny_config(lr_schedule="wsd")


def test_the_budget_spent_is_the_further_of_the_steps_and_the_time():
    assert budget_spent(step=25, elapsed=0.0, max_steps=100, max_time=0) == 0.25
    assert budget_spent(step=25, elapsed=300.0, max_steps=0, max_time=600.0) == 0.5
    assert budget_spent(step=25, elapsed=60.0, max_steps=100, max_time=600.0) == 0.25
    assert budget_spent(step=90, elapsed=0.0, max_steps=0, max_time=0) == 0.0


def test_inverse_sqrt_schedule():
    factor = inverse_sqrt(100)
    assert factor(1) == pytest.approx(0.01)
    assert factor(50) == pytest.approx(0.5)
    assert factor(100) == pytest.approx(1.0)
    assert factor(400) == pytest.approx(0.5)
    assert factor(10_000) == pytest.approx(math.sqrt(100 / 10_000))
