"""Dropout (Srivastava et al. 2014) with masks that are cheap to draw on a CPU.

`nn.Dropout` on a CPU draws one Bernoulli sample per element from torch's generator, one at a time on one thread:
for a (4096, 1024) activation that is ~25 ms against ~1 ms for the multiplication, and in the Bible
Transformer's training step it was 15% of the time (torch.profiler, 4,096-token batches, 2 threads). Here each
mask takes one 64-bit draw of torch's generator (`torch.randint`, seeded by `torch.manual_seed` like everything
else) as a key, and its i-th 64-bit word is the SplitMix64 mix (Steele et al. 2014) of (key + i) * its gamma:
vectorized integer operations that run on every thread, where torch's generator draws one number after the other
on one (2M-element masks: 5.5 ms against 11 ms for `torch.randint` of the words, 2 threads, Intel Xeon family 6
model 85). Each word gives four 16-bit lanes, and an element is dropped where its lane falls below
round(p * 65536): the drop probability is that count over 65536 (within 7.7e-6 of p) and the kept elements are
scaled by its inverse complement, so the expectation is unchanged. The key is drawn from torch's CPU generator, so
activation checkpointing, which restores that generator's state before it recomputes a layer, draws the same mask
again. Elsewhere (CUDA, code compiled by torch.compile) and for probabilities that 16 bits cannot express,
`F.dropout`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LANES = 65536  # the values of one 16-bit lane
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# SplitMix64's constants as signed 64-bit integers (torch's int64 arithmetic wraps as unsigned arithmetic does)
GOLDEN, MIX1, MIX2 = -7046029254386353131, -4658895280553007687, -7723592293110705685


def logical_shift(z: Tensor, bits: int) -> Tensor:
    """z >> bits as unsigned 64-bit integers (torch shifts int64 arithmetically)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def random_words(count: int, device: torch.device) -> Tensor:
    """`count` pseudo-random int64 words: SplitMix64 of a key drawn from torch's generator plus the word's index."""
    key = int(torch.randint(INT64_MIN, INT64_MAX, (1,), dtype=torch.int64, device=device))
    z = torch.arange(count, dtype=torch.int64, device=device).add_(key).mul_(GOLDEN)
    z = z.bitwise_xor_(logical_shift(z, 30)).mul_(MIX1)
    z = z.bitwise_xor_(logical_shift(z, 27)).mul_(MIX2)
    return z.bitwise_xor_(logical_shift(z, 31))


def keep_mask(shape: torch.Size, p: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """The keep mask of `dropout`, in `dtype`: 0 where an element is dropped (probability p rounded to a multiple
    of 1/65536, between 1/65536 and 1 - 1/65536), 1 elsewhere."""
    dropped = round(p * LANES)
    numel = shape.numel()
    draws = random_words((numel + 3) // 4, device)
    lanes = draws.view(torch.int16)[:numel].view(shape)  # uniform over [-32768, 32767]
    return (lanes >= dropped - LANES // 2).to(dtype)


def keep_scale(p: float) -> float:
    """The factor of the kept elements: the inverse of `keep_mask`'s keep probability."""
    return LANES / (LANES - round(p * LANES))


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`F.dropout(x, p, training)`, with `keep_mask` on a CPU."""
    if not training or p == 0.0:
        return x
    # under torch.compile inductor draws the mask inside its fused kernel; it cannot compile keep_mask's 64-bit
    # constants (an OverflowError in its C++ code generation, torch 2.13)
    if x.device.type != "cpu" or not 0 < round(p * LANES) < LANES or torch.compiler.is_compiling():
        return F.dropout(x, p, training)
    mask = keep_mask(x.shape, p, x.dtype, x.device)
    if x.dtype in (torch.float32, torch.float64):
        return x * mask.mul_(keep_scale(p))  # the scale is exact to the dtype's precision: one pass over x
    # in bfloat16 or float16 the scale itself would round (1.109375 for 1.111119 at p 0.1): multiply by it as a
    # float scalar, as torch's dropout does, so each kept element is its value times the exact scale, rounded once
    return (x * mask).mul_(keep_scale(p))


class Dropout(nn.Module):
    """`nn.Dropout` with `dropout`'s CPU masks."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
