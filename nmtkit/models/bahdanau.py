"""RNNsearch (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by Jointly Learning to Align and
Translate", arXiv 1409.0473).

Encoder (Section 3.2): a bidirectional RNN; the annotation of source word j is h_j = [->h_j; <-h_j], hidden/2
units per direction (stacked layers are allowed; the annotations are the top layer's outputs).
Decoder (Section 3.1, Appendix A.2.2), at target step i:
    e_ij  = a(s_{i-1}, h_j) = v_a^T tanh(W_a s_{i-1} + U_a h_j)      alignment model, from the PREVIOUS state (Eq. 6)
    a_ij  = softmax_j(e_ij),   c_i = sum_j a_ij h_j                  (Eq. 5-6)
    s_i   = f(s_{i-1}, y_{i-1}, c_i)                                 the RNN reads [E y_{i-1}; c_i] (Eq. 4)
    t~_i  = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i,  t_i = maxout_2(t~_i),  p(y_i) = softmax(W_o t_i)   (A.2.2)
    s_0   = tanh(W_s <-h_1)                                          (A.2.2)
The readout follows the appendix and reads s_{i-1}, the state the attention query also uses; `readout: linear`
drops the maxout (t_i = t~_i, a bottleneck of embed_dim units). U_a h_j does not depend on i and is computed once
per sentence (`Attention.prepare`, kept in Memory); any registered score can replace the additive one (`attention:
cosine`, `dot`, ...: keys and queries both have `hidden` units).

<-h_1, the backward RNN's state after reading the whole sentence back to its first word, is the second half of the
top encoder layer's final state (RNNEncoder returns [forward last; backward first]); with a unidirectional encoder
s_0 = tanh(W_s h_{T_x}) instead. With several decoder layers each gets its own W_s, the context enters the bottom
layer and the top layer's previous state is the attention query and the readout's state. An LSTM decoder starts
from c_0 = 0 (the paper's GRU has no memory cell). PyTorch's GRU applies the reset gate after the recurrent matrix
product (r * (U s) rather than U (r * s) as in A.2.2); weights are initialised uniformly instead of the paper's
orthogonal and Gaussian initialisation.

Since the query is s_{i-1}, teacher forcing still runs the RNN one step at a time; the loop holds only the
attention and the RNN step: the embeddings are looked up and the readout and output layer applied to all
positions at once.
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
from nmtkit.modules.readout import DeepOutput
from nmtkit.modules.rnn import LayerState, RNNEncoder, RNNStack, init_uniform, states_from_dict, states_to_dict
from nmtkit.registry import register_model


@dataclass
class BahdanauConfig:
    name: str = option("bahdanau", "registered model name")
    cell: Literal["lstm", "gru"] = option("gru", "recurrent cell (the paper: gated units, i.e. GRU)")
    embed_dim: int = option(256, "source and target embedding dimension; also the readout size (the paper: 620)")
    hidden: int = option(256, "decoder units and annotation size, hidden/2 per encoder direction "
                               "(the paper: 1000 per direction)")
    encoder_layers: int = option(1, "encoder layers (the paper: 1)")
    decoder_layers: int = option(1, "decoder layers (the paper: 1); the top one queries the attention")
    bidirectional: bool = option(True, "bidirectional encoder layers (the paper: yes)")
    dropout: float = option(0.2, "dropout on embeddings, between layers and on the readout (the paper: none)")
    attention: str = option("additive", "score: additive (the paper), or any registered score")
    attention_hidden: int = option(0, "hidden size of the additive score, n' in the paper (0 = hidden)")
    readout: Literal["maxout", "linear"] = option("maxout", "deep output: maxout of 2 pieces (the paper) or linear")
    max_positions: int = option(1024, "longest source the location score covers")
    init_scale: float = option(0.1, "uniform(-x, x) initialisation of the weights (the attention score keeps its own)")
    share_embeddings: bool = option(False, "one embedding matrix for source and target (joint vocabulary only)")
    tie_output: bool = option(False, "output projection W_o shares the target embedding")


@register_model("bahdanau", config=BahdanauConfig)
class Bahdanau(EncoderDecoder):
    """Bidirectional RNN encoder, additive attention queried by the previous decoder state, deep maxout output."""

    def __init__(self, config: BahdanauConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        self.config = config
        hidden, embed_dim = config.hidden, config.embed_dim
        self.tgt_embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=PAD)
        share = config.share_embeddings and shared_vocab
        bidirectional_layers = config.encoder_layers if config.bidirectional else 0
        self.encoder = RNNEncoder(src_vocab, embed_dim, hidden, config.encoder_layers, config.cell,
                                  bidirectional_layers, config.dropout, embedding=self.tgt_embed if share else None)
        summary = hidden // 2 if config.bidirectional else hidden
        self.init_proj = nn.Linear(summary, hidden * config.decoder_layers)  # W_s of every decoder layer
        self.attention = Attention(config.attention, hidden, hidden, hidden=config.attention_hidden or None,
                                   max_positions=config.max_positions)
        self.decoder = RNNStack(embed_dim, hidden, config.decoder_layers, config.cell, config.dropout, extra=hidden)
        self.readout = DeepOutput(hidden, embed_dim, hidden, embed_dim, config.readout)  # U_o, V_o, C_o
        self.output = nn.Linear(embed_dim, tgt_vocab)  # W_o
        self.dropout = Dropout(config.dropout)
        self._initialise(config.init_scale)
        if config.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _initialise(self, scale: float) -> None:
        """uniform(-x, x) for every weight but the attention score's, which keeps its own initialisation."""
        init_uniform((self.encoder, self.tgt_embed, self.init_proj, self.decoder, self.readout, self.output), scale,
                     (self.tgt_embed, self.encoder.embedding))

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        annotations, finals = self.encoder(src, src_mask)  # h_j (B, S, H); final state of each layer
        top = finals[-1][0]  # (B, H): [->h_{T_x}; <-h_1] when bidirectional
        summary = top[:, self.config.hidden // 2:] if self.config.bidirectional else top  # <-h_1 or h_{T_x}
        return {"src_mask": src_mask, "annotations": annotations, "summary": summary,
                "keys": self.attention.prepare(annotations)}  # U_a h_j (B, S, A), once per sentence

    def init_state(self, memory: Memory) -> State:
        initial = torch.tanh(self.init_proj(memory["summary"]))  # s_0 of every layer (B, L * H)
        states = [(h, torch.zeros_like(h)) if self.config.cell == "lstm" else (h,)
                  for h in initial.chunk(self.config.decoder_layers, dim=-1)]
        return states_to_dict(states)

    def _advance(self, embedded: Tensor, states: list[LayerState], memory: Memory,
                 ) -> tuple[Tensor, Tensor, list[LayerState]]:
        """One decoder step: E y_{i-1} (B, 1, E) and s_{i-1} -> c_i (B, 1, H), a_i (B, 1, S) and s_i."""
        query = states[-1][0].unsqueeze(1)  # s_{i-1} of the top layer (B, 1, H)
        context, weights = self.attention(query, memory["annotations"], memory["keys"], memory["src_mask"])
        _, states = self.decoder(embedded, states, context)  # s_i = f(s_{i-1}, y_{i-1}, c_i)
        return context, weights, states

    def _logits(self, previous: Tensor, embedded: Tensor, context: Tensor) -> Tensor:
        """s_{i-1} (B, T, H), E y_{i-1} (B, T, E), c_i (B, T, H) -> logits (B, T, V) (Appendix A.2.2)."""
        return self.output(self.dropout(self.readout(previous, embedded, context)))

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor]:
        states = states_from_dict(state, self.config.decoder_layers)
        previous = states[-1][0].unsqueeze(1)  # s_{i-1} (B, 1, H)
        embedded = self.dropout(self.tgt_embed(prev.unsqueeze(1)))  # (B, 1, E)
        context, weights, states = self._advance(embedded, states, memory)
        logits = self._logits(previous, embedded, context)  # (B, 1, V)
        return F.log_softmax(logits[:, 0].float(), dim=-1), states_to_dict(states), weights[:, 0]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        memory = self.encode(src, src_mask)
        states = states_from_dict(self.init_state(memory), self.config.decoder_layers)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E), all steps at once
        previous, contexts, weights = [], [], []
        for i in range(tgt_in.size(1)):
            previous.append(states[-1][0])  # s_{i-1} (B, H)
            context, step_weights, states = self._advance(embedded[:, i : i + 1], states, memory)
            contexts.append(context)
            weights.append(step_weights)
        logits = self._logits(torch.stack(previous, dim=1), embedded, torch.cat(contexts, dim=1))  # (B, T, V)
        return logits, torch.cat(weights, dim=1) if need_attention else None
