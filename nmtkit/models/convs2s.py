"""ConvS2S (Gehring et al. 2017, "Convolutional Sequence to Sequence Learning", arXiv 1705.03122).

Token plus learned position embeddings (Section 3.1); blocks of a convolution, a gated linear unit and a residual
connection scaled by sqrt(0.5) (Sections 3.2, 3.4); causal convolutions in the decoder; multi-step attention in
every decoder block with the encoder outputs z_j as keys and (z_j + e_j) * sqrt(0.5) as values (Section 3.3, with
fairseq's scaling); the encoder's gradients scaled by 1 / (2 * decoder blocks) and weights initialised to keep
activation variance (Sections 3.4, 3.5), as in fairseq's `fconv.py`. Weight normalization (Salimans & Kingma 2016)
is optional and on by default.

Incremental decoding keeps, per decoder block, the last k - 1 inputs of its convolution in State (zeros before
the first token, which is what the causal left padding gives), so `step` reproduces `forward` exactly.
Padding positions are zeroed before every encoder convolution, so padding never changes a sentence's outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

from nmtkit.config.sections import option
from nmtkit.data.subword import PAD
from nmtkit.errors import NmtkitError
from nmtkit.models.base import AttentionChoice, EncoderDecoder, Memory, State, check_layer
from nmtkit.modules.attention import masked_softmax
from nmtkit.modules.dropout import Dropout
from nmtkit.modules.embeddings import PositionEmbedding
from nmtkit.registry import register_model

SQRT_HALF = math.sqrt(0.5)


@dataclass
class ConvS2SConfig:
    name: str = option("convs2s", "registered model name")
    embed_dim: int = option(256, "token and position embedding dimension; attention scores are taken in it")
    hidden: int = option(256, "convolution channels (the width of every block's GLU output)")
    encoder_layers: int = option(4, "encoder convolution blocks")
    decoder_layers: int = option(3, "decoder convolution blocks, each with its own attention")
    encoder_kernel: int = option(3, "encoder convolution width")
    decoder_kernel: int = option(3, "decoder (causal) convolution width")
    out_embed_dim: int = option(256, "width of the layer before the output projection")
    dropout: float = option(0.1, "dropout on embeddings, convolution inputs and before the output projection")
    max_positions: int = option(1024, "longest sequence the learned position embeddings cover")
    weight_norm: bool = option(True, "weight normalization of convolutions and linear layers")
    share_embeddings: bool = option(False, "one embedding matrix for source and target (joint vocabulary only)")
    tie_output: bool = option(False, "output projection shares the target embedding (out_embed_dim == embed_dim)")


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        return grad * ctx.scale, None


def scale_gradient(x: Tensor, scale: float) -> Tensor:
    """Identity forward; multiplies the gradient by `scale` on the way back (Section 3.4)."""
    return _ScaleGradient.apply(x, scale)


def multi_step_attention(query: Tensor, keys: Tensor, values: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
    """a_ij = softmax_j(d_i . z_j) over the real source tokens, c_i = sum_j a_ij v_j (Section 3.3), scaled by
    m * sqrt(1/m) for m real source tokens (Section 3.4). query (B, T, E), keys/values (B, S, E), src_mask (B, S)."""
    weights = masked_softmax(query @ keys.transpose(1, 2), src_mask.unsqueeze(1))  # (B, T, S)
    lengths = src_mask.sum(dim=1).to(values.dtype).view(-1, 1, 1)  # (B, 1, 1)
    return (weights @ values) * lengths.sqrt(), weights  # (B, T, E), (B, T, S)


def linear(in_features: int, out_features: int, dropout: float, normalize: bool) -> nn.Module:
    """Linear layer drawn from N(0, (1 - p) / n_in), keeping the variance of inputs dropped with p (Section 3.5)."""
    layer = nn.Linear(in_features, out_features)
    nn.init.normal_(layer.weight, 0.0, math.sqrt((1.0 - dropout) / in_features))
    nn.init.zeros_(layer.bias)
    return weight_norm(layer) if normalize else layer


def glu_convolution(channels: int, kernel: int, dropout: float, normalize: bool) -> nn.Module:
    """Conv1d to 2 * channels for a GLU, drawn from N(0, 4 (1 - p) / (k n_in)) (Section 3.5); unpadded."""
    conv = nn.Conv1d(channels, 2 * channels, kernel)
    nn.init.normal_(conv.weight, 0.0, math.sqrt(4.0 * (1.0 - dropout) / (kernel * channels)))
    nn.init.zeros_(conv.bias)
    return weight_norm(conv) if normalize else conv


def embedding(vocab_size: int, dim: int) -> nn.Embedding:
    """Unscaled embedding drawn from N(0, 0.1^2), PAD row zero (Section 3.5)."""
    table = nn.Embedding(vocab_size, dim, padding_idx=PAD)
    nn.init.normal_(table.weight, 0.0, 0.1)
    with torch.no_grad():
        table.weight[PAD].zero_()
    return table


class EncoderBlock(nn.Module):
    """Convolution (centred, zero padded) -> GLU -> residual, the sum scaled by sqrt(0.5) (Section 3.2)."""

    def __init__(self, config: ConvS2SConfig):
        super().__init__()
        kernel = config.encoder_kernel
        self.conv = glu_convolution(config.hidden, kernel, config.dropout, config.weight_norm)
        self.padding = ((kernel - 1) // 2, kernel // 2)
        self.dropout = Dropout(config.dropout)

    def forward(self, x: Tensor, pad_mask: Tensor) -> Tensor:
        """x (B, S, H); pad_mask (B, S, 1) True on padding, zeroed so it looks like the convolution's padding."""
        inputs = self.dropout(x.masked_fill(pad_mask, 0.0)).transpose(1, 2)  # (B, H, S)
        out = F.glu(self.conv(F.pad(inputs, self.padding)), dim=1).transpose(1, 2)  # (B, S, H)
        return (out + x) * SQRT_HALF


class DecoderBlock(nn.Module):
    """Causal convolution -> GLU -> multi-step attention -> residual (Sections 3.2, 3.3)."""

    def __init__(self, config: ConvS2SConfig):
        super().__init__()
        normalize = config.weight_norm
        self.conv = glu_convolution(config.hidden, config.decoder_kernel, config.dropout, normalize)
        self.attention_in = linear(config.hidden, config.embed_dim, 0.0, normalize)  # W_d, b_d
        self.attention_out = linear(config.embed_dim, config.hidden, 0.0, normalize)
        self.dropout = Dropout(config.dropout)

    def forward(self, x: Tensor, history: Tensor, target_embedding: Tensor,
                memory: Memory) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, H) block inputs; history (B, k-1, H) the convolution inputs before them; target_embedding
        g (B, T, E). Returns the block output (B, T, H), the new history and attention weights (B, T, S)."""
        inputs = torch.cat([history, self.dropout(x)], dim=1)  # (B, k-1+T, H)
        h = F.glu(self.conv(inputs.transpose(1, 2)), dim=1).transpose(1, 2)  # (B, T, H)
        query = (self.attention_in(h) + target_embedding) * SQRT_HALF  # d_i (B, T, E)
        context, weights = multi_step_attention(query, memory["keys"], memory["values"], memory["src_mask"])
        h = (self.attention_out(context) + h) * SQRT_HALF
        return (h + x) * SQRT_HALF, inputs[:, inputs.size(1) - history.size(1):], weights


@register_model("convs2s", config=ConvS2SConfig)
class ConvS2S(EncoderDecoder):
    """Convolutional encoder-decoder; attention returned is the average over the decoder blocks (as fairseq), or
    one block's when `select_attention` chose a layer (for word alignment)."""

    def __init__(self, config: ConvS2SConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        if config.decoder_layers < 1:
            raise ValueError("convs2s needs at least one decoder layer")
        if config.tie_output and config.out_embed_dim != config.embed_dim:
            raise ValueError(f"tie_output needs out_embed_dim ({config.out_embed_dim}) == embed_dim "
                             f"({config.embed_dim})")
        self.config = config
        dropout, normalize = config.dropout, config.weight_norm
        self.tgt_embed = embedding(tgt_vocab, config.embed_dim)
        share = config.share_embeddings and shared_vocab
        self.src_embed = self.tgt_embed if share else embedding(src_vocab, config.embed_dim)
        self.src_positions = PositionEmbedding(config.embed_dim, config.max_positions, "learned")
        self.tgt_positions = PositionEmbedding(config.embed_dim, config.max_positions, "learned")
        for positions in (self.src_positions, self.tgt_positions):
            nn.init.normal_(positions.table, 0.0, 0.1)
        self.dropout = Dropout(dropout)
        self.encoder_in = linear(config.embed_dim, config.hidden, dropout, normalize)
        self.encoder = nn.ModuleList(EncoderBlock(config) for _ in range(config.encoder_layers))
        self.encoder_out = linear(config.hidden, config.embed_dim, 0.0, normalize)
        self.decoder_in = linear(config.embed_dim, config.hidden, dropout, normalize)
        self.decoder = nn.ModuleList(DecoderBlock(config) for _ in range(config.decoder_layers))
        self.decoder_out = linear(config.hidden, config.out_embed_dim, 0.0, normalize)
        if config.tie_output:
            self.output = nn.Linear(config.out_embed_dim, tgt_vocab)
            self.output.weight = self.tgt_embed.weight
            nn.init.zeros_(self.output.bias)
        else:
            self.output = linear(config.out_embed_dim, tgt_vocab, dropout, normalize)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        embedded = self.dropout(self.src_positions(self.src_embed(src)))  # e (B, S, E)
        pad_mask = ~src_mask.unsqueeze(2)  # (B, S, 1)
        x = self.encoder_in(embedded)  # (B, S, H)
        for block in self.encoder:
            x = block(x, pad_mask)
        keys = self.encoder_out(x).masked_fill(pad_mask, 0.0)  # z (B, S, E)
        keys = scale_gradient(keys, 1.0 / (2.0 * len(self.decoder)))
        return {"src_mask": src_mask, "keys": keys, "values": (keys + embedded) * SQRT_HALF}

    def _decode(self, tgt_in: Tensor, offset: int, histories: list[Tensor] | None,
                memory: Memory) -> tuple[Tensor, list[Tensor], Tensor]:
        """tgt_in (B, T) from position `offset` -> logits (B, T, V), new histories, mean attention (B, T, S).
        No histories means the start of the sentence: zeros, the causal convolutions' left padding."""
        embedded = self.dropout(self.tgt_positions(self.tgt_embed(tgt_in), offset))  # g (B, T, E)
        x = self.decoder_in(embedded)  # (B, T, H)
        if histories is None:
            histories = [x.new_zeros(x.size(0), self.config.decoder_kernel - 1, x.size(2))] * len(self.decoder)
        new_histories, blocks_weights = [], []
        for block, history in zip(self.decoder, histories):
            x, history, weights = block(x, history, embedded, memory)
            new_histories.append(history)
            blocks_weights.append(weights)
        logits = self.output(self.dropout(self.decoder_out(x)))  # (B, T, V)
        if self.attention_choice.layer is not None:
            return logits, new_histories, blocks_weights[self.attention_choice.layer]
        return logits, new_histories, torch.stack(blocks_weights).mean(dim=0)

    def select_attention(self, layer: int | None, head: int | None) -> None:
        """A decoder block (one attention each, no heads); without one, the average over the blocks."""
        check_layer(layer, len(self.decoder))
        if head is not None:
            raise NmtkitError(f"{type(self).__name__} has no attention heads; --head does not apply to it")
        self.attention_choice = AttentionChoice(layer, None)

    def checkpoint_layers(self) -> list[nn.Module]:
        return [*self.encoder, *self.decoder]

    def init_state(self, memory: Memory) -> State:
        keys = memory["keys"]
        history = keys.new_zeros(keys.size(0), self.config.decoder_kernel - 1, self.config.hidden)
        state = {f"history{index}": history for index in range(len(self.decoder))}
        state["position"] = torch.zeros(keys.size(0), dtype=torch.long, device=keys.device)
        return state

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor | None]:
        histories = [state[f"history{index}"] for index in range(len(self.decoder))]
        offset = int(state["position"][0])  # all rows decode in lockstep
        logits, histories, attention = self._decode(prev.unsqueeze(1), offset, histories, memory)
        new_state = {f"history{index}": history for index, history in enumerate(histories)}
        new_state["position"] = state["position"] + 1
        return F.log_softmax(logits[:, -1].float(), dim=-1), new_state, attention[:, -1]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        logits, _, attention = self._decode(tgt_in, 0, None, self.encode(src, src_mask))
        return logits, attention if need_attention else None
