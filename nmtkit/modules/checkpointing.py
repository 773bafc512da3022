"""Activation checkpointing: trade compute for memory when training big models."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def checkpoint_activations(layers: list[nn.Module]) -> None:
    """Make each layer recompute its activations in the backward pass instead of keeping them (Chen et al. 2016,
    arXiv 1604.06174), when it trains with gradients; decoding runs the layers unchanged. Dropout draws the same
    masks in the recomputation (the random state is replayed), so gradients are those of the plain model."""
    for layer in layers:

        def run(*args, _layer=layer, _forward=layer.forward, **kwargs):
            if _layer.training and torch.is_grad_enabled():
                return checkpoint(_forward, *args, use_reentrant=False, **kwargs)
            return _forward(*args, **kwargs)

        layer.forward = run
