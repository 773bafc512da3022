"""Attention: pure functions for the maths, small Modules for the parameters.

Masks are boolean and True where attending is allowed (real tokens, or the causal past).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmtkit.modules.dropout import dropout
from nmtkit.registry import get_score, register_score


def masked_softmax(scores: Tensor, mask: Tensor | None, dim: int = -1, dtype: torch.dtype | None = None) -> Tensor:
    """Softmax that gives exactly zero weight where `mask` is False; an all-masked row gives zeros. With `dtype`,
    computed and returned in that dtype (as `torch.softmax`'s own argument: no separate cast of `scores`)."""
    if mask is None:
        return torch.softmax(scores, dim=dim, dtype=dtype)
    # an additive mask of mask's (broadcast) shape, not a masked_fill of scores: its backward is free
    bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill_(~mask, float("-inf"))
    weights = torch.softmax(scores + bias, dim=dim, dtype=dtype)
    # a row with nothing to attend to is NaN here; on a CPU, where checking costs no device sync, the usual case of
    # none skips the pass that zeroes them (and its backward). Compiled code zeroes them always: the check would
    # break its graph, and inductor fuses the pass into the softmax
    if scores.device.type == "cpu" and not torch.compiler.is_compiling() and bool(mask.any(dim=dim).all()):
        return weights
    return weights.nan_to_num(0.0)


def scaled_dot_product(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None,
                       dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V  (Vaswani et al. 2017, Eq. 1). (..., Tq, d), (..., Tk, d) -> (..., Tq, d).
    With `dropout_p`, dropout on the weights before they weigh the values (as in F.scaled_dot_product_attention);
    the weights returned are those before dropout."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., Tq, Tk)
    # half precision softmax in float32: more exact, and on CPUs faster
    weights = masked_softmax(scores, mask, dtype=torch.promote_types(scores.dtype, torch.float32)).to(value.dtype)
    return dropout(weights, dropout_p) @ value, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, Section 3.2.2) with separately callable key/value projection,
    so decoders can project the encoder output once and cache keys/values during incremental decoding."""

    few_queries = 16  # in eval mode, up to this many queries per row are computed with two matmuls (see forward)

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
        """x (B, T, D) attends over key/value (B, H, L, dh); mask (B, T|1, L). Weights (B, H, T, L) if asked.

        With T == 1 and a cache, `causal` needs no mask: the one query is the newest position."""
        query = self.split_heads(self.query(x))  # (B, H, T, dh)
        head_mask = None if mask is None else mask.unsqueeze(1)  # (B, 1, T|1, L)
        dropout_p = self.dropout if self.training else 0.0
        # training on a CPU: forward and backward of the fused kernel were 1.2-1.35x slower than the two matmuls
        # in float32 and 3-4x slower in bfloat16 (torch 2.13, batches of 20-160 sentences of 25 positions)
        fused = not (self.training and x.device.type == "cpu")
        if fused and causal and head_mask is None and not need_weights and x.size(1) == key.size(2):
            context = F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p, is_causal=True)
            return self._merge(context), None
        if causal and x.size(1) > 1:
            length = key.size(2)
            past = torch.ones(x.size(1), length, dtype=torch.bool, device=x.device).tril(length - x.size(1))
            head_mask = past if head_mask is None else head_mask & past
        if fused and not need_weights and (self.training or x.size(1) > self.few_queries):
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=head_mask, dropout_p=dropout_p)
            weights = None
        else:  # decoding a few queries per row, where the fused kernel is 2-5x slower on CPU; training on a CPU
            context, weights = scaled_dot_product(query, key, value, head_mask, dropout_p)
        return self._merge(context), weights if need_weights else None

    def grouped(self, x: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """One step of G rows per key/value row: x (B*G, 1, D) over key/value (B, H, L, dh), mask (B, 1, L).

        Row b*G + g reads keys row b (a sentence's beams share its encoder output): the G rows become G
        queries of one row, so the keys are read once instead of G times. Weights (B*G, H, 1, L) if asked."""
        groups = x.size(0) // key.size(0)
        context, weights = self(x.view(key.size(0), groups, x.size(-1)), key, value, mask, need_weights=need_weights)
        if weights is not None:
            weights = weights.transpose(1, 2).reshape(x.size(0), self.heads, 1, -1)
        return context.view(x.shape), weights

    def _merge(self, context: Tensor) -> Tensor:
        batch, _, length, _ = context.shape  # (B, H, T, dh) -> (B, T, D)
        return self.out(context.transpose(1, 2).reshape(batch, length, -1))


# --- Score functions for RNN attention: (B, T, Dq) queries against (B, S, Dk) keys -> scores (B, T, S). ---
# Each score is a Module with `prepare(keys)` (the query-independent part, computed once per sentence and kept in
# Memory) and `forward(query, prepared)`.


def dot_score(query: Tensor, keys: Tensor) -> Tensor:
    """s^T h (Luong et al. 2015, Eq. 8 "dot")."""
    return query @ keys.transpose(1, 2)  # (B, T, S)


def cosine_score(query: Tensor, keys: Tensor, sharpness: Tensor) -> Tensor:
    """beta * cos(s, h): content-based addressing (Graves et al. 2014, Eq. 5-6)."""
    query, keys = F.normalize(query, dim=-1, eps=1e-8), F.normalize(keys, dim=-1, eps=1e-8)
    return sharpness * dot_score(query, keys)


def additive_score(query_part: Tensor, key_part: Tensor, vector: Tensor) -> Tensor:
    """v^T tanh(W_2 s + W_1 h) from the projected parts (Bahdanau et al. 2015, Appendix A.1.2)."""
    hidden = torch.tanh(query_part.unsqueeze(2) + key_part.unsqueeze(1))  # (B, T, S, A)
    return hidden @ vector  # (B, T, S)


class DotScore(nn.Module):
    def __init__(self, query_dim: int, key_dim: int, scaled: bool = False):
        super().__init__()
        if query_dim != key_dim:
            raise ValueError(f"dot attention needs equal query and key sizes, got {query_dim} and {key_dim}")
        self.scale = key_dim**-0.5 if scaled else 1.0

    def prepare(self, keys: Tensor) -> Tensor:
        return keys * self.scale

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return dot_score(query, prepared)


class GeneralScore(nn.Module):
    """s^T W h, the bilinear score (Luong et al. 2015, Eq. 8 "general")."""

    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        self.weight = nn.Linear(key_dim, query_dim, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.weight(keys)  # (B, S, Dq)

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return dot_score(query, prepared)


class AdditiveScore(nn.Module):
    """v^T tanh(W_1 h + W_2 s): Bahdanau's alignment model, Luong's "concat", the "MLP" score."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int | None = None):
        super().__init__()
        hidden = hidden or query_dim
        self.key_proj = nn.Linear(key_dim, hidden, bias=False)
        self.query_proj = nn.Linear(query_dim, hidden)
        self.vector = nn.Parameter(torch.empty(hidden).uniform_(-hidden**-0.5, hidden**-0.5))

    def prepare(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)  # (B, S, A)

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return additive_score(self.query_proj(query), prepared, self.vector)


class CosineScore(nn.Module):
    """Cosine similarity sharpened by beta: learned (positive, starting at sqrt(d)) unless a value is given."""

    def __init__(self, query_dim: int, key_dim: int, sharpness: float | None = None):
        super().__init__()
        if query_dim != key_dim:
            raise ValueError(f"cosine attention needs equal query and key sizes, got {query_dim} and {key_dim}")
        start = math.log(sharpness if sharpness else math.sqrt(key_dim))
        self.log_sharpness = nn.Parameter(torch.tensor(start), requires_grad=not sharpness)

    def prepare(self, keys: Tensor) -> Tensor:
        return keys

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return cosine_score(query, prepared, self.log_sharpness.exp())


class LocationScore(nn.Module):
    """softmax(W_a s) over source positions: the score ignores the keys (Luong et al. 2015, Eq. 9)."""

    def __init__(self, query_dim: int, max_positions: int):
        super().__init__()
        self.max_positions = max_positions
        self.weight = nn.Linear(query_dim, max_positions)

    def prepare(self, keys: Tensor) -> Tensor:
        if keys.size(1) > self.weight.out_features:
            raise ValueError(f"source of length {keys.size(1)} exceeds max_positions {self.weight.out_features}")
        return keys.new_zeros(keys.shape[:2])  # (B, S): only the length is used

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return self.weight(query)[..., : prepared.size(1)]  # (B, T, S)


@dataclass(frozen=True)
class ScoreOptions:
    """What some scores take besides the query and key sizes."""

    hidden: int | None = None  # the additive score's hidden size (None: the query size)
    max_positions: int = 1024  # the longest source the location score covers
    sharpness: float | None = None  # the cosine score's beta (None: learned)


# The registered scores (Luong et al. 2015's dot, general and concat of Eq. 8, and location of Eq. 9, among them) and
# their aliases; a builder takes the query and key sizes and the ScoreOptions.


@register_score("dot")
def _dot(query_dim: int, key_dim: int, options: ScoreOptions) -> nn.Module:
    return DotScore(query_dim, key_dim)


@register_score("scaled_dot")
def _scaled_dot(query_dim: int, key_dim: int, options: ScoreOptions) -> nn.Module:
    return DotScore(query_dim, key_dim, scaled=True)


@register_score("general", "bilinear")
def _general(query_dim: int, key_dim: int, options: ScoreOptions) -> nn.Module:
    return GeneralScore(query_dim, key_dim)


@register_score("additive", "mlp", "concat")
def _additive(query_dim: int, key_dim: int, options: ScoreOptions) -> nn.Module:
    return AdditiveScore(query_dim, key_dim, options.hidden)


@register_score("cosine")
def _cosine(query_dim: int, key_dim: int, options: ScoreOptions) -> nn.Module:
    return CosineScore(query_dim, key_dim, options.sharpness)


@register_score("location")
def _location(query_dim: int, key_dim: int, options: ScoreOptions) -> nn.Module:
    return LocationScore(query_dim, options.max_positions)


def build_score(name: str, query_dim: int, key_dim: int, hidden: int | None = None, max_positions: int = 1024,
                sharpness: float | None = None) -> nn.Module:
    """The score Module registered under `name` (see `nmtkit.registry.SCORES`); aliases share one implementation."""
    return get_score(name)(query_dim, key_dim, ScoreOptions(hidden, max_positions, sharpness))


def window_mask(centers: Tensor, length: int, width: int) -> Tensor:
    """Positions j with |j - p_t| <= D for centers p (B, T) -> (B, T, S) boolean (Luong et al. 2015, Section 3.2)."""
    positions = torch.arange(length, device=centers.device, dtype=centers.dtype)
    return (positions - centers.unsqueeze(-1)).abs() <= width


def gaussian_weights(centers: Tensor, length: int, sigma: float) -> Tensor:
    """exp(-(j - p_t)^2 / (2 sigma^2)) (B, T, S), which favours positions near p_t (Luong et al. 2015, Eq. 10)."""
    positions = torch.arange(length, device=centers.device, dtype=centers.dtype)
    return torch.exp(-((positions - centers.unsqueeze(-1)) ** 2) / (2 * sigma**2))


class Attention(nn.Module):
    """Global or local attention with any score (Luong et al. 2015, Section 3.1-3.2).

    global: softmax over all real source positions. local-m: window [t - D, t + D] around the target position
    t (clamped to the source length). local-p: window around p_t = S * sigmoid(v_p^T tanh(W_p h_t)) with the
    softmax weights multiplied by a Gaussian of sigma = D/2 (Eq. 9-10); S is each sentence's real length.
    """

    def __init__(self, score: str, query_dim: int, key_dim: int, window: str = "global", width: int = 10,
                 hidden: int | None = None, max_positions: int = 1024, sharpness: float | None = None):
        super().__init__()
        if window not in ("global", "local-m", "local-p"):
            raise ValueError(f"unknown attention window {window!r}; choose global, local-m or local-p")
        if window != "global" and width < 1:
            raise ValueError(f"local attention needs a window half-width D >= 1, got {width}")
        self.score = build_score(score, query_dim, key_dim, hidden, max_positions, sharpness)
        self.window, self.width = window, width
        if window == "local-p":
            self.position_proj = nn.Linear(query_dim, query_dim)
            self.position_vector = nn.Linear(query_dim, 1, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.score.prepare(keys)

    def centers(self, query: Tensor, src_mask: Tensor, positions: Tensor | None) -> Tensor:
        """The window centres p_t (B, T) of local attention, in float32: bf16 cannot tell positions above 256
        apart, which would shift the window."""
        lengths = src_mask.sum(-1, keepdim=True).float()  # (B, 1)
        if self.window == "local-m":
            if positions is None:
                raise ValueError("local-m attention needs the target positions t")
            return torch.minimum(positions.float(), lengths - 1)
        gate = self.position_vector(torch.tanh(self.position_proj(query))).squeeze(-1)  # (B, T)
        return lengths * torch.sigmoid(gate.float())

    def forward(self, query: Tensor, values: Tensor, prepared: Tensor, src_mask: Tensor,
                positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """query (B, T, Dq), values (B, S, Dv), src_mask (B, S); positions (B, T) target indices (local-m).
        Returns the context (B, T, Dv) and the attention weights (B, T, S)."""
        scores = self.score(query, prepared)  # (B, T, S)
        mask = src_mask.unsqueeze(1)  # (B, 1, S)
        if self.window == "global":
            weights = masked_softmax(scores, mask)
        else:
            centers = self.centers(query, src_mask, positions)
            weights = masked_softmax(scores, mask & window_mask(centers, scores.size(-1), self.width))
            if self.window == "local-p":
                weights = weights * gaussian_weights(centers, scores.size(-1), self.width / 2).to(weights.dtype)
        return weights @ values, weights
