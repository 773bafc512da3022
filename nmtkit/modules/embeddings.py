"""Token embeddings scaled by sqrt(d_model) and sinusoidal or learned position embeddings.

Three sinusoidal layouts: nmtkit's own (Vaswani et al. 2017, Section 3.5: sin on even, cos on odd dimensions) and
the two that imported models were trained with (`nmtkit.pretrained`): Marian's (the same frequencies, the sines in
the first half and the cosines in the second) and tensor2tensor's, which fairseq and M2M100/NLLB use (frequencies
10000^(-i/(d/2-1)), sines then cosines). M2M100's table starts at row `offset` (its padding id + 1 = 2).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from nmtkit.data.subword import PAD


def sinusoidal_table(length: int, dim: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (Vaswani et al. 2017, Section 3.5)."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    inverse_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inverse_freq)
    table[:, 1::2] = torch.cos(position * inverse_freq[: dim // 2])
    return table.float()


def split_sinusoidal_table(length: int, dim: int) -> Tensor:
    """Marian's layout: sin(pos / 10000^(2i/d)) in dimensions 0..d/2-1, cos(...) in d/2..d-1 (for an odd d the sines
    take the extra dimension), computed in float64 as transformers' MarianSinusoidalPositionalEmbedding does."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    exponent = 2 * (torch.arange(dim, dtype=torch.int64) // 2).double() / dim  # (D,) 2*(j//2)/d
    angles = position / torch.pow(torch.tensor(10000.0, dtype=torch.float64), exponent)  # (T, D)
    return torch.cat([torch.sin(angles[:, 0::2]), torch.cos(angles[:, 1::2])], dim=1).float()


def t2t_sinusoidal_table(length: int, dim: int) -> Tensor:
    """tensor2tensor's layout (fairseq's SinusoidalPositionalEmbedding, M2M100's): frequencies
    exp(-i ln(10000) / (d/2 - 1)), the d/2 sines then the d/2 cosines, a zero column for an odd d; computed in float32
    as they compute it."""
    half = dim // 2
    frequency = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
    angles = torch.arange(length, dtype=torch.int64).float().unsqueeze(1) * frequency.unsqueeze(0)  # (T, D/2)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    return torch.cat([table, torch.zeros(length, 1)], dim=1) if dim % 2 else table


SINUSOIDAL = {"sinusoidal": sinusoidal_table, "sinusoidal_split": split_sinusoidal_table,
              "sinusoidal_t2t": t2t_sinusoidal_table}


class TokenEmbedding(nn.Embedding):
    """Embedding multiplied by sqrt(d_model) (Section 3.4); its weight can be tied to an output layer."""

    def __init__(self, vocab_size: int, dim: int, scaled: bool = True):
        super().__init__(vocab_size, dim, padding_idx=PAD)
        nn.init.normal_(self.weight, mean=0.0, std=dim**-0.5)
        with torch.no_grad():
            self.weight[PAD].zero_()
        self.scale = math.sqrt(dim) if scaled else 1.0

    def forward(self, ids: Tensor) -> Tensor:
        return super().forward(ids) * self.scale


class PositionEmbedding(nn.Module):
    """Adds position information to (B, T, D) inputs, starting at position `offset`. A sinusoidal table of `kind`
    (a key of SINUSOIDAL) starts at its row `first_row` (M2M100: 2)."""

    def __init__(self, dim: int, max_positions: int, kind: str = "sinusoidal", first_row: int = 0):
        super().__init__()
        self.kind, self.max_positions = kind, max_positions
        if kind == "learned":
            self.table = nn.Parameter(torch.randn(max_positions, dim) * dim**-0.5)
        else:
            table = SINUSOIDAL[kind](max_positions + first_row, dim)[first_row:]
            self.register_buffer("table", table, persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):
            raise ValueError(f"sequence of length {end} exceeds max_positions {self.table.size(0)}")
        return x + self.table[offset:end]
