"""The one interface between models and everything else (search, training, alignment).

Memory and State are dicts of batch-first tensors, so beam search can reorder them generically with
`index_select(0, ...)`; no model has a reorder method and search never asks which model it drives.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor, nn

from nmtkit.errors import NmtkitError
from nmtkit.modules.attention import LocationScore
from nmtkit.modules.embeddings import PositionEmbedding
from nmtkit.registry import register_model_base

Memory = dict[str, Tensor]
State = dict[str, Tensor]


@dataclass(frozen=True)
class AttentionChoice:
    """Which cross-attention `step` and `forward` return, for models that have several: a decoder layer (0-based,
    negative from the end) and a head of it; None keeps the model's own (each model documents it)."""

    layer: int | None = None
    head: int | None = None


@register_model_base
class EncoderDecoder(nn.Module):
    """Base class of every registered model."""

    has_attention: ClassVar[bool] = True  # whether `step` and `forward` return cross-attention (False: None)
    attention_choice: AttentionChoice = AttentionChoice()  # what `select_attention` chose; see `chosen_attention`

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        """src (B, S) ids, src_mask (B, S) True on real tokens -> memory (must contain `src_mask`)."""
        raise NotImplementedError

    def init_state(self, memory: Memory) -> State:
        """The decoder state before the first target token."""
        raise NotImplementedError

    def beam_memory(self, memory: Memory, beam: int) -> Memory:
        """Memory for a search with `beam` state rows per sentence (row b*beam + k belongs to sentence b).

        By default each sentence's rows are repeated `beam` times. A model whose `step` can read one row per
        sentence for all its beams may leave tensors unrepeated: search tells the two apart by their row count."""
        return {name: value.repeat_interleave(beam, dim=0) for name, value in memory.items()}

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor | None]:
        """prev (B,) last tokens -> log-probs (B, V), new state, attention over the source (B, S) or None."""
        raise NotImplementedError

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits (B, T, V), and attention (B, T, S) when asked for and the model has one (else
        None)."""
        raise NotImplementedError

    def select_attention(self, layer: int | None, head: int | None) -> None:
        """Choose the cross-attention `step` and `forward` return, for word alignment: a decoder layer and a head;
        None for either takes the model's default for alignment. A model with one attention (or none) has nothing
        to choose: it takes (None, None) and refuses a layer or a head."""
        if layer is not None or head is not None:
            raise NmtkitError(f"{type(self).__name__} has one attention; --layer and --head do not apply to it")

    @contextmanager
    def chosen_attention(self, layer: int | None, head: int | None) -> Iterator[None]:
        """`select_attention` for the duration of a block, then the choice before it again: alignment picks its
        layer while translation (the coverage penalty) keeps the model's own attention."""
        saved = self.attention_choice
        self.select_attention(layer, head)
        try:
            yield
        finally:
            self.attention_choice = saved

    def max_length(self) -> int | None:
        """Most positions a sequence (tokens plus EOS or BOS) may take: what the position embeddings or location
        scores cover; None when nothing bounds it."""
        limits = [module.max_positions for module in self.modules()
                  if isinstance(module, (PositionEmbedding, LocationScore))]
        return min(limits, default=None)

    def checkpoint_layers(self) -> list[nn.Module]:
        """Layers whose activations training may recompute in the backward pass instead of keeping them
        (`train.activation_checkpointing`); none unless a model names them."""
        return []


def check_layer(layer: int | None, layers: int) -> None:
    """Refuse a decoder layer index outside -layers..layers-1 (for `select_attention`)."""
    if layer is not None and not -layers <= layer < layers:
        raise NmtkitError(f"--layer {layer} is out of range; the model has {layers} decoder layers (0..{layers - 1})")
