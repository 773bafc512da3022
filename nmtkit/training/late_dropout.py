"""Late dropout (Liu et al. 2023, "Dropout reduces underfitting"): a model's dropout off until a fraction of the
run's budget is spent, then at the model's own rates (`train.dropout_from`). For the Bible recipe, 0.25 gave test
BLEU 28.73 against 28.96 with dropout from the start (recipes/bible/README.md): an option, not the default."""

from __future__ import annotations

from torch import nn

from nmtkit.config.sections import TrainConfig
from nmtkit.modules.attention import MultiHeadAttention
from nmtkit.modules.dropout import Dropout
from nmtkit.training.schedule import budget_spent


class LateDropout:
    """Switches every dropout of a model (Dropout modules' p, attention's dropout) between 0 and its own rate."""

    def __init__(self, model: nn.Module, train: TrainConfig):
        self.start, self.max_steps, self.max_time = train.dropout_from, train.max_steps, train.max_time
        self.on = True
        self.rates: list[tuple[nn.Module, str, float]] = []  # (module, attribute, the model's own rate)
        for module in model.modules():
            if isinstance(module, (Dropout, nn.Dropout)):
                self.rates.append((module, "p", module.p))
            elif isinstance(module, MultiHeadAttention):
                self.rates.append((module, "dropout", module.dropout))

    def follow(self, step: int, elapsed: float) -> bool:
        """Dropout on when the fraction of the budget spent after `step` updates and `elapsed` seconds has reached
        `start` (always, with start 0); returns True when this call switched it on. Read before each update, so
        that a resumed run switches at the same point."""
        on = self.start <= 0 or budget_spent(step, elapsed, self.max_steps, self.max_time) >= self.start
        if on == self.on:
            return False
        for module, attribute, rate in self.rates:
            setattr(module, attribute, rate if on else 0.0)
        self.on = on
        return on
