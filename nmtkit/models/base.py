"""The one interface between models and everything else (search, training, alignment).

Memory and State are dicts of batch-first tensors, so beam search can reorder them generically with
`index_select(0, ...)`; no model has a reorder method and search never asks which model it drives.
"""

from __future__ import annotations

from torch import Tensor, nn

from nmtkit.modules.attention import LocationScore
from nmtkit.modules.embeddings import PositionEmbedding
from nmtkit.registry import register_model_base

Memory = dict[str, Tensor]
State = dict[str, Tensor]


@register_model_base
class EncoderDecoder(nn.Module):
    """Base class of every registered model."""

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

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits (B, T, V) and attention (B, T, S) or None."""
        raise NotImplementedError

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
