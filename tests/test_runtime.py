"""Device, thread and precision selection."""

from __future__ import annotations

import pytest
import torch

from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import autocast_dtype, avoid_per_shape_attention, pick_device, set_threads


def test_auto_device_is_cuda_only_when_available():
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert pick_device("cpu").type == "cpu"


def test_a_cuda_device_keeps_attention_off_cudnn():
    """cuDNN's fused attention plans every new batch shape (300 ms each on an H200): a CUDA device turns it off,
    the CPU leaves the setting alone."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        pick_device("cpu")
        assert torch.backends.cuda.cudnn_sdp_enabled()
        device = pick_device("auto")
        assert torch.backends.cuda.cudnn_sdp_enabled() == (device.type == "cpu")
        avoid_per_shape_attention()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised on machines without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(NmtkitError, match="CUDA is not available"):
        pick_device("cuda")


def test_unknown_device_is_an_error():
    with pytest.raises(NmtkitError, match="unknown device"):
        pick_device("tpu9")


def test_amp_settings_that_name_a_dtype():
    assert autocast_dtype("none") is None
    assert autocast_dtype("bf16") is torch.bfloat16
    assert autocast_dtype("fp16") is torch.float16


def test_set_threads():
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
