"""One update: AdamW with its learning-rate schedule, mixed precision (autocast, and fp16's gradient scaler), gradient
accumulation over a process's batches, clipping, skipped non-finite updates and out-of-memory batches split in two."""

from __future__ import annotations

import logging
import math
from contextlib import nullcontext

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from nmtkit.config.sections import TrainConfig
from nmtkit.data.dataset import Batch
from nmtkit.errors import NmtkitError
from nmtkit.training.late_dropout import LateDropout
from nmtkit.training.objectives import TrainingForward, label_smoothed_nll
from nmtkit.training.schedule import inverse_sqrt, linear_to_budget
from nmtkit.training.setup import RunSetup
from nmtkit.training.state import Progress

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split
FUSED_ADAM_DEVICES = ("cpu", "cuda")


def lr_factor(train: TrainConfig, progress: Progress):
    """The schedule as LambdaLR's function of the step; the linear decay also reads the seconds trained so far
    (`progress`, restored on resume)."""
    if train.lr_schedule in ("linear", "wsd"):
        cooldown = train.cooldown if train.lr_schedule == "wsd" else 1.0
        factor = linear_to_budget(train.warmup, train.max_steps, train.max_time, train.warmup_share, cooldown)
        return lambda step: factor(step, progress.elapsed)
    return inverse_sqrt(train.warmup)


def distribute(forward: TrainingForward, setup: RunSetup) -> nn.Module:
    if not setup.world.distributed:
        return forward
    device_ids = [setup.device.index] if setup.device.type == "cuda" else None
    return DistributedDataParallel(forward, device_ids=device_ids)


class Updater:
    """Performs the updates of one run: owns the optimizer, the schedule, the loss scaler and the training forward
    pass (wrapped by DDP and torch.compile when asked)."""

    def __init__(self, setup: RunSetup, progress: Progress, precision: torch.dtype | None):
        self.setup, self.progress, self.precision = setup, progress, precision
        train, model, device = setup.config.train, setup.model, setup.device
        self.ddp = distribute(TrainingForward(model), setup)
        self.forward = torch.compile(self.ddp) if train.compile else self.ddp
        # fused: one kernel over all parameters (for the Bible model on a CPU thread 8 against 27-42 ms per step;
        # the same values up to float rounding); torch's default on a CPU is a Python loop over the tensors
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=train.lr, betas=(train.adam_beta1, train.adam_beta2), eps=train.adam_eps,
            weight_decay=train.weight_decay, fused=device.type in FUSED_ADAM_DEVICES)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_factor(train, progress))
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision is torch.float16)
        self.late_dropout = LateDropout(model, train)

    @property
    def precision_name(self) -> str:
        return {torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}.get(self.precision, "float32")

    def sampling_probability(self) -> float:
        train = self.setup.config.train
        ramp = min(1.0, self.progress.step / train.sampling_ramp) if train.sampling_ramp > 0 else 1.0
        return train.scheduled_sampling * ramp

    def update(self, batches: list[Batch], tokens: float, weight: float = 1.0) -> dict | None:
        """One optimizer step over this process's `batches` (gradient accumulation); `tokens` counts the target
        tokens of the whole update on every process. Returns the update's statistics, or None if it was skipped
        (a non-finite loss or gradient, or an fp16 overflow that the gradient scaler handles)."""
        self.setup.model.train()
        if self.late_dropout.follow(self.progress.step, self.progress.elapsed):
            log.info("step %d: dropout on (train.dropout_from %g)", self.progress.step,
                     self.setup.config.train.dropout_from)
        try:
            loss_sum, nll_sum = self._backward(batches, tokens, weight)
            out_of_memory = False
        except torch.OutOfMemoryError:
            out_of_memory = True
        if out_of_memory:  # outside the except block, so that the failed batch's tensors are freed first
            return self._retry_smaller(batches, tokens, weight)
        loss_sum, nll_sum = self.setup.world.sum([loss_sum, nll_sum])
        if not math.isfinite(loss_sum):
            return self._skip(f"the loss is {loss_sum}")
        return self._step(loss_sum, nll_sum, tokens)

    def _step(self, loss_sum: float, nll_sum: float, tokens: float) -> dict | None:
        """Unscale, clip and step with the gradients of a finite loss."""
        self.scaler.unscale_(self.optimizer)
        norm = self._clip_gradients()
        if not math.isfinite(norm) and not self.scaler.is_enabled():
            return self._skip(f"the gradient norm is {norm}")
        scale = self.scaler.get_scale()
        self.scaler.step(self.optimizer)
        self.optimizer.__dict__.pop("grad_scale", None)  # the clip's divisor (_clip_gradients): this step only
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler.get_scale() < scale:
            log.info("step %d: fp16 gradient overflow, update skipped, loss scale now %g", self.progress.step + 1,
                     self.scaler.get_scale())
            return None
        self.scheduler.step()
        self.progress.nonfinite_in_row = 0
        return {"loss": loss_sum / tokens, "nll": nll_sum / tokens, "tokens": int(tokens), "grad_norm": norm}

    def _loss(self, batch: Batch, probability: float) -> tuple[Tensor, Tensor]:
        with torch.autocast(self.setup.device.type, dtype=self.precision or torch.bfloat16,
                            enabled=self.precision is not None):
            logits = self.forward(batch.src, batch.src_mask, batch.tgt_in, probability)
        return label_smoothed_nll(logits, batch.tgt_out, self.setup.config.train.label_smoothing)

    def _backward(self, batches: list[Batch], tokens: float, weight: float) -> tuple[float, float]:
        """Forward and backward of this process's batches. Each loss is scaled so that the gradients add up to the
        update's loss per target token over all processes (DDP averages over processes, hence the factor of
        their number); DDP exchanges gradients in the backward pass of the last batch only."""
        world, device = self.setup.world, self.setup.device
        scale = weight * world.size / max(tokens, 1.0)
        probability = self.sampling_probability()
        sums = torch.zeros(2, dtype=torch.float64, device=device)  # loss, nll: one device sync per update
        for index, batch in enumerate(batches):
            hold_back = world.distributed and index < len(batches) - 1
            with self.ddp.no_sync() if hold_back else nullcontext():
                loss, nll = self._loss(batch.to(device), probability)
                self.scaler.scale(loss * scale).backward()
            sums += torch.stack([loss.detach(), nll]).double() * weight
        loss_sum, nll_sum = sums.tolist()
        return loss_sum, nll_sum

    def _clip_gradients(self) -> float:
        """Clip the gradient norm to train.clip_norm (when > 0); returns the norm before clipping. The fused step
        divides the gradients by clip_grad_norm_'s factor (`grad_scale`, as GradScaler hands it to fused optimizers)
        instead of a pass of its own over them: 1.4% faster updates in the bf16 Bible recipe. fp16 keeps the pass."""
        clip, parameters = self.setup.config.train.clip_norm, self.setup.model.parameters()
        if not self.optimizer.defaults.get("fused") or self.scaler.is_enabled():
            return float(torch.nn.utils.clip_grad_norm_(parameters, clip if clip > 0 else math.inf))
        norm = float(torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None]))
        if 0 < clip < norm + 1e-6 and math.isfinite(norm):
            self.optimizer.grad_scale = torch.tensor((norm + 1e-6) / clip, device=self.setup.device)
        return norm

    def _skip(self, reason: str) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        progress, limit = self.progress, self.setup.config.train.max_nonfinite
        progress.nonfinite_in_row += 1
        progress.skipped_updates += 1
        log.warning("step %d: %s; update skipped (%d in a row, %d allowed)", progress.step + 1, reason,
                    progress.nonfinite_in_row, limit)
        if progress.nonfinite_in_row >= limit:
            raise NmtkitError(f"training diverged at step {progress.step + 1}: {limit} updates in a row were skipped "
                              f"({reason}); lower train.lr or raise train.warmup, then --resume from last.pt")
        return None

    def _retry_smaller(self, batches: list[Batch], tokens: float, weight: float) -> dict | None:
        """After running out of memory: the same update again, each batch split in two."""
        self.optimizer.zero_grad(set_to_none=True)
        device = self.setup.device
        if device.type == "cuda":
            torch.cuda.empty_cache()
        where = f"out of memory on {device} at step {self.progress.step + 1}"
        if self.setup.world.distributed:
            raise NmtkitError(f"{where} in process {self.setup.world.rank}: lower train.batch_tokens (and raise "
                              "train.update_freq to keep the update size)")
        halves = [half for batch in batches for half in batch.split()]
        if len(halves) == len(batches):
            raise NmtkitError(f"{where} with one sentence per batch: lower data.max_words or use a smaller model")
        log.warning("%s: retrying the update in %d batches instead of %d", where, len(halves), len(batches))
        return self.update(halves, tokens, weight)
