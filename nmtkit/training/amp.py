"""train.amp: the precision a run trains in. `auto` measures float32 against bf16 autocast on two real training
batches before the first update (rank 0 measures, every process follows) and keeps the choice in the progress, so
that a resumed run trains in the same precision without measuring again."""

from __future__ import annotations

import logging

import torch

from nmtkit.checkpoint.payload import rng_state, set_rng_state
from nmtkit.data.dataset import Batch
from nmtkit.runtime.device import autocast_dtype
from nmtkit.runtime.precision import auto_candidates, describe, dtype_name, fastest, time_precisions
from nmtkit.training.objectives import label_smoothed_nll
from nmtkit.training.setup import RunSetup
from nmtkit.training.state import Progress

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split


def configured_precision(amp: str) -> torch.dtype | None:
    """The autocast dtype train.amp names (None: float32, and for `auto` until `settle_precision`)."""
    return None if amp == "auto" else autocast_dtype(amp)


def settle_precision(setup: RunSetup, progress: Progress, precision: torch.dtype | None) -> torch.dtype | None:
    """With train.amp=auto, the precision this run measured before (when resumed), or the faster one of float32
    and bf16 autocast, measured now and kept in `progress`; otherwise `precision` unchanged."""
    if setup.config.train.amp != "auto":
        return precision
    if not progress.precision:
        chosen = measure_precision(setup) if setup.world.is_main else None
        use_bf16 = setup.world.main_decides(chosen is torch.bfloat16)
        progress.precision = dtype_name(torch.bfloat16 if use_bf16 else None)
    return None if progress.precision == "float32" else getattr(torch, progress.precision)


def measure_precision(setup: RunSetup) -> torch.dtype | None:
    candidates = auto_candidates(setup.device)
    if len(candidates) == 1:
        log.info("train.amp=auto: float32 (%s has no bf16 kernels)", setup.device)
        return None
    batches = [setup.train_data.batch(indices).to(setup.device)
               for indices in setup.train_data.epoch_batches(setup.config.train.batch_tokens, 0, 0)[:2]]
    saved = rng_state(setup.device)  # dropout masks drawn here must not change the run
    try:
        timings = time_precisions(lambda dtype: trial_step(setup, batches, dtype), candidates, setup.device)
    finally:
        set_rng_state(saved, setup.device)
    chosen = fastest(timings)
    log.info("train.amp=auto: %s (forward and backward of two batches: %s)", dtype_name(chosen), describe(timings))
    return chosen


def trial_step(setup: RunSetup, batches: list[Batch], dtype: torch.dtype | None) -> None:
    """Forward and backward of `batches` in `dtype` (None: float32), the gradients dropped."""
    setup.model.train()
    for batch in batches:
        with torch.autocast(setup.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            logits = setup.model(batch.src, batch.src_mask, batch.tgt_in)[0]
        label_smoothed_nll(logits, batch.tgt_out, setup.config.train.label_smoothing)[0].backward()
    setup.model.zero_grad(set_to_none=True)
