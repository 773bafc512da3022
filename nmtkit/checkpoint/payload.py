"""Self-contained checkpoints: config, subword model(s) and weights in one file, written atomically."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch

from nmtkit.checkpoint.file import FORMAT, load_checkpoint
from nmtkit.config.run import build_config
from nmtkit.config.sections import Config
from nmtkit.data.subword import Subword
from nmtkit.data.tags import checked_tag_ids
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder
from nmtkit.registry import build_model
from nmtkit.version import __version__


class _Writes(io.RawIOBase):
    """A file for torch.save that keeps the OSError of a failed write (a full disk): torch.save reports any as a
    RuntimeError that no longer says why."""

    def __init__(self, file: BinaryIO):
        super().__init__()
        self.file, self.error = file, None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        try:
            return self.file.write(data)
        except OSError as error:
            self.error = error
            raise


def save_atomic(payload: dict, path: Path) -> None:
    """Write to a temporary file in the same directory, fsync, then rename: a crash leaves the old file intact. A
    write that fails (a full disk) is a one-line error, and the old file is intact too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    writes = None
    try:
        with os.fdopen(handle, "wb") as tmp:
            writes = _Writes(tmp)
            torch.save(payload, writes)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except (OSError, RuntimeError) as error:
        Path(tmp_name).unlink(missing_ok=True)
        cause = writes.error if writes is not None and writes.error is not None else error
        if not isinstance(cause, OSError):
            raise
        raise NmtkitError(f"cannot write checkpoint {path}: {cause.strerror or cause}; "
                          f"{'the one there is kept' if path.exists() else 'nothing was written'}") from error
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def make_payload(config: Config, model: EncoderDecoder, subwords: tuple[Subword, Subword],
                 train_state: dict | None = None, langs: tuple[str | None, str | None] = (None, None),
                 tags: dict[str, int] | None = None, placeholders: dict | None = None) -> dict:
    """A checkpoint: config, subword models, the data's languages (from `prepare --src-lang/--tgt-lang`), weights
    and, for last.pt, the training state. The subword models record their own normalization (`Subword.settings`);
    a multilingual model's `tags` map each target language to the id of its tag; `placeholders` is the data's
    masking rule (the manifest's "placeholders": the pattern families by content), None when it masked nothing."""
    from nmtkit.config.sections import to_dict

    return {"format": FORMAT, "nmtkit_version": __version__, "config": to_dict(config),
            "subword": {"src": subwords[0].proto, "tgt": subwords[1].proto,
                        "joint": subwords[0] is subwords[1]},
            "langs": {"src": langs[0], "tgt": langs[1], "tags": dict(tags or {})}, "placeholders": placeholders,
            "model": model.state_dict(), "train_state": train_state}


@dataclass
class LoadedModel:
    config: Config
    model: EncoderDecoder
    src_subword: Subword
    tgt_subword: Subword
    langs: tuple[str | None, str | None] = (None, None)  # unknown for checkpoints written before nmtkit kept them
    tags: dict[str, int] = field(default_factory=dict)  # a multilingual model's target languages and their tag ids
    placeholders: dict | None = None  # the training data's placeholder masking (see make_payload); None: none


MAX_UNSAVED_ELEMENTS = 1 << 26  # a model's buffers beyond its weights (a position table): 256 MB of float32 at most


def read_payload(payload: dict[str, Any]) -> tuple[Config, Subword, Subword]:
    """A checkpoint's config and subword models, its config checked against the weights it holds before the model
    is built (`check_fits`)."""
    config = build_config(payload["config"])
    try:
        src_subword = Subword(payload["subword"]["src"])
        tgt_subword = src_subword if payload["subword"]["joint"] else Subword(payload["subword"]["tgt"])
    except RuntimeError as error:  # SentencePiece refuses bytes that are not a model
        raise NmtkitError("the checkpoint's subword model is damaged; use another checkpoint") from error
    check_fits(payload["model"], config, (src_subword.vocab_size, tgt_subword.vocab_size), payload["subword"]["joint"])
    return config, src_subword, tgt_subword


def check_fits(weights: dict[str, torch.Tensor], config: Config, vocab_sizes: tuple[int, int], joint: bool) -> None:
    """An error unless `config` builds a model whose weights are `weights`, shape for shape, with at most
    MAX_UNSAVED_ELEMENTS more in buffers: found on a model without memory (torch's meta device), so that a config
    asking for a huge d_model, vocabulary or depth is refused before anything is allocated for it. (Each layer
    holds a weight at least, so a depth beyond the number of weights is refused before a skeleton is built.)"""
    depth = sum(value for key, value in dataclasses.asdict(config.model).items()
                if key.endswith("_layers") and isinstance(value, int))
    if depth > len(weights):
        raise NmtkitError(f"checkpoint weights do not match its config: {depth} layers by its config, "
                          f"{len(weights)} weights in the file")
    try:
        with torch.device("meta"):
            skeleton = build_model(config.model, *vocab_sizes, joint)
    except (ValueError, TypeError, ZeroDivisionError, RuntimeError) as error:
        raise NmtkitError(f"the checkpoint's config builds no model ({type(error).__name__}: {error})") from error
    shapes = {name: tuple(value.shape) for name, value in skeleton.state_dict().items()}
    held = {name: tuple(value.shape) for name, value in weights.items()}
    if shapes != held:
        name = min(set(shapes) ^ set(held) or {name for name in shapes if shapes[name] != held[name]})
        raise NmtkitError(f"checkpoint weights do not match its config: {name} is {held.get(name, 'missing')} in "
                          f"the file, {shapes.get(name, 'not in the model')} by its config")
    unsaved = sum(buffer.numel() for name, buffer in skeleton.named_buffers() if name not in shapes)
    if unsaved > MAX_UNSAVED_ELEMENTS:
        raise NmtkitError(f"the checkpoint's config asks for {unsaved} elements beyond its weights (more than "
                          f"{MAX_UNSAVED_ELEMENTS}: a max_positions too large?)")


def restore_model(payload: dict[str, Any], device: torch.device) -> LoadedModel:
    """Rebuild model and subword models from a checkpoint payload."""
    config, src_subword, tgt_subword = read_payload(payload)
    model = build_model(config.model, src_subword.vocab_size, tgt_subword.vocab_size, payload["subword"]["joint"])
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as error:
        raise NmtkitError(f"checkpoint weights do not match its config: {str(error).splitlines()[0]}") from error
    langs = payload.get("langs") if isinstance(payload.get("langs"), dict) else {}
    tags = checked_tag_ids(langs.get("tags"), src_subword.vocab_size, "the checkpoint")
    return LoadedModel(config, model.to(device).eval(), src_subword, tgt_subword, (langs.get("src"), langs.get("tgt")),
                       tags, payload.get("placeholders"))


def step_checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoint_<step>.pt files, oldest step first."""
    found = [(int(path.stem.split("_", 1)[1]), path) for path in run_dir.glob("checkpoint_*.pt")
             if path.stem.split("_", 1)[1].isdigit()]
    return [path for _, path in sorted(found)]


def average_checkpoints(paths: list[Path]) -> dict:
    """One payload whose weights are the element-wise mean of the checkpoints' (Vaswani et al. 2017, Section 6.1).

    The checkpoints must come from one run (same config and subword models); the mean is taken in float64.
    """
    payloads = [load_checkpoint(path) for path in paths]
    for path, payload in zip(paths[1:], payloads[1:]):
        if payload["config"]["model"] != payloads[0]["config"]["model"] or payload["subword"] != payloads[0]["subword"]:
            raise NmtkitError(f"{path} is not from the same model as {paths[0]}; only checkpoints of one run average")
    weights = {name: sum(payload["model"][name].double() for payload in payloads) / len(payloads)
               for name in payloads[-1]["model"]}
    averaged = {name: value.to(payloads[-1]["model"][name].dtype) for name, value in weights.items()}
    return {**payloads[-1], "model": averaged, "train_state": None}


def rng_state(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)


def truncate_metrics(path: Path, step: int) -> None:
    """Drop the records of steps after `step` (and a line cut short by a kill): a resumed run redoes them. The file
    is read a line at a time and rewritten only when something is dropped."""
    if not path.exists():
        return

    def record_step(line: bytes) -> float:
        try:
            return json.loads(line).get("step", 0)
        except (ValueError, AttributeError):  # a cut line, or not a record
            return math.inf

    tmp = path.with_name(f".{path.name}.tmp")
    dropped = False
    with open(path, "rb") as records, open(tmp, "wb") as kept:
        for line in records:
            if line.endswith(b"\n") and record_step(line) <= step:
                kept.write(line)
            else:
                dropped = True
    if dropped:
        os.replace(tmp, path)
    else:
        tmp.unlink()
