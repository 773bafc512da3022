"""benchmarks/update_profile.py's pure parts: the grouping of profiled ops, the model's GEMM shapes, the real
lengths and padding of batches, and the FMA peak."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scripts import load_script

from nmtkit.data.dataset import Batch
from nmtkit.data.subword import PAD

profile = load_script("benchmarks/update_profile.py", "update_profile")


@pytest.mark.parametrize(("name", "kind"), [
    ("aten::addmm", "GEMM"), ("aten::bmm", "GEMM"), ("aten::_fused_adamw_", "optimizer"),
    ("aten::_foreach_norm", "optimizer"), ("aten::native_layer_norm", "memory-bound"),
    ("aten::copy_", "memory-bound"), ("autograd::engine::evaluate_function: MmBackward0", "autograd")])
def test_ops_fall_into_their_kind(name: str, kind: str):
    assert profile.category(name).startswith(kind)


def event(key: str, shapes: list, micros: float) -> SimpleNamespace:
    """A profiler average as gemm_shapes reads it."""
    return SimpleNamespace(key=key, input_shapes=shapes, self_cpu_time_total=micros)


def test_gemm_shapes_count_a_batch_dimension_as_the_configured_batch_and_rank_by_time():
    averages = [event("aten::addmm", [[256], [490, 256], [256, 1024]], 30.0),
                event("aten::addmm", [[256], [470, 256], [256, 1024]], 30.0),
                event("aten::mm", [[470, 1024], [1024, 256]], 40.0),
                event("aten::add", [[470, 256], [470, 256]], 500.0)]
    shapes = profile.gemm_shapes(averages, fixed={256, 1024}, tokens=512)
    assert [shape[:3] for shape in shapes] == [(512, 256, 1024), (512, 1024, 256)]
    assert [shape[3] for shape in shapes] == pytest.approx([0.6, 0.4])


def test_batch_lengths_count_real_tokens_with_eos_and_padding_the_rest():
    src = torch.tensor([[5, 6, 2], [7, 2, PAD]])
    tgt_out = torch.tensor([[5, 2], [2, PAD]])
    batch = Batch(src, src != PAD, tgt_out, tgt_out, np.arange(2))
    lengths = profile.batch_lengths([batch])
    assert (lengths.src, lengths.tgt, lengths.src_pairs, lengths.tgt_pairs, lengths.cross_pairs) == (5, 3, 13, 4, 8)
    assert profile.padding_share([batch]) == pytest.approx(2 / 10)


def test_the_peak_is_cores_times_fma_flops_a_cycle_times_the_clock_or_as_given():
    args = SimpleNamespace(peak_gflops=None, ghz=2.0, threads=2)
    peak, how = profile.peak_gflops(args)
    per_cycle = 64 if "avx512" in torch.backends.cpu.get_cpu_capability().lower() else 32
    assert peak == 2 * per_cycle * 2.0 and "GHz" in how
    assert profile.peak_gflops(SimpleNamespace(peak_gflops=150.0, ghz=None, threads=2)) == (150.0, "--peak-gflops")
