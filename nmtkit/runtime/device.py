"""Device, thread and precision selection shared by training and translation; stop signals for training."""

from __future__ import annotations

import logging
import os
import signal
import threading

import torch

from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)


def pick_device(name: str = "auto") -> torch.device:
    """`auto` takes CUDA when present, otherwise the CPU."""
    if name == "auto":
        return pick_device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise NmtkitError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise NmtkitError(f"device {name} requested but CUDA is not available; use --device cpu")
    if device.type == "cuda":
        avoid_per_shape_attention()
    return device


def avoid_per_shape_attention() -> None:
    """Keep scaled_dot_product_attention off cuDNN's fused attention, which builds a plan for every new (batch,
    length) shape: on an NVIDIA H200 (torch 2.11, bf16 autocast, the Bible recipe's model) about 300 ms per new
    shape against 15 ms a step, so a first epoch of ever-new NMT batch shapes ran 10x slower. Flash and
    memory-efficient attention have no such cost (24 ms for a new shape, 20 ms again)."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def set_threads(threads: int) -> int:
    """Use `threads` CPU threads (0 = all cores); returns the number in force."""
    count = threads if threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(count)
    return count


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products run in hardware here (else autocast to bf16 would only add conversions)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def autocast_dtype(amp: str) -> torch.dtype | None:
    """The autocast dtype of a `train.amp` setting that names one (none, bf16, fp16); None means float32. `auto` is
    measured on the model (`nmtkit.runtime.precision`)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)


class StopSignals:
    """While active, SIGINT and SIGTERM ask training to stop after the current update and save last.pt.

    With `second_interrupt_stops`, a second Ctrl-C stops at once (the last saved last.pt stays intact); under
    torchrun it is off, because the launcher relays the terminal's Ctrl-C to the workers a second time."""

    def __init__(self, second_interrupt_stops: bool):
        self.received: str | None = None
        self.second_interrupt_stops = second_interrupt_stops
        self._previous: dict = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._receive)
        return self

    def _receive(self, number: int, frame) -> None:
        if self.received is not None and number == signal.SIGINT and self.second_interrupt_stops:
            raise KeyboardInterrupt
        if self.received is None:
            self.received = signal.Signals(number).name
            log.warning("%s received: stopping after this update and saving last.pt", self.received)

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
