"""An exponential moving average of the weights (`train.ema`: Polyak averaging as fairseq's `--ema-decay` and
Marian's `--exponential-smoothing` keep it): after each update, average <- decay * average + (1 - decay) * weights,
with the decay ramped up as min(decay, (1 + step) / (10 + step)) so that the first updates' random weights fade
quickly. Validation, model.pt and the kept checkpoints hold the average; last.pt holds the trained weights and the
average, so that a resumed run continues both."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch

log = logging.getLogger(__package__)


class WeightAverage:
    """The average of a model's parameters (float32, on the model's device), updated in one fused call."""

    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay = decay
        self.params = list(model.parameters())
        # made at the first update from the weights then (after a resume or --init-from has loaded them)
        self.average: list[torch.Tensor] | None = None

    def decay_at(self, step: int) -> float:
        """The decay after update `step` (1-based): the configured one, ramped up (2/11 after the first update)."""
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average towards the weights of update `step`."""
        weights = [param.detach().float() for param in self.params]
        if self.average is None:
            self.average = [tensor.clone() for tensor in weights]
        else:
            torch._foreach_lerp_(self.average, weights, 1.0 - self.decay_at(step))

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model holds the average inside the block and its trained weights again after it."""
        if self.average is None:  # no update yet: the average is the weights
            yield
            return
        with torch.no_grad():
            trained = [param.detach().clone() for param in self.params]
            for param, average in zip(self.params, self.average):
                param.copy_(average)
        try:
            yield
        finally:
            with torch.no_grad():
                for param, weights in zip(self.params, trained):
                    param.copy_(weights)

    def state_dict(self) -> dict:
        return {"decay": self.decay,
                "average": None if self.average is None else [tensor.cpu() for tensor in self.average]}

    def load_state_dict(self, state: dict | None) -> None:
        """The average a checkpoint kept; a checkpoint without one (trained without train.ema) starts it from the
        weights at the next update."""
        if state is None or state.get("average") is None:
            if state is None:
                log.warning("last.pt holds no weight average (trained without train.ema): it starts now")
            self.average = None
            return
        saved = state["average"]
        if len(saved) != len(self.params) or any(tensor.shape != param.shape
                                                 for tensor, param in zip(saved, self.params)):
            raise ValueError("the weight average in last.pt does not fit this model")
        self.average = [tensor.to(device=param.device, dtype=torch.float32).clone()
                        for tensor, param in zip(saved, self.params)]


def weight_average(model: torch.nn.Module, decay: float) -> WeightAverage | None:
    """The run's weight average (None with train.ema = 0)."""
    return WeightAverage(model, decay) if decay > 0 else None
