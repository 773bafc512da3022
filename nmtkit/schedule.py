"""Learning-rate schedules."""

from __future__ import annotations

import math


def inverse_sqrt(warmup: int):
    """lr factor: linear warmup to 1 over `warmup` steps, then sqrt(warmup / step) (Vaswani et al. 2017, Eq. 3)."""

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup, math.sqrt(warmup / step)) if warmup > 0 else 1.0 / math.sqrt(step)

    return factor
