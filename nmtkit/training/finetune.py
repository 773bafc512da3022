"""Fine-tuning: a run that starts from another run's weights (`train.init_from`), with a fresh optimizer and schedule
unless `train.init_optimizer` keeps them.

The checkpoint and the new run must agree on what the weights mean: the same subword vocabularies (prepare the new
data with `nmtkit prepare --subword-model CHECKPOINT`) and the same architecture. Settings that do not shape the
weights (dropout) may change; anything else is a one-line error naming the differences.

A student of another depth starts from a teacher's weights with `train.init_layers` ("shrink and fine-tune",
Shleifer & Rush 2020): each student layer is a copy of one teacher layer, every other weight (embeddings, final
norms, output layer) is the teacher's. `spread` picks the teacher layers evenly, the first and the last kept (3 -> 1
takes layer 0, as DistilBART's table does; 6 -> 2 takes 0 and 5; a deeper student repeats layers: 3 -> 6 takes
0 0 1 1 2 2); `encoder:0,1,2 decoder:2` names them. A narrower student (`train.init_width: prune`) keeps some of
each layer's channels, heads and neurons (`nmtkit.training.prune`).
"""

from __future__ import annotations

import re
from pathlib import Path

from nmtkit.checkpoint.file import load_checkpoint
from nmtkit.checkpoint.payload import read_payload
from nmtkit.config.run import build_config
from nmtkit.config.sections import to_dict
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError
from nmtkit.training.prune import WIDTHS, pruned_weights, width_summary

# model settings that do not change the weights' shapes
CHANGEABLE = frozenset({"dropout", "attention_dropout", "activation_dropout"})
# a stack's depth (model setting) and the prefix of its layers' weights (`encoder.0.attention.query.weight`)
STACKS = {"encoder": "encoder_layers", "decoder": "decoder_layers"}
LAYER_KEY = re.compile(r"^(encoder|decoder)\.([0-9]+)\.(.*)$")


def model_differences(saved: dict, wanted: dict, depths_may_differ: bool = False,
                      widths_may_differ: bool = False) -> list[str]:
    """`key: saved -> wanted` for each architecture setting that differs (dropout may differ; the depths too with
    `depths_may_differ`, d_model, heads and ffn with `widths_may_differ`)."""
    free = (set(STACKS.values()) if depths_may_differ else set()) | (set(WIDTHS) if widths_may_differ else set())
    keys = sorted((set(saved) | set(wanted)) - CHANGEABLE - free)
    return [f"{key}: {saved.get(key)!r} -> {wanted.get(key)!r}" for key in keys if saved.get(key) != wanted.get(key)]


def read_start(path: str | Path) -> dict:
    """The checkpoint a fine-tuning run starts from (read once: for its model section and its weights), its config
    checked against its weights before a run builds a model by it (`read_payload`)."""
    payload = load_checkpoint(path, "start from another checkpoint, e.g. model.pt of the run")
    try:
        read_payload(payload)
    except NmtkitError as error:
        raise NmtkitError(f"{path}: {error}") from error
    return payload


def spread(teacher: int, student: int) -> list[int]:
    """Teacher layers for `student` layers: evenly spaced, the first and the last kept; repeated when deeper."""
    if student >= teacher:
        return [layer * teacher // student for layer in range(student)]
    if student == 1:
        return [0]
    return [round(layer * (teacher - 1) / (student - 1)) for layer in range(student)]


def depth(model: dict, stack: str, whose: str) -> int:
    """The number of layers of `stack` in model settings `model` (a checkpoint's, or the run's)."""
    layers = model.get(STACKS[stack])
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
        raise NmtkitError(f"train.init_layers: {whose} model settings give no {STACKS[stack]} (got {layers!r})")
    return layers


def layer_maps(rule: str, saved: dict, wanted: dict) -> dict[str, list[int]]:
    """For each stack, the teacher layer each student layer starts from, by `rule` (train.init_layers). A teacher
    layer may be named twice (a deeper student repeats layers, as `spread` does); a stack may not."""
    maps = {stack: spread(depth(saved, stack, "the checkpoint's"), depth(wanted, stack, "the run's"))
            for stack in STACKS}
    if rule == "spread":
        return maps
    named: set[str] = set()
    for part in rule.split() or [rule]:
        stack, _, layers = part.partition(":")
        if stack not in STACKS or not re.fullmatch(r"[0-9]+(,[0-9]+)*", layers) or stack in named:
            raise NmtkitError(f"train.init_layers: {part!r} is not spread or STACK:LAYERS, each stack once (e.g. "
                              "'encoder:0,1,2 decoder:2')")
        chosen, teacher = [int(layer) for layer in layers.split(",")], depth(saved, stack, "the checkpoint's")
        if len(chosen) != len(maps[stack]) or max(chosen) >= teacher:
            raise NmtkitError(f"train.init_layers: {stack} needs {len(maps[stack])} layer(s) of the checkpoint's "
                              f"{teacher} (0-{teacher - 1}), got {layers}")
        maps[stack] = chosen
        named.add(stack)
    return maps


def mapped_weights(weights: dict, maps: dict[str, list[int]]) -> dict:
    """The teacher's `weights` renamed for the student: its layer k of a stack is the teacher's layer maps[stack][k]."""
    kept = {name: value for name, value in weights.items() if not LAYER_KEY.match(name)}
    for name, value in weights.items():
        if match := LAYER_KEY.match(name):
            stack, layer, rest = match.group(1), int(match.group(2)), match.group(3)
            for student, teacher in enumerate(maps.get(stack, [])):
                if teacher == layer:
                    kept[f"{stack}.{student}.{rest}"] = value.clone()
    return kept


def check_start(payload: dict, path: str | Path, subwords: tuple[Subword, Subword], model_config: dict,
                data_dir: Path, init_layers: str = "", init_width: str = "") -> dict:
    """The checkpoint to start from, checked against the new run's vocabularies and architecture; with
    `init_layers`, its weights mapped onto a model of other depths; with `init_width`, pruned to its widths."""
    saved = payload["subword"]
    if (saved["src"], saved["tgt"]) != (subwords[0].proto, subwords[1].proto):
        raise NmtkitError(f"{path} was trained with other subword vocabularies than {data_dir}; prepare the new data "
                          f"with its vocabulary: nmtkit prepare --subword-model {path} ...")
    saved_model = to_dict(build_config({"model": payload["config"]["model"]}).model)  # settings added since: defaults
    differences = model_differences(saved_model, model_config, bool(init_layers), bool(init_width))
    if differences:
        hints = ([] if init_layers else ["a student of other depths: train.init_layers=spread"]) + \
            ([] if init_width else ["a narrower one: train.init_width=prune"])
        raise NmtkitError(f"{path} has another architecture than this run ({'; '.join(differences)}); fine-tune "
                          "with its model settings (leave the model section out of --config)"
                          + "".join(f"; {hint}" for hint in hints))
    if init_layers:
        maps = layer_maps(init_layers, saved_model, model_config)
        payload = {**payload, "model": mapped_weights(payload["model"], maps), "layer_maps": maps}
    if init_width:
        payload = {**payload, "model": pruned_weights(payload["model"], saved_model, model_config),
                   "widths": width_summary(saved_model, model_config)}
    return payload


def saved_model_section(start: dict) -> dict:
    """The model settings of the checkpoint `start`: what a fine-tuning run without its own model section takes."""
    return dict(start["config"]["model"])
