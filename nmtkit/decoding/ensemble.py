"""Ensembles: several checkpoints decoded as one model through the same `step` interface.

Members' Memory and State entries are kept in one dict under `"<member>.<key>"`, so beam search reorders them
like any other model's. At each step the members' log-probabilities are averaged and renormalised (a product of
experts, as OpenNMT-py's ensemble decoder averages log-probabilities).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch
from torch import Tensor, nn

from nmtkit.checkpoint.payload import LoadedModel, average_checkpoints, load_checkpoint, restore_model, step_checkpoints
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder, Memory, State


def _member(tensors: dict[str, Tensor], index: int) -> dict[str, Tensor]:
    prefix = f"{index}."
    return {key[len(prefix):]: value for key, value in tensors.items() if key.startswith(prefix)}


def _join(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    return {f"{index}.{key}": value for index, part in enumerate(parts) for key, value in part.items()}


def _mean_or_none(tensors: list[Tensor | None]) -> Tensor | None:
    present = [tensor for tensor in tensors if tensor is not None]
    return torch.stack(present).mean(dim=0) if present else None


class Ensemble(EncoderDecoder):
    """Models that share source and target vocabularies, decoded together. Attention is the mean of the members'
    that have one (each member's as it chose, see `select_attention`)."""

    def __init__(self, members: list[EncoderDecoder]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        memory = _join([member.encode(src, src_mask) for member in self.members])
        memory["src_mask"] = src_mask
        return memory

    def init_state(self, memory: Memory) -> State:
        return _join([member.init_state(_member(memory, index)) for index, member in enumerate(self.members)])

    def beam_memory(self, memory: Memory, beam: int) -> Memory:
        """Each member's memory as that member keeps it for beams (repeated or shared, see EncoderDecoder)."""
        members = enumerate(self.members)
        expanded = _join([member.beam_memory(_member(memory, index), beam) for index, member in members])
        expanded["src_mask"] = memory["src_mask"]  # one row per sentence; search repeats it where it needs to
        return expanded

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, Tensor | None]:
        outputs = [member.step(prev, _member(state, index), _member(memory, index))
                   for index, member in enumerate(self.members)]
        log_probs = torch.log_softmax(torch.stack([output[0] for output in outputs]).mean(dim=0), dim=-1)  # (B, V)
        return log_probs, _join([output[1] for output in outputs]), _mean_or_none([output[2] for output in outputs])

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                need_attention: bool = False) -> tuple[Tensor, Tensor | None]:
        outputs = [member(src, src_mask, tgt_in, need_attention) for member in self.members]
        member_log_probs = torch.stack([torch.log_softmax(output[0].float(), dim=-1) for output in outputs])
        return torch.log_softmax(member_log_probs.mean(dim=0), dim=-1), _mean_or_none([o[1] for o in outputs])

    def select_attention(self, layer: int | None, head: int | None) -> None:
        for member in self.members:
            member.select_attention(layer, head)

    @contextmanager
    def chosen_attention(self, layer: int | None, head: int | None) -> Iterator[None]:
        with ExitStack() as members:
            for member in self.members:
                members.enter_context(member.chosen_attention(layer, head))
            yield


def last_checkpoints(run_dir: Path, count: int) -> list[Path]:
    """The `count` newest checkpoint_<step>.pt files of a run directory."""
    found = step_checkpoints(run_dir)
    if not found:
        raise NmtkitError(f"{run_dir} holds no checkpoint_<step>.pt files; train with train.keep_checkpoints=N")
    return found[-count:]


def load_models(paths: list[Path], device: torch.device, average: int = 0) -> LoadedModel:
    """One checkpoint, an average of the last `average` checkpoints of its run, or an ensemble of several
    checkpoints that share their subword models."""
    if average > 0:
        if len(paths) > 1:
            raise NmtkitError("--average takes one -m (a checkpoint of the run whose checkpoints to average)")
        return restore_model(average_checkpoints(last_checkpoints(paths[0].parent, average)), device)
    payloads = [load_checkpoint(path) for path in paths]
    vocabularies = [(payload["subword"]["src"], payload["subword"]["tgt"]) for payload in payloads]
    for path, vocabulary in zip(paths[1:], vocabularies[1:]):
        if vocabulary != vocabularies[0]:
            raise NmtkitError(f"{path} uses other subword models than {paths[0]}; an ensemble needs the same ones")
    loaded = [restore_model(payload, device) for payload in payloads]
    if len(loaded) == 1:
        return loaded[0]
    first = loaded[0]
    return LoadedModel(first.config, Ensemble([item.model for item in loaded]).eval(),
                       first.src_subword, first.tgt_subword, first.langs, first.tags, first.placeholders)
