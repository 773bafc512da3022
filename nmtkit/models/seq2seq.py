"""Sequence to sequence without attention (Sutskever, Vinyals & Le 2014, "Sequence to Sequence Learning with
Neural Networks", arXiv 1409.3215), optionally with the context at every step of Cho et al. 2014 ("Learning
Phrase Representations using RNN Encoder-Decoder", arXiv 1406.1078).

A stacked LSTM (or GRU) encoder reads the source; its final states are the whole summary of the sentence: decoder
layer l starts from encoder layer l's final state, h_0^d = c (Sutskever, Section 2). A bidirectional encoder gives
each layer hidden/2 units per direction and its final state is [forward last; backward first] (`hidden` units).
When the stacks differ in depth they are aligned at the top (see `bridge_aligned_at_top`). p(y_t) = softmax(W h_t).

reverse_source (Sutskever, Section 3.3): the encoder reads the source words in reverse order, "a b c EOS" ->
"c b a EOS"; the final EOS stays last (it marks the end of the sentence in either order) and padding stays at
the end. A source without a final EOS is reversed entirely.

context "every-step" (Cho, Section 2.2 and Appendix A): c = the top encoder layer's final h is also fed to
every decoder step, h_t = g(y_{t-1}, h_{t-1}, c) ([E y_{t-1}; c] is the bottom layer's input), and to the output
layer through Cho's deep output: t = maxout(O_h h_t + O_y E y_{t-1} + O_c c) of embed_dim units, p(y_t) =
softmax(W t). The decoder still starts from the encoder's final states (Cho started from tanh(V' c)).

There is no attention: `step` and `forward` return None for it. Teacher forcing runs the decoder over the whole
target in one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from nmtkit.config.sections import option
from nmtkit.data.subword import PAD
from nmtkit.models.base import EncoderDecoder, Memory, State
from nmtkit.modules.dropout import Dropout
from nmtkit.modules.readout import DeepOutput
from nmtkit.modules.rnn import (
    RNNEncoder,
    RNNStack,
    bridge_aligned_at_top,
    reverse_before_eos_index,
    states_from_dict,
    states_to_dict,
)
from nmtkit.registry import register_model


@dataclass
class Seq2SeqConfig:
    name: str = option("seq2seq", "registered model name")
    cell: Literal["lstm", "gru"] = option("lstm", "recurrent cell (the paper: LSTM)")
    embed_dim: int = option(256, "source and target embedding dimension (the paper: 1000)")
    hidden: int = option(256, "recurrent units per layer (the paper: 1000)")
    encoder_layers: int = option(2, "encoder layers (the paper: 4)")
    decoder_layers: int = option(2, "decoder layers (the paper: 4); stacks of different depth align at the top")
    bidirectional: bool = option(False, "bidirectional encoder layers, hidden/2 units per direction "
                                        "(the paper: unidirectional)")
    reverse_source: bool = option(False, "encoder reads the source words in reverse order, EOS kept last "
                                         "(the paper did, Section 3.3)")
    context: Literal["none", "every-step"] = option(
        "none", "none: decoder sees the source only through its initial state (Sutskever); every-step: the top "
                "encoder state c also enters every decoder step and the deep output layer (Cho et al. 2014)")
    dropout: float = option(0.2, "dropout on embeddings, between layers and before the output (the paper: none)")
    init_scale: float = option(0.08, "uniform(-x, x) initialisation of the recurrent and output weights "
                                     "(the paper: 0.08); embeddings start N(0, 1)")
    share_embeddings: bool = option(False, "one embedding matrix for source and target (joint vocabulary only)")
    tie_output: bool = option(False, "output projection shares the target embedding (context none: needs "
                                     "embed_dim == hidden; every-step: the deep output has embed_dim units)")


@register_model("seq2seq", config=Seq2SeqConfig)
class Seq2Seq(EncoderDecoder):
    """Stacked RNN encoder-decoder; the source reaches the decoder only through the encoder's final states."""

    has_attention = False

    def __init__(self, config: Seq2SeqConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        hidden, embed_dim, every_step = config.hidden, config.embed_dim, config.context == "every-step"
        if config.tie_output and not every_step and embed_dim != hidden:
            raise ValueError(f"tie_output needs embed_dim == hidden (h_t feeds the output layer), "
                             f"got {embed_dim} and {hidden}")
        self.config = config
        self.tgt_embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=PAD)
        share = config.share_embeddings and shared_vocab
        bidirectional_layers = config.encoder_layers if config.bidirectional else 0
        self.encoder = RNNEncoder(src_vocab, embed_dim, hidden, config.encoder_layers, config.cell,
                                  bidirectional_layers, config.dropout, embedding=self.tgt_embed if share else None)
        self.decoder = RNNStack(embed_dim, hidden, config.decoder_layers, config.cell, config.dropout,
                                extra=hidden if every_step else 0)
        self.readout = DeepOutput(hidden, embed_dim, hidden, embed_dim) if every_step else None  # Cho's O_h, O_y, O_c
        self.output = nn.Linear(embed_dim if every_step else hidden, tgt_vocab)
        self.dropout = Dropout(config.dropout)
        self._initialise(config.init_scale)
        if config.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _initialise(self, scale: float) -> None:
        """uniform(-0.08, 0.08) for the recurrent and output weights (Section 3.4). The embeddings keep N(0, 1):
        uniform(-0.08, 0.08) over a few dozen embedding units gives the encoder almost no input (measured on the
        reverse task with 32-unit embeddings: about 0.76 exact match after 900 updates instead of about 0.95)."""
        embeddings = {id(self.tgt_embed.weight), id(self.encoder.embedding.weight)}
        for parameter in self.parameters():
            if id(parameter) not in embeddings:
                nn.init.uniform_(parameter, -scale, scale)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        if self.config.reverse_source:
            src = src.gather(1, reverse_before_eos_index(src, src_mask))
        _, finals = self.encoder(src, src_mask)  # final state of each layer, each part (B, H)
        states = bridge_aligned_at_top(finals, self.config.decoder_layers)
        memory = {"src_mask": src_mask} | states_to_dict(states, prefix="init_")
        if self.readout is not None:
            memory["context"] = finals[-1][0]  # c (B, H): the top encoder layer's final h
        return memory

    def init_state(self, memory: Memory) -> State:
        return {key.removeprefix("init_"): value for key, value in memory.items() if key.startswith("init_")}

    def _decode(self, tgt_in: Tensor, state: State, memory: Memory) -> tuple[Tensor, State]:
        """tgt_in (B, T) -> logits (B, T, V) and the decoder state after the last position."""
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        context = None
        if self.readout is not None:
            context = memory["context"].unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # (B, T, H)
        top, states = self.decoder(embedded, states_from_dict(state, self.config.decoder_layers), context)
        features = top if self.readout is None else self.readout(top, embedded, context)  # (B, T, H or E)
        return self.output(self.dropout(features)), states_to_dict(states)

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, None]:
        logits, state = self._decode(prev.unsqueeze(1), state, memory)
        return F.log_softmax(logits[:, 0].float(), dim=-1), state, None

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, None]:
        memory = self.encode(src, src_mask)
        logits, _ = self._decode(tgt_in, self.init_state(memory), memory)
        return logits, None
