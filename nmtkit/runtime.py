"""Device and thread selection shared by training and translation."""

from __future__ import annotations

import os

import torch

from nmtkit.errors import NmtkitError


def pick_device(name: str = "auto") -> torch.device:
    """`auto` takes CUDA when present, otherwise the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise NmtkitError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise NmtkitError(f"device {name} requested but CUDA is not available; use --device cpu")
    return device


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


def use_bf16(amp: str, device: torch.device) -> bool:
    """Resolve the `train.amp` setting: none, bf16, or auto (bf16 where native)."""
    return amp == "bf16" or (amp == "auto" and native_bf16(device))
