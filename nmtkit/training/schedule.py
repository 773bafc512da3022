"""Learning-rate schedules, and the batch size and schedule a run gets by default on its device.

The defaults learn on the hardware they run on. On a CPU, an hour buys a few thousand updates: many small updates
with a short warmup beat the usual large-batch, 4,000-update warmup by a wide margin (the Bible recipe's schedule
sweep, recipes/bible/README.md; with the GPU schedule, 8 minutes on 35k English-German messages gave empty lines,
BLEU 0.0), and a learning rate that decays to zero when the budget runs out beats the inverse square root. The CPU
schedule is the Bible recipe's (tests/test_schedule.py holds them equal). On a GPU the usual Transformer schedule
(Vaswani et al. 2017, fairseq's 4,096-token batches) applies.

Two learning-rate shapes after the warmup: the inverse square root (the GPU default), and a linear decay to zero at
the end of the run's budget (`linear`; Li et al. 2020, "Budgeted training"), which knows when the run ends because
a CPU run is given its time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from nmtkit.config.sections import TrainConfig


@dataclass(frozen=True)
class DeviceSchedule:
    batch_tokens: int
    warmup: int
    lr: float
    lr_schedule: str  # when the run has a budget (max_steps or max_time); inverse_sqrt without one


CPU_SCHEDULE = DeviceSchedule(batch_tokens=512, warmup=500, lr=1e-3, lr_schedule="linear")
GPU_SCHEDULE = DeviceSchedule(batch_tokens=4096, warmup=4000, lr=7e-4, lr_schedule="inverse_sqrt")


def resolve_schedule(train: TrainConfig, device_type: str) -> TrainConfig:
    """`train` with the settings left to the device (batch_tokens 0, warmup -1, lr -1, lr_schedule auto) filled
    in: the CPU or GPU schedule, with the warmup at most train.warmup_share of max_steps (a short run still spends
    most updates after it; a time budget is shared the same way by `linear_to_budget`), and a linear decay only
    where the run has a budget to decay to."""
    schedule = GPU_SCHEDULE if device_type == "cuda" else CPU_SCHEDULE
    warmup = train.warmup
    if warmup < 0:
        capped = train.max_steps and train.warmup_share > 0
        warmup = min(schedule.warmup, max(1, int(train.max_steps * train.warmup_share))) if capped else schedule.warmup
    lr_schedule = train.lr_schedule
    if lr_schedule == "auto":
        lr_schedule = schedule.lr_schedule if train.max_steps or train.max_time else "inverse_sqrt"
    return dataclasses.replace(train, batch_tokens=train.batch_tokens or schedule.batch_tokens, warmup=warmup,
                               lr=schedule.lr if train.lr < 0 else train.lr, lr_schedule=lr_schedule)


def inverse_sqrt(warmup: int):
    """lr factor: linear warmup to 1 over `warmup` steps, then sqrt(warmup / step) (Vaswani et al. 2017, Eq. 3)."""

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup, math.sqrt(warmup / step)) if warmup > 0 else 1.0 / math.sqrt(step)

    return factor


def linear_to_budget(warmup: int, max_steps: int, max_time: float, warmup_share: float = 0.0,
                     cooldown: float = 1.0):
    """lr factor of (step, seconds trained): a linear warmup, times a linear decay from 1 to 0 over the last
    `cooldown` of the budget (1: the whole budget, `linear`; less: warmup-stable-decay, `wsd`, Hu et al. 2024), the
    fraction `spent` of max_steps or max_time, whichever is further (0 = no such budget). The warmup ends after
    `warmup` steps or once `warmup_share` of the budget is spent, whichever comes first (0: steps only), so that a
    budget of few updates is not mostly warmup: min(max(step / warmup, spent / warmup_share), 1) *
    min(1, (1 - spent) / cooldown). At least one budget must be set."""
    if max_steps <= 0 and max_time <= 0:
        raise ValueError("a linear decay to the end of the budget needs max_steps or max_time")

    def factor(step: int, elapsed: float) -> float:
        spent = budget_spent(step, elapsed, max_steps, max_time)
        ramp = max(max(step, 1) / warmup, spent / warmup_share if warmup_share > 0 else 0.0) if warmup > 0 else 1.0
        return min(ramp, 1.0) * min(1.0, max(0.0, 1.0 - spent) / cooldown)

    return factor


def budget_spent(step: int, elapsed: float, max_steps: int, max_time: float) -> float:
    """The fraction of the run's budget spent: of max_steps or of max_time (seconds), whichever is further
    (0 = no such budget)."""
    return max(step / max_steps if max_steps > 0 else 0.0, elapsed / max_time if max_time > 0 else 0.0)
