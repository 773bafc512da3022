"""The Transformer (Vaswani et al. 2017, "Attention Is All You Need", arXiv 1706.03762).

Encoder and decoder stacks of multi-head attention and position-wise feed-forward layers (Section 3.1),
pre-norm (Wang et al. 2019, the default: trains stably without a long warmup) or post-norm as in the paper.
Incremental decoding caches each decoder layer's self-attention keys/values in State; the cross-attention
keys/values are projected once from the encoder output and kept in Memory.

The options after `tie_output` describe models trained elsewhere and imported (`nmtkit.pretrained`: OPUS-MT's
Marian, M2M100 and NLLB-200); their defaults are nmtkit's own Transformer, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmtkit.config.sections import option
from nmtkit.data.subword import EOS, PAD
from nmtkit.errors import NmtkitError
from nmtkit.models.base import AttentionChoice, EncoderDecoder, Memory, State, check_layer
from nmtkit.modules.attention import MultiHeadAttention
from nmtkit.modules.dropout import Dropout
from nmtkit.modules.embeddings import PositionEmbedding, TokenEmbedding
from nmtkit.registry import register_model


@dataclass
class TransformerConfig:
    name: str = option("transformer", "registered model name")
    encoder_layers: int = option(3, "encoder layers")
    decoder_layers: int = option(3, "decoder layers")
    d_model: int = option(256, "model (embedding) dimension")
    heads: int = option(4, "attention heads")
    ffn: int = option(1024, "feed-forward inner dimension")
    dropout: float = option(0.1, "dropout on embeddings and sub-layer outputs")
    attention_dropout: float = option(0.0, "dropout on attention weights")
    activation_dropout: float = option(0.0, "dropout on the feed-forward layer's activations (fairseq's "
                                            "activation_dropout, the same default); -1 = dropout's value")
    activation: Literal["relu", "gelu", "silu", "reglu", "geglu", "swiglu"] = option(
        "gelu", "feed-forward activation (silu: Marian's swish); reglu, geglu and swiglu are gated linear units "
        "(Shazeer 2020): "
        "act(x W) * (x V), W and V both d_model x ffn, so 1.5x the feed-forward weights of the same ffn ungated")
    norm: Literal["pre", "post"] = option("pre", "layer norm before (pre) or after (post) each sub-layer")
    positions: Literal["sinusoidal", "learned", "sinusoidal_split", "sinusoidal_t2t"] = option(
        "sinusoidal", "position embeddings: sinusoidal (sin on even, cos on odd dimensions), learned, or the layouts "
        "of imported models: sinusoidal_split (Marian: sines in the first half, cosines in the second) and "
        "sinusoidal_t2t (tensor2tensor/fairseq/M2M100)")
    max_positions: int = option(1024, "longest sequence the position embeddings cover")
    share_embeddings: bool = option(True, "one embedding matrix for source and target (joint vocabulary only)")
    tie_output: bool = option(True, "output projection shares the target embedding matrix")
    scale_embeddings: bool = option(True, "multiply token embeddings by sqrt(d_model) (Section 3.4)")
    position_offset: int = option(0, "first row of the sinusoidal table used (M2M100/NLLB: 2)", 0, 1 << 16)
    output_bias: bool = option(False, "add a fixed bias to the output logits (Marian's final_logits_bias; a buffer "
                                      "kept in the checkpoint, not trained)")
    suppress_pad: bool = option(False, "search never proposes the padding token (Marian's bad_words_ids); the "
                                       "log-probabilities are normalised with it, as transformers' generate does")
    language_tags: Literal["source", "decoder"] = option(
        "source", "where a multilingual model reads the target-language tag: source (first source token, Johnson et "
        "al. 2017), or decoder (M2M100/NLLB: the decoder reads EOS then the tag before the target, and the encoder "
        "reads source_token where the tag was)")
    source_token: int = option(-1, "with language_tags=decoder: the token the encoder reads in the tag's place "
                                   "(NLLB/M2M100: the source-language token)", -1)


class Sublayer(nn.Module):
    """Residual connection around a sub-layer with layer norm before (pre) or after (post) it."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), Dropout(dropout), pre_norm

    def forward(self, x: Tensor, fn) -> tuple[Tensor, Tensor | None]:
        out, weights = fn(self.norm(x) if self.pre_norm else x)
        x = x + self.dropout(out)
        return (x if self.pre_norm else self.norm(x)), weights


GATED = {"reglu": F.relu, "geglu": F.gelu, "swiglu": F.silu}  # gated linear units: the activation of x W
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2 (Section 3.3), or gated: (act(x W1 + b1) * (x V + c)) W2 + b2."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.gated = config.activation in GATED
        width = 2 * config.ffn if self.gated else config.ffn  # gated: W's outputs, then V's
        self.inner, self.outer = nn.Linear(config.d_model, width), nn.Linear(config.ffn, config.d_model)
        self.activation = GATED.get(config.activation) or ACTIVATIONS[config.activation]
        self.dropout = Dropout(config.dropout if config.activation_dropout < 0 else config.activation_dropout)

    def forward(self, x: Tensor) -> tuple[Tensor, None]:
        hidden = self.inner(x)
        if self.gated:
            hidden, gate = hidden.chunk(2, dim=-1)
            return self.outer(self.dropout(self.activation(hidden) * gate)), None
        return self.outer(self.dropout(self.activation(hidden))), None


class EncoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        pre = config.norm == "pre"
        self.attention = MultiHeadAttention(config.d_model, config.heads, config.attention_dropout)
        self.feed_forward = FeedForward(config)
        self.attention_block = Sublayer(config.d_model, config.dropout, pre)
        self.feed_forward_block = Sublayer(config.d_model, config.dropout, pre)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        def attend(h: Tensor):
            return self.attention(h, *self.attention.project_kv(h), mask=mask)

        x, _ = self.attention_block(x, attend)
        return self.feed_forward_block(x, self.feed_forward)[0]


class DecoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        pre = config.norm == "pre"
        self.self_attention = MultiHeadAttention(config.d_model, config.heads, config.attention_dropout)
        self.cross_attention = MultiHeadAttention(config.d_model, config.heads, config.attention_dropout)
        self.feed_forward = FeedForward(config)
        self.blocks = nn.ModuleList(Sublayer(config.d_model, config.dropout, pre) for _ in range(3))

    def forward(self, x: Tensor, cross_kv: tuple[Tensor, Tensor], src_mask: Tensor,
                cache: tuple[Tensor, Tensor] | None = None, need_weights: bool = False):
        """x (B, T, D); cache holds past self-attention keys/values (B, H, t, dh) when decoding step by step."""
        new_cache = None

        def self_attend(h: Tensor):
            nonlocal new_cache
            key, value = self.self_attention.project_kv(h)
            if cache is not None:
                key, value = torch.cat([cache[0], key], dim=2), torch.cat([cache[1], value], dim=2)
                new_cache = (key, value)
            return self.self_attention(h, key, value, causal=True)

        def cross_attend(h: Tensor):
            if h.size(0) > cross_kv[0].size(0):  # beams sharing their sentence's memory (see `beam_memory`)
                return self.cross_attention.grouped(h, *cross_kv, mask=src_mask.unsqueeze(1), need_weights=need_weights)
            return self.cross_attention(h, *cross_kv, mask=src_mask.unsqueeze(1), need_weights=need_weights)

        x, _ = self.blocks[0](x, self_attend)
        x, weights = self.blocks[1](x, cross_attend)
        x, _ = self.blocks[2](x, self.feed_forward)
        return x, new_cache, weights


@register_model("transformer", config=TransformerConfig)
class Transformer(EncoderDecoder):
    """Encoder-decoder Transformer; attention returned is the last decoder layer's, averaged over heads, unless
    `select_attention` chose another layer or one head (for word alignment; it changes no output but attention).
    """

    def __init__(self, config: TransformerConfig, src_vocab: int, tgt_vocab: int, shared_vocab: bool):
        super().__init__()
        check_variant(config, src_vocab)
        self.config = config
        self.tgt_embed = TokenEmbedding(tgt_vocab, config.d_model, config.scale_embeddings)
        share = config.share_embeddings and shared_vocab
        self.src_embed = self.tgt_embed if share else TokenEmbedding(src_vocab, config.d_model, config.scale_embeddings)
        self.positions = PositionEmbedding(config.d_model, config.max_positions, config.positions,
                                           config.position_offset)
        self.dropout = Dropout(config.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        pre = config.norm == "pre"
        self.encoder_norm = nn.LayerNorm(config.d_model) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(config.d_model) if pre else nn.Identity()
        self.output = nn.Linear(config.d_model, tgt_vocab, bias=False)
        if config.tie_output:
            self.output.weight = self.tgt_embed.weight
        if config.output_bias:
            self.register_buffer("logits_bias", torch.zeros(tgt_vocab))
        self.decoder_tags = config.language_tags == "decoder"

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        memory = {"src_mask": src_mask}
        if self.decoder_tags:  # the target-language tag moves to the decoder; the source token takes its place
            memory["tag"] = src[:, 0]  # (B,)
            src = torch.cat([torch.full_like(src[:, :1], self.config.source_token), src[:, 1:]], dim=1)
        x = self.dropout(self.positions(self.src_embed(src)))  # (B, S, D)
        for layer in self.encoder:
            x = layer(x, src_mask.unsqueeze(1))
        x = self.encoder_norm(x)
        for index, layer in enumerate(self.decoder):
            memory[f"cross_k{index}"], memory[f"cross_v{index}"] = layer.cross_attention.project_kv(x)
        return memory

    def _decode(self, x: Tensor, memory: Memory, state: State | None, need_weights: bool):
        new_state, weights = {}, None
        layer = self.attention_choice.layer
        chosen = (-1 if layer is None else layer) % len(self.decoder)
        for index, layer in enumerate(self.decoder):
            cache = None if state is None else (state[f"self_k{index}"], state[f"self_v{index}"])
            cross_kv = (memory[f"cross_k{index}"], memory[f"cross_v{index}"])
            x, cache, layer_weights = layer(x, cross_kv, memory["src_mask"], cache, need_weights and index == chosen)
            weights = layer_weights if index == chosen else weights
            if cache is not None:
                new_state[f"self_k{index}"], new_state[f"self_v{index}"] = cache
        logits = self.output(self.decoder_norm(x))  # (B, T, V)
        if self.config.output_bias:
            logits = logits + self.logits_bias
        return logits, new_state, None if weights is None else self._heads(weights)

    def _heads(self, weights: Tensor) -> Tensor:
        """(B, H, T, S) -> (B, T, S): the chosen head, or the mean over heads."""
        head = self.attention_choice.head
        return weights.mean(dim=1) if head is None else weights[:, head]

    def select_attention(self, layer: int | None, head: int | None) -> None:
        """Without a layer, a Transformer of two or more decoder layers aligns with its second last: on the Bible
        test set it aligns best (benchmarks/align_aer.py), as Garg et al. (2019, Section 4.2) found for the
        penultimate layer. Without a head, the mean over heads."""
        layers, heads = len(self.decoder), self.config.heads
        check_layer(layer, layers)
        if head is not None and not 0 <= head < heads:
            raise NmtkitError(f"--head {head} is out of range; the model has {heads} heads (0..{heads - 1})")
        self.attention_choice = AttentionChoice(layer if layer is not None else -2 if layers >= 2 else -1, head)

    def checkpoint_layers(self) -> list[nn.Module]:
        return [*self.encoder, *self.decoder]

    def beam_memory(self, memory: Memory, beam: int) -> Memory:
        """Beams read their sentence's memory in place: one step's `beam` rows per sentence are attention queries
        of one row (MultiHeadAttention.grouped), so the encoder output is neither copied nor read once per beam."""
        return memory

    def max_length(self) -> int | None:
        """With the tag in the decoder, EOS takes the decoder's first position."""
        positions = self.config.max_positions
        return positions - 1 if self.decoder_tags else positions

    def init_state(self, memory: Memory) -> State:
        """Empty caches; with the tag in the decoder, the caches of EOS, which M2M100's decoder reads first (its
        decoder_start_token_id), and the tag that `step` reads next."""
        batch, device = memory["src_mask"].size(0), memory["src_mask"].device
        heads, head_dim = self.config.heads, self.config.d_model // self.config.heads
        empty = torch.zeros(batch, heads, 0, head_dim, device=device, dtype=memory["cross_k0"].dtype)
        state = {f"self_{kind}{index}": empty for index in range(len(self.decoder)) for kind in "kv"}
        if not self.decoder_tags:
            return state
        eos = torch.full_like(memory["tag"], EOS).unsqueeze(1)  # (B, 1)
        _, state, _ = self._decode(self.dropout(self.positions(self.tgt_embed(eos))), memory, state, False)
        return {**state, "tag": memory["tag"]}

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor | None]:
        offset = state["self_k0"].size(2)
        if self.decoder_tags and offset == 1:  # the first step reads the tag in BOS's place
            prev = state["tag"]
        x = self.dropout(self.positions(self.tgt_embed(prev.unsqueeze(1)), offset))  # (B, 1, D)
        logits, new_state, weights = self._decode(x, memory, state, need_weights=True)
        if self.decoder_tags:
            new_state["tag"] = state["tag"]
        log_probs = F.log_softmax(logits[:, -1], dim=-1, dtype=torch.float32)  # (B, V)
        if self.config.suppress_pad:
            log_probs = log_probs.index_fill(1, torch.tensor([PAD], device=log_probs.device), float("-inf"))
        return log_probs, new_state, weights[:, -1]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        memory = self.encode(src, src_mask)
        if self.decoder_tags:  # EOS, the tag, then the target after BOS
            tgt_in = torch.cat([torch.full_like(tgt_in[:, :1], EOS), memory["tag"].unsqueeze(1), tgt_in[:, 1:]], 1)
        x = self.dropout(self.positions(self.tgt_embed(tgt_in)))  # (B, T, D)
        logits, _, weights = self._decode(x, memory, None, need_attention)
        if self.decoder_tags:
            return logits[:, 1:], None if weights is None else weights[:, 1:]
        return logits, weights


def check_variant(config: TransformerConfig, src_vocab: int) -> None:
    """A ValueError for options of imported models that contradict each other."""
    if config.position_offset and config.positions == "learned":
        raise ValueError("position_offset applies to sinusoidal positions only")
    if config.language_tags == "decoder" and not 0 <= config.source_token < src_vocab:
        raise ValueError(f"language_tags=decoder needs a source_token in 0..{src_vocab - 1}, got {config.source_token}")
