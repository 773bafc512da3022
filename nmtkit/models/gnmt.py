"""GNMT (Wu et al. 2016, "Google's Neural Machine Translation System", arXiv 1609.08144), scaled down.

Encoder (Section 3.2, Figure 3): the bottom layer reads the source in both directions, the layers above it read
left to right. Residual connections (Section 3.1): from the third layer up, each layer's input is added to
its output, x^i_t = m^i_t + x^{i-1}_t, in the encoder and in the decoder.

Decoder (Section 3, Figure 1, Eq. 4): the attention network is a feed-forward net with one hidden layer (our
`additive` score; any registered score may be chosen) queried with the BOTTOM decoder layer's output:
s_t = AttentionFunction(y_{i-1}, x_t), p_t = softmax(s)_t, a_i = sum_t p_t x_t. The context a_i is fed to every
decoder layer at step i, so the bottom layer reads [embedding of y_{i-1}; a_i] and each layer above reads
[output of the layer below; a_i]; the residual adds only the layer-below part. The top layer's output goes to the
softmax. `attention_from` picks which bottom output the upper layers' context comes from:
  previous  the paper's Eq. 4: a_i from the bottom output of step i-1, the same context the bottom layer read
            (TF-NMT "gnmt");
  current   a_{i+1}, from the bottom output of this step (TF-NMT "gnmt_v2"); the bottom layer still reads a_i.
At the first step the query is the bottom layer's initial state. The paper does not pass the encoder state to the
decoder, so every decoder layer starts from zeros.

Differences from the paper, for CPU-sized models: 4+4 layers of 256 units (the paper: 8+8 of 1024), the
bidirectional layer has hidden/2 units per direction so that it outputs `hidden` units, no model parallelism,
quantization or wordpiece model; coverage and length penalties live in nmtkit.decoding.search.
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
from nmtkit.modules.rnn import LayerState, RNNEncoder, RNNStack, init_uniform, states_from_dict, states_to_dict
from nmtkit.registry import register_model


@dataclass
class GNMTConfig:
    name: str = option("gnmt", "registered model name")
    cell: Literal["lstm", "gru"] = option("lstm", "recurrent cell (the paper: LSTM)")
    embed_dim: int = option(256, "source and target embedding dimension")
    hidden: int = option(256, "recurrent units per layer (the paper: 1024)")
    encoder_layers: int = option(4, "encoder layers (the paper: 8)")
    decoder_layers: int = option(4, "decoder layers, at least 2: the attention layer and one above (the paper: 8)")
    bidirectional: bool = option(True, "bidirectional bottom encoder layer (Section 3.2)")
    residual_from: int = option(3, "residual connections from this layer up, encoder and decoder (0 = none, else "
                                   ">= 2; Section 3.1: 3)")
    dropout: float = option(0.2, "dropout on embeddings, between layers and before the softmax")
    attention: str = option("additive", "score: additive (the paper's one-hidden-layer network) or any registered")
    attention_hidden: int = option(0, "hidden size of the additive score (0 = hidden)")
    attention_from: Literal["previous", "current"] = option(
        "previous", "upper layers' context from the bottom output of the previous step (the paper, Eq. 4) or of "
                    "the current step (TF-NMT gnmt_v2)")
    max_positions: int = option(1024, "longest source the location score covers")
    init_scale: float = option(0.0, "uniform(-x, x) initialisation of the recurrent, embedding and output weights "
                                    "(the paper: 0.04); 0 = PyTorch's defaults")
    share_embeddings: bool = option(False, "one embedding matrix for source and target (joint vocabulary only)")
    tie_output: bool = option(False, "output projection shares the target embedding (needs embed_dim == hidden)")


def check_config(config: GNMTConfig) -> None:
    """Raise ValueError for settings the architecture cannot build."""
    if config.decoder_layers < 2:
        raise ValueError(f"gnmt needs decoder_layers >= 2 (the attention layer and one above), "
                         f"got {config.decoder_layers}")
    if config.residual_from == 1 or config.residual_from < 0:
        raise ValueError(f"residual_from must be 0 (none) or >= 2, got {config.residual_from}")
    if config.tie_output and config.embed_dim != config.hidden:
        raise ValueError(f"tie_output needs embed_dim == hidden (the top layer feeds the output layer), "
                         f"got {config.embed_dim} and {config.hidden}")


@register_model("gnmt", config=GNMTConfig)
class GNMT(EncoderDecoder):
    """Residual stacked LSTMs with a bidirectional bottom encoder layer and bottom-layer attention fed to all."""

    def __init__(self, config: GNMTConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        check_config(config)
        self.config = config
        hidden = config.hidden
        self.tgt_embed = nn.Embedding(tgt_vocab, config.embed_dim, padding_idx=PAD)
        share = config.share_embeddings and shared_vocab
        self.encoder = RNNEncoder(src_vocab, config.embed_dim, hidden, config.encoder_layers, config.cell,
                                  int(config.bidirectional), config.dropout, config.residual_from,
                                  embedding=self.tgt_embed if share else None)
        self.attention = Attention(config.attention, hidden, hidden, hidden=config.attention_hidden or None,
                                   max_positions=config.max_positions)
        self.bottom = RNNStack(config.embed_dim, hidden, 1, config.cell, extra=hidden)
        # Depth d of `upper` is decoder layer d + 1, so the paper's third layer is the upper stack's second.
        self.upper = RNNStack(hidden, hidden, config.decoder_layers - 1, config.cell, config.dropout, extra=hidden,
                              feed_all=True, residual_from=max(config.residual_from - 1, 0))
        self.output = nn.Linear(hidden, tgt_vocab)
        self.dropout = Dropout(config.dropout)
        if config.init_scale:
            self._initialise(config.init_scale)
        if config.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _initialise(self, scale: float) -> None:
        """uniform(-scale, scale) as in the paper's training procedure; the score keeps its own initialisation."""
        init_uniform((self.encoder, self.tgt_embed, self.bottom, self.upper, self.output), scale,
                     (self.tgt_embed, self.encoder.embedding))

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        keys, _ = self.encoder(src, src_mask)  # (B, S, H); the final states are not passed on
        return {"src_mask": src_mask, "keys": keys, "prepared": self.attention.prepare(keys)}

    def init_state(self, memory: Memory) -> State:
        batch, keys = memory["src_mask"].size(0), memory["keys"]
        return states_to_dict(self.bottom.zero_states(batch, keys) + self.upper.zero_states(batch, keys))

    def _attend(self, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """Eq. 4: bottom outputs (B, T, H) -> contexts a (B, T, H), weights p (B, T, S)."""
        return self.attention(query, memory["keys"], memory["prepared"], memory["src_mask"])

    def _run_bottom(self, embedded: Tensor, state: LayerState,
                    memory: Memory) -> tuple[Tensor, LayerState, Tensor, Tensor]:
        """The bottom layer, one step at a time because it reads a_i = Attn(y^bottom_{i-1}) at step i.

        embedded (B, T, E) -> bottom outputs (B, T, H), its last state, and the contexts (B, T, H) and weights
        (B, T, S) the upper layers read: a_1 .. a_T (previous) or a_2 .. a_{T+1} (current). In `current` mode a
        decoding step attends twice (a_i for the bottom layer, then a_{i+1}): the State holds only LSTM states.
        """
        query = state[0].unsqueeze(1)  # (B, 1, H): y^bottom_0 is the initial state
        outputs, contexts, weights = [], [], []
        for t in range(embedded.size(1)):
            context, weight = self._attend(query, memory)  # (B, 1, H), (B, 1, S)
            query, [state] = self.bottom(embedded[:, t : t + 1], [state], context)  # (B, 1, H)
            outputs.append(query)
            contexts.append(context)
            weights.append(weight)
        if self.config.attention_from == "current":
            context, weight = self._attend(torch.cat(outputs, dim=1), memory)  # a_2 .. a_{T+1} in one call
            return torch.cat(outputs, dim=1), state, context, weight
        return torch.cat(outputs, dim=1), state, torch.cat(contexts, dim=1), torch.cat(weights, dim=1)

    def _decode(self, tgt_in: Tensor, states: list[LayerState],
                memory: Memory) -> tuple[Tensor, list[LayerState], Tensor]:
        """tgt_in (B, T) -> logits (B, T, V), new per-layer states, attention weights (B, T, S)."""
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        bottom, bottom_state, contexts, weights = self._run_bottom(embedded, states[0], memory)
        top, upper_states = self.upper(self.dropout(bottom), states[1:], contexts)  # (B, T, H)
        return self.output(self.dropout(top)), [bottom_state] + upper_states, weights

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor | None]:
        states = states_from_dict(state, self.config.decoder_layers)
        logits, states, weights = self._decode(prev.unsqueeze(1), states, memory)
        return F.log_softmax(logits[:, -1].float(), dim=-1), states_to_dict(states), weights[:, -1]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        memory = self.encode(src, src_mask)
        states = states_from_dict(self.init_state(memory), self.config.decoder_layers)
        logits, _, weights = self._decode(tgt_in, states, memory)
        return logits, weights if need_attention else None
