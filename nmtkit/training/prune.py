"""Width pruning: a narrower Transformer starts from a wider one's weights (`train.init_width: prune`).

Structured pruning before distillation, as Minitron does for language models (Muralidharan et al. 2024): the
student keeps a subset of the teacher's hidden channels, whole attention heads and feed-forward neurons, and
learns from there (with `train.init_layers` the depths change first):
- hidden channels (d_model D -> d): every (D/d)-th pair of channels, so that the sinusoidal position table of the
  narrower model is exactly the teacher's on the kept channels when d divides D (PE(pos, 2i) has frequency
  10000^(-2i/D): pair i = k D/d of the teacher is pair k of the student); the token embeddings are multiplied by
  sqrt(D/d) so that embedding x sqrt(d_model) stays what it was, and a tied output layer is given back its scale by
  the final pre-norm layer norm (post-norm: the logits are sqrt(D/d) sharper until training adapts);
- attention heads (heads H -> h, each attention on its own): the h heads of the largest |W_value| x |W_out| (their
  Frobenius norms on the kept channels); the head dimension cannot change (d/h = D/H);
- feed-forward neurons (ffn F -> f, each layer on its own): the f of the largest |row of W_in| x |column of W_out|
  (a gated unit's gate row too).
Layer norms lose their statistics' other channels; the first updates adapt to that.
"""

from __future__ import annotations

import math
import re

import torch
from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import GATED

ATTENTION = re.compile(r"^(.*attention)\.(query|key|value|out)\.(weight|bias)$")
FEED_FORWARD = re.compile(r"^(.*feed_forward)\.(inner|outer)\.(weight|bias)$")
WIDTHS = ("d_model", "heads", "ffn")


def hidden_channels(teacher: int, student: int) -> Tensor:
    """The teacher's channels a model of width `student` keeps: pairs k * teacher // student (sin and cos of one
    frequency)."""
    pairs = [k * teacher // student for k in range(student // 2)]
    return torch.tensor([channel for pair in pairs for channel in (2 * pair, 2 * pair + 1)])


def kept_heads(weights: dict, prefix: str, hidden: Tensor, heads: int, keep: int) -> Tensor:
    """The rows (query/key/value outputs) of the `keep` heads of attention `prefix` with the largest
    |W_value| x |W_out|, in their order."""
    value, out = weights[f"{prefix}.value.weight"][:, hidden], weights[f"{prefix}.out.weight"][hidden]
    size = value.size(0) // heads
    score = torch.stack([value[head * size:(head + 1) * size].norm() * out[:, head * size:(head + 1) * size].norm()
                         for head in range(heads)])
    chosen = score.topk(keep).indices.sort().values
    return torch.cat([torch.arange(head * size, (head + 1) * size) for head in chosen.tolist()])


def kept_neurons(weights: dict, prefix: str, hidden: Tensor, ffn: int, keep: int, gated: bool) -> tuple[Tensor, Tensor]:
    """The `keep` neurons of feed-forward `prefix` with the largest |W_in row| x |W_out column| (and gate row), in
    their order, and W_in's rows for them (a gated unit's: the neuron's, then its gate's)."""
    inner, outer = weights[f"{prefix}.inner.weight"][:, hidden], weights[f"{prefix}.outer.weight"][hidden]
    score = inner[:ffn].norm(dim=1) * outer.norm(dim=0)
    if gated:
        score = score * inner[ffn:].norm(dim=1)
    chosen = score.topk(keep).indices.sort().values
    return chosen, (torch.cat([chosen, chosen + ffn]) if gated else chosen)


def check_widths(saved: dict, wanted: dict) -> None:
    """One-line errors for widths pruning cannot reach."""
    if saved.get("name") != "transformer":
        raise NmtkitError(f"train.init_width prunes Transformers only, not {saved.get('name')} models")
    for key in WIDTHS:
        if wanted[key] > saved[key]:
            raise NmtkitError(f"train.init_width prunes, it cannot widen: model.{key} {saved[key]} -> {wanted[key]}")
    if saved["d_model"] // saved["heads"] != wanted["d_model"] // wanted["heads"]:
        size = saved["d_model"] // saved["heads"]
        raise NmtkitError(f"train.init_width keeps whole heads: d_model/heads must stay {size} (got "
                          f"{wanted['d_model']}/{wanted['heads']}); e.g. model.heads={wanted['d_model'] // size}")
    if wanted["d_model"] % 2:
        raise NmtkitError(f"train.init_width keeps pairs of channels: model.d_model must be even, got "
                          f"{wanted['d_model']}")


def pruned_weights(weights: dict, saved: dict, wanted: dict) -> dict:
    """The teacher's `weights` (model settings `saved`) cut to the widths of `wanted` (see the module docstring)."""
    check_widths(saved, wanted)
    hidden = hidden_channels(saved["d_model"], wanted["d_model"])
    scale = math.sqrt(saved["d_model"] / wanted["d_model"])
    gated = saved.get("activation") in GATED
    heads = {match.group(1): kept_heads(weights, match.group(1), hidden, saved["heads"], wanted["heads"])
             for match in map(ATTENTION.match, weights) if match}
    neurons = {match.group(1): kept_neurons(weights, match.group(1), hidden, saved["ffn"], wanted["ffn"], gated)
               for match in map(FEED_FORWARD.match, weights) if match}
    tied = saved.get("tie_output", False)
    pruned = {}
    for name, value in weights.items():
        if match := ATTENTION.match(name):
            rows = heads[match.group(1)]
            if match.group(2) == "out":
                value = value[hidden][:, rows] if match.group(3) == "weight" else value[hidden]
            else:
                value = value[rows][:, hidden] if match.group(3) == "weight" else value[rows]
        elif match := FEED_FORWARD.match(name):
            chosen, rows = neurons[match.group(1)]
            if match.group(2) == "inner":
                value = value[rows][:, hidden] if match.group(3) == "weight" else value[rows]
            else:
                value = value[hidden][:, chosen] if match.group(3) == "weight" else value[hidden]
        elif name.endswith("_embed.weight") or (name == "output.weight" and tied):
            value = value[:, hidden] * scale
        elif name in ("output.weight", "positions.table"):
            value = value[:, hidden]
        elif name.endswith(("norm.weight", "norm.bias")):
            value = value[hidden]
        else:
            raise NmtkitError(f"train.init_width cannot prune {name} (shape {tuple(value.shape)})")
        pruned[name] = value.clone()
    if tied and "decoder_norm.weight" in pruned:  # pre-norm: the logits keep their scale
        pruned["decoder_norm.weight"] /= scale
        pruned["decoder_norm.bias"] /= scale
    return pruned


def width_summary(saved: dict, wanted: dict) -> str:
    """What the log says about the widths taken."""
    return ", ".join(f"{key} {saved[key]} -> {wanted[key]}" for key in WIDTHS if saved[key] != wanted[key]) or "same"
