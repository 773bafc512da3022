"""`nmtkit score-pairs`: score each pair of two line-aligned files with the user's forward (source -> target) and
reverse (target -> source) models, by dual conditional cross-entropy (Junczys-Dowmunt 2018; `selection.py`), and
write the scores, or the pairs that a share or a threshold keeps.

The corpus streams through: pairs are read and scored a chunk at a time (at most CHUNK_PAIRS pairs or CHUNK_CHARS
characters of text held), each pair keeping 17 bytes (two entropies and a reason) for the selection; the kept
pairs are then copied from a second reading of the files, byte for byte.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.data.corpus import decode_line, iter_parallel
from nmtkit.data.files import overlaps, refuse_onto_inputs, refuse_stdout_onto, replacing
from nmtkit.decoding.ensemble import load_models
from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import pick_device, set_threads
from nmtkit.scoring.config import PairScoreConfig
from nmtkit.scoring.entropy import Direction, Pair, score_chunk
from nmtkit.scoring.outputs import RAISE_LIMIT, raw_pairs
from nmtkit.scoring.selection import (
    EMPTY,
    KEEP_SHARE,
    MIN_SCORE,
    REASONS,
    TOO_LONG,
    adequacy,
    dual_cost,
    reason_counts,
    removal_reasons,
)
from nmtkit.translate.masking import model_patterns

log = logging.getLogger(__name__)
CHUNK_PAIRS, CHUNK_CHARS = 8192, 1 << 24
DEFAULT_LANGS = ("src", "tgt")  # what prepare records without --src-lang/--tgt-lang and language suffixes


@dataclass
class PairFiles:
    """The files `nmtkit score-pairs` reads and writes (see its --help)."""

    src: Path
    tgt: Path
    model: Path  # source -> target checkpoint
    reverse_model: Path  # target -> source checkpoint
    output: Path | None = None  # the scores; None: standard output, unless pairs are written
    out_src: Path | None = None  # the kept pairs
    out_tgt: Path | None = None
    out_removed: Path | None = None  # the removed pairs, a JSON object a line

    @property
    def outputs(self) -> list[tuple[str, Path | None]]:
        return [("--output", self.output), ("--out-src", self.out_src), ("--out-tgt", self.out_tgt),
                ("--out-removed", self.out_removed)]

    @property
    def scores_to_stdout(self) -> bool:
        return self.output is None and self.out_src is None

    def check(self, config: PairScoreConfig) -> None:
        """Errors before any work: outputs that do not go together, onto an input or onto each other, or into a
        directory that does not exist."""
        if (self.out_src is None) != (self.out_tgt is None):
            raise NmtkitError("--out-src and --out-tgt go together: the kept pairs' two sides")
        if self.out_src is None and (self.out_removed is not None or config.selects):
            raise NmtkitError("--keep, --min-score and --out-removed choose the pairs written to --out-src and "
                              "--out-tgt; give those too (without them every pair is scored)")
        inputs = [("--src", self.src), ("--tgt", self.tgt), ("-m", self.model), ("--reverse-model", self.reverse_model)]
        refuse_onto_inputs(self.outputs, inputs)
        given = [(flag, path) for flag, path in self.outputs if path is not None]
        for (flag, path), (other_flag, other) in itertools.combinations(given, 2):
            if overlaps(path, other):
                raise NmtkitError(f"{flag} and {other_flag} name the same file {path}; give each its own")
        for flag, path in given:
            if not path.parent.is_dir():
                raise NmtkitError(f"cannot write {flag} {path}: {path.parent} is not a directory")
        if self.scores_to_stdout:
            refuse_stdout_onto(inputs)


def language_tag(loaded: LoadedModel, lang: str, flag: str, model_flag: str) -> list[int]:
    """The ids that start each source of the model `model_flag`: a multilingual model's tag of `lang` (the language
    of the side the model writes, given by `flag`); none for a model of one target language, which `lang` must not
    contradict (as `translate --tgt-lang`)."""
    if not loaded.tags:
        writes = loaded.langs[1]
        if lang and writes and lang != writes:
            raise NmtkitError(f"{flag} {lang}: the {model_flag} model writes {writes} only ({flag} is for "
                              "multilingual models)")
        return []
    if lang not in loaded.tags:
        what = f"{flag} {lang} is not one of them" if lang else f"give {flag}, the language it is to write"
        raise NmtkitError(f"the {model_flag} model is multilingual (it writes {', '.join(sorted(loaded.tags))}); "
                          f"{what}")
    return [loaded.tags[lang]]


def check_languages(forward: LoadedModel, reverse: LoadedModel) -> None:
    """A warning when the languages the checkpoints record do not chain (the reverse model should translate what
    the forward one writes into what it reads): the models swapped, or both of one direction. Languages prepare
    named by default (`src`, `tgt`: files without a language suffix) say nothing, and neither do multilingual
    models'."""
    langs = (*forward.langs, *reverse.langs)
    if forward.tags or reverse.tags or None in langs or set(langs) & set(DEFAULT_LANGS):
        return
    if forward.langs != reverse.langs[::-1]:
        log.warning("-m translates %s -> %s but --reverse-model %s -> %s: the reverse model should translate "
                    "%s -> %s", *langs, forward.langs[1], forward.langs[0])


def load_directions(files: PairFiles, config: PairScoreConfig, device: torch.device) -> tuple[Direction, Direction]:
    forward, reverse = load_models([files.model], device), load_models([files.reverse_model], device)
    check_languages(forward, reverse)
    return (Direction("forward", forward, False, language_tag(forward, config.tgt_lang, "--tgt-lang", "-m"),
                      model_patterns("model", forward)),
            Direction("reverse", reverse, True, language_tag(reverse, config.src_lang, "--src-lang",
                                                             "--reverse-model"), model_patterns("model", reverse)))


def chunks(pairs: Iterable[Pair]) -> Iterator[list[Pair]]:
    """`pairs` in lists of at most CHUNK_PAIRS pairs, or of CHUNK_CHARS characters (lines may be long)."""
    chunk, size = [], 0
    for pair in pairs:
        chunk.append(pair)
        size += len(pair[0]) + len(pair[1])
        if len(chunk) == CHUNK_PAIRS or size >= CHUNK_CHARS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def score_lines(h_fwd: np.ndarray, h_bwd: np.ndarray, unscored: np.ndarray, entropies: bool) -> str:
    """The output lines of scored pairs: the score (0.0 for a pair not scored), or with `entropies` the score, both
    cross-entropies and the pair's status (scored, empty, too_long)."""
    scores = adequacy(dual_cost(h_fwd, h_bwd)).tolist()  # written in full (repr): a threshold read off them holds
    if not entropies:
        return "".join(f"{score!r}\n" for score in scores)
    return "".join(f"{score!r}\t{forward:.6f}\t{backward:.6f}\tscored\n" if not reason else
                   f"0.0\t\t\t{REASONS[reason]}\n" for score, forward, backward, reason in zip(scores, h_fwd, h_bwd,
                                                                                            unscored))


@dataclass
class Scores:
    """The cross-entropies of every pair (infinite: not scored) and the reason a pair was not scored (0: scored)."""

    h_fwd: np.ndarray
    h_bwd: np.ndarray
    unscored: np.ndarray


def score_files(files: PairFiles, directions: tuple[Direction, Direction], config: PairScoreConfig,
                device: torch.device, write: Callable[[str], object] | None) -> Scores:
    """Score every pair of the files, a chunk at a time, writing the score lines as they come when `write` is
    given."""
    h_fwd, h_bwd, unscored, first = array("d"), array("d"), array("b"), 1
    for chunk in chunks(iter_parallel(files.src, files.tgt, config.max_line_bytes, RAISE_LIMIT)):
        found = score_chunk(directions, chunk, config.batch_tokens, device, first)
        if write is not None:
            write(score_lines(*found, config.entropies))
        for store, values in zip((h_fwd, h_bwd, unscored), found):
            store.extend(values.tolist())
        first += len(chunk)
        log.debug("scored %d pairs", first - 1)
    return Scores(*(np.frombuffer(store, dtype=dtype) for store, dtype in
                    ((h_fwd, np.float64), (h_bwd, np.float64), (unscored, np.int8))))


def removed_record(number: int, reason: int, scores: Scores, src: bytes, tgt: bytes) -> bytes:
    """A removed pair as one JSON line: its line number, reason, score (in full, as the score lines), entropies
    (null: not scored) and text."""
    index = number - 1
    h_fwd, h_bwd = (float(value[index]) for value in (scores.h_fwd, scores.h_bwd))
    scored = not scores.unscored[index]
    record = {"line": number, "reason": REASONS[reason],
              "score": float(adequacy(dual_cost(np.float64(h_fwd), np.float64(h_bwd)))),
              "h_fwd": round(h_fwd, 6) if scored else None, "h_bwd": round(h_bwd, 6) if scored else None,
              "src": decode_line(src, "--src", number), "tgt": decode_line(tgt, "--tgt", number)}
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def copy_pairs(files: PairFiles, scores: Scores, reasons: np.ndarray, max_bytes: int,
               outputs: list[BinaryIO]) -> None:
    """Write the kept pairs' lines byte for byte, each ending in a newline, and the removed ones as JSON lines to
    the third of `outputs` when there is one."""
    kept_src, kept_tgt, *removed = outputs
    for number, (src, tgt) in enumerate(raw_pairs(files.src, files.tgt, max_bytes, len(reasons)), 1):
        reason = int(reasons[number - 1])
        if not reason:
            kept_src.write(src + b"\n")
            kept_tgt.write(tgt + b"\n")
        elif removed:
            removed[0].write(removed_record(number, reason, scores, src, tgt))


def summarize(scores: Scores, reasons: np.ndarray | None, config: PairScoreConfig) -> dict:
    """The counts: pairs read, scored, not scored by reason, the mean entropies; and with a selection, the pairs
    kept and removed by reason, and the range of the kept scores."""
    scored = scores.unscored == 0
    means = {name: round(float(values[scored].mean()), 6) if scored.any() else None
             for name, values in (("forward", scores.h_fwd), ("reverse", scores.h_bwd))}
    summary = {"read": len(scored), "scored": int(scored.sum()),
               "unscored": reason_counts(scores.unscored, (EMPTY, TOO_LONG)), "mean_entropy": means}
    if reasons is None:
        return summary
    kept = adequacy(dual_cost(scores.h_fwd, scores.h_bwd))[reasons == 0]
    return {**summary, "kept": len(kept), "removed": reason_counts(reasons, (EMPTY, TOO_LONG, MIN_SCORE, KEEP_SHARE)),
            "kept_score_range": [float(kept.min()), float(kept.max())] if len(kept) else None,
            "config": {"keep": config.keep, "min_score": config.min_score}}


def score_writer(files: PairFiles, by_path: dict[Path, BinaryIO]) -> Callable[[str], object] | None:
    """Where the score lines go: standard output when no file is written, else --output if given."""
    if files.scores_to_stdout:
        return sys.stdout.write
    if files.output is None:
        return None
    return lambda text: by_path[files.output].write(text.encode("utf-8"))


def score_pairs_command(files: PairFiles, config: PairScoreConfig, device_name: str = "auto",
                        threads: int = 0) -> dict | None:
    """`nmtkit score-pairs`: the score lines go to `files.output`, or to standard output when no file is written
    (then this returns None); with `files.out_src` and `files.out_tgt`, the pairs `config` keeps are written there.
    Returns the counts (`summarize`)."""
    files.check(config)
    set_threads(threads)
    device = pick_device(device_name)
    directions = load_directions(files, config, device)
    written = [path for _, path in files.outputs if path is not None]
    with replacing(written, gzip_by_name=True) as handles:
        by_path = dict(zip(written, handles))
        scores = score_files(files, directions, config, device, score_writer(files, by_path))
        reasons = None
        if files.out_src is not None:
            reasons = removal_reasons(scores.unscored, dual_cost(scores.h_fwd, scores.h_bwd), config.keep,
                                      config.min_score)
            copy_pairs(files, scores, reasons, config.max_line_bytes,
                       [by_path[path] for path in (files.out_src, files.out_tgt, files.out_removed) if path])
    summary = summarize(scores, reasons, config)
    report(summary)
    return None if files.scores_to_stdout else summary


def report(summary: dict) -> None:
    """The counts on the log (stderr): what was scored, what was not and why, what was kept."""
    unscored = summary["unscored"]
    log.info("scored %d of %d pairs; not scored (score 0): %d with an empty side, %d longer than a model reads",
             summary["scored"], summary["read"], unscored["empty"], unscored["too_long"])
    if unscored["too_long"]:
        log.warning("%d pairs have a side longer than a model's positions: not scored, and never kept",
                    unscored["too_long"])
    if "kept" in summary:
        log.info("kept %d of %d pairs; removed: %s", summary["kept"], summary["read"],
                 ", ".join(f"{count} {reason}" for reason, count in summary["removed"].items()))
