"""Token embeddings scaled by sqrt(d_model) and sinusoidal or learned position embeddings."""

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


class TokenEmbedding(nn.Embedding):
    """Embedding multiplied by sqrt(d_model) (Section 3.4); its weight can be tied to an output layer."""

    def __init__(self, vocab_size: int, dim: int):
        super().__init__(vocab_size, dim, padding_idx=PAD)
        nn.init.normal_(self.weight, mean=0.0, std=dim**-0.5)
        with torch.no_grad():
            self.weight[PAD].zero_()
        self.scale = math.sqrt(dim)

    def forward(self, ids: Tensor) -> Tensor:
        return super().forward(ids) * self.scale


class PositionEmbedding(nn.Module):
    """Adds position information to (B, T, D) inputs, starting at position `offset`."""

    def __init__(self, dim: int, max_positions: int, kind: str = "sinusoidal"):
        super().__init__()
        self.kind, self.max_positions = kind, max_positions
        if kind == "learned":
            self.table = nn.Parameter(torch.randn(max_positions, dim) * dim**-0.5)
        else:
            self.register_buffer("table", sinusoidal_table(max_positions, dim), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):
            raise ValueError(f"sequence of length {end} exceeds max_positions {self.table.size(0)}")
        return x + self.table[offset:end]
