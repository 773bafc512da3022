"""The deep output ("readout") of the RNN encoder-decoders of Cho et al. 2014 and Bahdanau et al. 2015.

Before the softmax layer W_o, the decoder state, the previous target embedding and the context are combined,
t~ = U_o s + V_o E y_prev + C_o c, and passed through a maxout of two pieces (Goodfellow et al. 2013):
Cho et al. 2014 (arXiv 1406.1078), Appendix A; Bahdanau et al. 2015 (arXiv 1409.0473), Appendix A.2.2.
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

Readout = Literal["maxout", "linear"]


def maxout(x: Tensor, pieces: int = 2) -> Tensor:
    """t_j = max_k x_{pieces*j + k}, the largest of each group of `pieces` units: (..., pieces*K) -> (..., K)."""
    return x.unflatten(-1, (-1, pieces)).amax(dim=-1)


class DeepOutput(nn.Module):
    """t~ = U_o s + V_o E y_prev + C_o c, then maxout (pool 2) or nothing ("linear"): (..., out_dim) units for W_o.

    With "linear" the layer is a bottleneck of `out_dim` units without a non-linearity, so that the output layer
    W_o can still be tied to a target embedding of `out_dim` units.
    """

    def __init__(self, state_dim: int, embed_dim: int, context_dim: int, out_dim: int, kind: Readout = "maxout"):
        super().__init__()
        if kind not in ("maxout", "linear"):
            raise ValueError(f"unknown readout {kind!r}; choose maxout or linear")
        width = 2 * out_dim if kind == "maxout" else out_dim
        self.state_proj = nn.Linear(state_dim, width)  # U_o (with the readout's bias)
        self.embed_proj = nn.Linear(embed_dim, width, bias=False)  # V_o
        self.context_proj = nn.Linear(context_dim, width, bias=False)  # C_o
        self.kind = kind

    def forward(self, state: Tensor, embedded: Tensor, context: Tensor) -> Tensor:
        """state (B, T, Ds), embedded (B, T, E), context (B, T, Dc) -> t (B, T, out_dim)."""
        combined = self.state_proj(state) + self.embed_proj(embedded) + self.context_proj(context)  # (B, T, W)
        return maxout(combined) if self.kind == "maxout" else combined
