"""Attention: pure functions for the maths, small Modules for the parameters.

Masks are boolean and True where attending is allowed (real tokens, or the causal past).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def masked_softmax(scores: Tensor, mask: Tensor | None, dim: int = -1) -> Tensor:
    """Softmax that gives exactly zero weight where `mask` is False; an all-masked row gives zeros."""
    if mask is None:
        return torch.softmax(scores, dim=dim)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    return weights.nan_to_num(0.0)


def scaled_dot_product(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V  (Vaswani et al. 2017, Eq. 1). (..., Tq, d), (..., Tk, d) -> (..., Tq, d)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., Tq, Tk)
    weights = masked_softmax(scores, mask)
    return weights @ value, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, Section 3.2.2) with separately callable key/value projection,
    so decoders can project the encoder output once and cache keys/values during incremental decoding."""

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        self.heads, self.dropout = heads, dropout
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        batch, length, d_model = x.shape
        return x.view(batch, length, self.heads, d_model // self.heads).transpose(1, 2)  # (B, H, L, dh)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(B, L, D) -> keys and values (B, H, L, dh)."""
        return self.split_heads(self.key(x)), self.split_heads(self.value(x))

    def forward(self, x: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                causal: bool = False, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) attends over key/value (B, H, L, dh); mask (B, T|1, L). Weights (B, H, T, L) if asked."""
        query = self.split_heads(self.query(x))  # (B, H, T, dh)
        head_mask = None if mask is None else mask.unsqueeze(1)  # (B, 1, T|1, L)
        if causal and head_mask is None and not need_weights and x.size(1) == key.size(2):
            dropout = self.dropout if self.training else 0.0
            context = F.scaled_dot_product_attention(query, key, value, dropout_p=dropout, is_causal=True)
            return self._merge(context), None
        if causal:
            length = key.size(2)
            past = torch.ones(x.size(1), length, dtype=torch.bool, device=x.device).tril(length - x.size(1))
            head_mask = past if head_mask is None else head_mask & past
        if need_weights:
            context, weights = scaled_dot_product(query, key, value, head_mask)
        else:
            dropout = self.dropout if self.training else 0.0
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=head_mask, dropout_p=dropout)
            weights = None
        return self._merge(context), weights

    def _merge(self, context: Tensor) -> Tensor:
        batch, _, length, _ = context.shape  # (B, H, T, dh) -> (B, T, D)
        return self.out(context.transpose(1, 2).reshape(batch, length, -1))
