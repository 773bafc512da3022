"""Recurrent building blocks shared by the RNN models (seq2seq, Bahdanau, Luong, GNMT): layers, encoder and
decoder stacks, the bridges that start a decoder from the encoder's final states, and source reversal.

A stack is a list of single-layer `nn.LSTM`/`nn.GRU` modules so that models can make some layers
bidirectional (GNMT's bottom layer), add residual connections from a chosen layer up (Wu et al. 2016,
Section 3.1), or feed extra inputs (attention context) into every layer. States travel as lists of
per-layer tuples inside a model and as batch-first dict entries (`h0`, `c0`, `h1`, ...) in the decoder State,
so beam search can reorder them like any other tensor.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtkit.data.subword import EOS
from nmtkit.modules.dropout import Dropout

LayerState = tuple[Tensor, ...]  # (h,) for GRU, (h, c) for LSTM; each (B, H)

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


def make_rnn(cell: str, input_size: int, hidden: int, bidirectional: bool = False) -> nn.RNNBase:
    """One batch-first recurrent layer."""
    if cell not in CELLS:
        raise ValueError(f"unknown RNN cell {cell!r}; choose lstm or gru")
    return CELLS[cell](input_size, hidden, batch_first=True, bidirectional=bidirectional)


def to_torch_state(state: LayerState) -> Tensor | tuple[Tensor, Tensor]:
    """Our (B, H) tuple -> torch's (1, B, H) hidden state (a tuple for LSTM)."""
    parts = tuple(part.unsqueeze(0).contiguous() for part in state)
    return parts if len(parts) == 2 else parts[0]


def from_torch_state(state: Tensor | tuple[Tensor, Tensor]) -> LayerState:
    """torch's (D, B, H) final state -> our (B, D*H) tuple (both directions concatenated)."""
    parts = state if isinstance(state, tuple) else (state,)
    return tuple(torch.cat(list(part), dim=-1) for part in parts)


def states_to_dict(states: list[LayerState], prefix: str = "") -> dict[str, Tensor]:
    """[(h, c), ...] -> {"h0": h, "c0": c, ...}, batch first."""
    return {f"{prefix}{name}{index}": part for index, state in enumerate(states) for name, part in zip("hc", state)}


def states_from_dict(state: dict[str, Tensor], layers: int, prefix: str = "") -> list[LayerState]:
    """Inverse of `states_to_dict`."""
    return [tuple(state[f"{prefix}{name}{index}"] for name in "hc" if f"{prefix}{name}{index}" in state)
            for index in range(layers)]


def reverse_before_eos_index(src: Tensor, src_mask: Tensor) -> Tensor:
    """(B, S) gather index reversing each sentence's tokens before its final EOS; EOS and padding stay put.

    "a b c EOS" -> "c b a EOS": the EOS marks the end of the sentence in either order. A sentence without a final
    EOS is reversed entirely."""
    positions = torch.arange(src.size(1), device=src.device).expand_as(src)  # (B, S)
    lengths = src_mask.sum(-1, keepdim=True)  # (B, 1)
    last = src.gather(1, (lengths - 1).clamp(min=0))  # (B, 1) the last real token
    words = lengths - (last == EOS).long()  # (B, 1) tokens to reverse
    return torch.where(positions < words, words - 1 - positions, positions)


def reverse_all_tokens_index(src_mask: Tensor) -> Tensor:
    """(B, S) gather index reversing each sentence's real tokens, EOS included, padding left in place; it is its own
    inverse, so the same index puts outputs read in reverse back in source order."""
    positions = torch.arange(src_mask.size(1), device=src_mask.device).expand_as(src_mask)  # (B, S)
    lengths = src_mask.sum(-1, keepdim=True)  # (B, 1)
    return torch.where(src_mask, lengths - 1 - positions, positions)


def bridge_aligned_at_top(finals: list[LayerState], layers: int) -> list[LayerState]:
    """Decoder layer l starts from encoder layer l + (encoder layers - decoder layers), clamped to the bottom.

    With equal depths this is layer-by-layer transfer. Aligning the tops keeps the top encoder layer, the only one
    that sees every layer below it, in use: with no attention, an encoder layer whose final state reached no
    decoder layer would be trained only through the layers above it.
    """
    offset = len(finals) - layers
    return [finals[max(index + offset, 0)] for index in range(layers)]


def bridge_aligned_at_bottom(finals: list[LayerState], layers: int) -> list[LayerState]:
    """Decoder layer i starts from encoder layer i's final state; layers above the encoder's top reuse its top."""
    return [finals[min(index, len(finals) - 1)] for index in range(layers)]


def init_uniform(modules: tuple[nn.Module, ...], scale: float, embeddings: tuple[nn.Embedding, ...] = ()) -> None:
    """uniform(-scale, scale) for every parameter of `modules`, the initialisation of the RNN papers; the PAD rows of
    `embeddings` (when they are among the modules) are zeroed again."""
    for module in modules:
        for parameter in module.parameters():
            nn.init.uniform_(parameter, -scale, scale)
    with torch.no_grad():
        for embedding in embeddings:
            embedding.weight[embedding.padding_idx].zero_()


class RNNEncoder(nn.Module):
    """Embedding and stacked recurrent layers over a padded batch.

    The lowest `bidirectional_layers` layers read in both directions with hidden/2 units per direction, so
    every layer outputs `hidden` units. Packing keeps padding out of both directions: the real tokens'
    outputs do not depend on how much padding follows them. Layers at 1-based depth >= `residual_from` add their
    input to their output (0: no residual connections).
    """

    def __init__(self, vocab: int, embed_dim: int, hidden: int, layers: int, cell: str = "lstm",
                 bidirectional_layers: int = 0, dropout: float = 0.0, residual_from: int = 0,
                 embedding: nn.Embedding | None = None):
        super().__init__()
        if bidirectional_layers and hidden % 2:
            raise ValueError(f"a bidirectional layer needs an even hidden size, got {hidden}")
        self.embedding = embedding if embedding is not None else nn.Embedding(vocab, embed_dim, padding_idx=0)
        self.layers = nn.ModuleList()
        for index in range(layers):
            both = index < bidirectional_layers
            size = embed_dim if index == 0 else hidden
            self.layers.append(make_rnn(cell, size, hidden // 2 if both else hidden, bidirectional=both))
        self.dropout = Dropout(dropout)
        self.residual_from = residual_from

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, list[LayerState]]:
        """src (B, S), src_mask (B, S) -> outputs (B, S, hidden) (zero on padding), final state of each layer."""
        lengths = src_mask.sum(-1).cpu()
        x = self.dropout(self.embedding(src))  # (B, S, E)
        finals = []
        for depth, layer in enumerate(self.layers, 1):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            output, final = layer(packed)
            output, _ = pad_packed_sequence(output, batch_first=True, total_length=src.size(1))  # (B, S, H)
            finals.append(from_torch_state(final))
            output = self.dropout(output)
            x = output + x if self.residual_from and depth >= self.residual_from else output
        return x, finals


class RNNStack(nn.Module):
    """Unidirectional stacked decoder layers, run over a whole sequence or one step at a time.

    `extra` units (e.g. an attention context) are concatenated to every layer's input when `feed_all` is set,
    else only to the bottom layer's input. Dropout between layers; residual connections from `residual_from` up.
    """

    def __init__(self, input_size: int, hidden: int, layers: int, cell: str = "lstm", dropout: float = 0.0,
                 extra: int = 0, feed_all: bool = False, residual_from: int = 0):
        super().__init__()
        self.layers = nn.ModuleList(
            make_rnn(cell, (input_size if index == 0 else hidden) + (extra if index == 0 or feed_all else 0), hidden)
            for index in range(layers))
        self.dropout = Dropout(dropout)
        self.feed_all, self.residual_from, self.cell = feed_all, residual_from, cell

    def forward(self, x: Tensor, states: list[LayerState], extra: Tensor | None = None,
                ) -> tuple[Tensor, list[LayerState]]:
        """x (B, T, I), extra (B, T, X) or None -> top outputs (B, T, H) and the new states."""
        new_states = []
        for depth, (layer, state) in enumerate(zip(self.layers, states), 1):
            inputs = x if extra is None or (depth > 1 and not self.feed_all) else torch.cat([x, extra], dim=-1)
            output, final = layer(inputs, to_torch_state(state))
            new_states.append(from_torch_state(final))
            output = self.dropout(output) if depth < len(self.layers) else output
            x = output + x if self.residual_from and depth >= self.residual_from else output
        return x, new_states

    def zero_states(self, batch: int, reference: Tensor) -> list[LayerState]:
        """All-zero initial states shaped like `reference`'s device and dtype."""
        hidden = self.layers[0].hidden_size
        zeros = reference.new_zeros(batch, hidden)
        return [(zeros, zeros) if self.cell == "lstm" else (zeros,) for _ in self.layers]
