"""Luong attention (Luong, Pham & Manning 2015, "Effective Approaches to Attention-based Neural Machine
Translation", arXiv 1508.04025).

A stacked LSTM encoder and decoder (Section 2); the decoder starts from the encoder's final states, layer by layer
(decoder layers above the encoder's top take the top encoder layer's state). At each target step the CURRENT top
decoder state h_t queries the source (Section 3): global attention over every source position (Section 3.1) or
local attention over a window [p_t - D, p_t + D] (Section 3.2), with p_t = t (local-m) or
p_t = S * sigmoid(v_p^T tanh(W_p h_t)) and a Gaussian factor of sigma = D/2 (local-p, Eq. 9-10); the score is
any registered one (Eq. 8: dot, general, concat). The attentional hidden state h~_t = tanh(W_c [c_t; h_t]) (Eq. 5)
gives p(y_t) = softmax(W_s h~_t) (Eq. 6), and input feeding (Section 3.3) concatenates h~_{t-1} to the next
input. Without input feeding, teacher forcing runs the decoder over the whole target at once and attends for
all positions in one call. The encoder may read the source reversed as the paper did (Section 4.1); its outputs are
put back in source order, so attention and local-m's p_t = t still see source positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmtkit.config.sections import option
from nmtkit.data.subword import PAD
from nmtkit.models.base import EncoderDecoder, Memory, State
from nmtkit.modules.attention import Attention
from nmtkit.modules.dropout import Dropout
from nmtkit.modules.rnn import (
    RNNEncoder,
    RNNStack,
    bridge_aligned_at_bottom,
    init_uniform,
    reverse_all_tokens_index,
    states_from_dict,
    states_to_dict,
)
from nmtkit.registry import register_model


@dataclass
class LuongConfig:
    name: str = option("luong", "registered model name")
    cell: Literal["lstm", "gru"] = option("lstm", "recurrent cell (the paper: LSTM)")
    embed_dim: int = option(256, "source and target embedding dimension")
    hidden: int = option(256, "recurrent units per layer; also the size of h~_t")
    encoder_layers: int = option(2, "encoder layers (the paper: 4)")
    decoder_layers: int = option(2, "decoder layers (the paper: 4)")
    bidirectional: bool = option(False, "bidirectional bottom encoder layer (the paper: unidirectional)")
    reverse_source: bool = option(False, "encoder reads each source backwards (the paper did, Section 4.1); "
                                         "attention still sees positions in source order")
    dropout: float = option(0.2, "dropout on embeddings, between layers and on h~_t (the paper: 0.2)")
    attention: str = option("general", "score: dot, general, concat, or any registered score")
    attention_hidden: int = option(0, "hidden size of the concat/additive score (0 = hidden)")
    window: Literal["global", "local-m", "local-p"] = option("global", "global or local attention (Section 3.2)")
    window_width: int = option(10, "local attention window half-width D (the paper: 10)")
    input_feeding: bool = option(True, "feed h~_{t-1} into the next decoder input (Section 3.3)")
    max_positions: int = option(1024, "longest source the location score covers")
    init_scale: float = option(0.1, "uniform(-x, x) initialisation of the recurrent and output layers")
    share_embeddings: bool = option(False, "one embedding matrix for source and target (joint vocabulary only)")
    tie_output: bool = option(False, "output projection shares the target embedding (needs embed_dim == hidden)")


@register_model("luong", config=LuongConfig)
class Luong(EncoderDecoder):
    """Stacked LSTM encoder-decoder with Luong's global or local attention and input feeding."""

    def __init__(self, config: LuongConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        if config.tie_output and config.embed_dim != config.hidden:
            raise ValueError(f"tie_output needs embed_dim == hidden (h~_t feeds the output layer), "
                             f"got {config.embed_dim} and {config.hidden}")
        self.config = config
        self.tgt_embed = nn.Embedding(tgt_vocab, config.embed_dim, padding_idx=PAD)
        share = config.share_embeddings and shared_vocab
        self.encoder = RNNEncoder(src_vocab, config.embed_dim, config.hidden, config.encoder_layers, config.cell,
                                  int(config.bidirectional), config.dropout,
                                  embedding=self.tgt_embed if share else None)
        feed = config.hidden if config.input_feeding else 0
        self.decoder = RNNStack(config.embed_dim, config.hidden, config.decoder_layers, config.cell, config.dropout,
                                extra=feed)
        self.attention = Attention(config.attention, config.hidden, config.hidden, config.window,
                                   config.window_width, config.attention_hidden or None, config.max_positions)
        self.combine = nn.Linear(2 * config.hidden, config.hidden, bias=False)  # W_c (Eq. 5)
        self.output = nn.Linear(config.hidden, tgt_vocab)  # W_s (Eq. 6)
        self.dropout = Dropout(config.dropout)
        self._initialise(config.init_scale)
        if config.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _initialise(self, scale: float) -> None:
        """uniform(-scale, scale), the paper's 0.1 (Section 4.1), for the recurrent and output layers. Embeddings
        keep N(0, 1): uniform(-0.1, 0.1) embeddings left a small model stuck at the unigram loss for 400 Adam updates
        on the reverse task, where N(0, 1) ones learn it. The attention scores keep their own initialisation."""
        init_uniform((self.encoder.layers, self.decoder, self.combine, self.output), scale)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        index = reverse_all_tokens_index(src_mask) if self.config.reverse_source else None
        if index is not None:
            src = src.gather(1, index)
        keys, finals = self.encoder(src, src_mask)  # (B, S, H), per-layer final states
        if index is not None:
            keys = keys.gather(1, index.unsqueeze(-1).expand_as(keys))
        memory = {"src_mask": src_mask, "keys": keys, "prepared": self.attention.prepare(keys)}
        return memory | states_to_dict(bridge_aligned_at_bottom(finals, self.config.decoder_layers), prefix="init_")

    def init_state(self, memory: Memory) -> State:
        state = {key.removeprefix("init_"): value for key, value in memory.items() if key.startswith("init_")}
        batch = memory["src_mask"].size(0)
        state["position"] = torch.zeros(batch, dtype=torch.long, device=memory["src_mask"].device)  # t, local-m
        if self.config.input_feeding:
            state["feed"] = memory["keys"].new_zeros(batch, self.config.hidden)  # h~_0 = 0
        return state

    def _attend(self, top: Tensor, memory: Memory, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Top decoder states h_t (B, T, H) -> attentional states h~_t (B, T, H) (Eq. 5), weights (B, T, S)."""
        context, weights = self.attention(top, memory["keys"], memory["prepared"], memory["src_mask"], positions)
        attentional = torch.tanh(self.combine(torch.cat([context, top], dim=-1)))  # (B, T, H)
        return self.dropout(attentional), weights

    def _decode_step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor]:
        """prev (B,) -> h~_t (B, H), the new state and the attention weights (B, S)."""
        layers = self.config.decoder_layers
        embedded = self.dropout(self.tgt_embed(prev.unsqueeze(1)))  # (B, 1, E)
        feed = state["feed"].unsqueeze(1) if self.config.input_feeding else None  # (B, 1, H)
        top, states = self.decoder(embedded, states_from_dict(state, layers), feed)  # (B, 1, H)
        attentional, weights = self._attend(top, memory, state["position"].unsqueeze(1))
        new_state = states_to_dict(states) | {"position": state["position"] + 1}
        if self.config.input_feeding:
            new_state["feed"] = attentional[:, 0]
        return attentional[:, 0], new_state, weights[:, 0]

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor | None]:
        attentional, state, weights = self._decode_step(prev, state, memory)
        return F.log_softmax(self.output(attentional).float(), dim=-1), state, weights

    def _teacher_forced(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """h~_t (B, T, H) and weights (B, T, S) for every target position."""
        state = self.init_state(memory)
        if self.config.input_feeding:  # h~_{t-1} is an input of step t: one step at a time
            outputs, weights = [], []
            for t in range(tgt_in.size(1)):
                attentional, state, step_weights = self._decode_step(tgt_in[:, t], state, memory)
                outputs.append(attentional)
                weights.append(step_weights)
            return torch.stack(outputs, dim=1), torch.stack(weights, dim=1)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        top, _ = self.decoder(embedded, states_from_dict(state, self.config.decoder_layers))  # (B, T, H)
        positions = torch.arange(tgt_in.size(1), device=tgt_in.device).expand_as(tgt_in)  # (B, T)
        return self._attend(top, memory, positions)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        memory = self.encode(src, src_mask)
        attentional, weights = self._teacher_forced(tgt_in, memory)
        return self.output(attentional), weights if need_attention else None
