"""The torch devices (and reduced precisions) present on this machine, for tests parametrized over them.

`make test` on a GPU machine then runs the parity and invariant tests on the GPU code as well as on the CPU.
"""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def device_params() -> list:
    """`pytest.mark.parametrize("device", device_params())`: one id per device."""
    return [pytest.param(device, id=device) for device in DEVICES]


def half_dtypes(device: str) -> list[torch.dtype]:
    """Reduced precisions the device computes natively: bf16/fp16 on CUDA, none on the CPU (emulated bf16 on a CPU
    is slow and its results differ between CPU models)."""
    if device != "cuda":
        return []
    return [torch.float16] + ([torch.bfloat16] if torch.cuda.is_bf16_supported() else [])
