"""Distilled training data (sequence-level knowledge distillation, Kim & Rush 2016): the teacher's translations of
a corpus's source side, written by `nmtkit translate --scores --output`, cleaned of the pairs where the teacher
went wrong before a student learns from them (`nmtkit filter-distilled`).

Two outlier tests, each counted: a translation whose length ratio to its source is far from the corpus median
(hallucinated repetitions, dropped halves: the ratio test of `nmtkit prepare`, against the distilled pairs' own
median), and the lowest teacher scores. The score `translate --scores` prints is the log-probability per token
under the default length penalty (`average`); under another one it is that penalty's score.
"""

from __future__ import annotations

import json
import logging
import math
from array import array
from pathlib import Path

import numpy as np

from nmtkit.data.corpus import iter_parallel, length_units
from nmtkit.data.distilled_config import DistillFilterConfig
from nmtkit.data.files import overlaps, refuse_onto_inputs, replacing_text, write_atomic
from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)
SCORE_SEPARATOR = " ||| "  # nmtkit translate --scores: `translation ||| score`
RAISE_LIMIT = "raise --max-line-bytes if such lines are meant to be there"


def split_score(line: str, path: Path, number: int) -> tuple[str, float]:
    """(translation, score) of a `translate --scores` line; a line without a finite score is an error naming it."""
    text, separator, score = line.rpartition(SCORE_SEPARATOR)
    try:
        value = float(score) if separator else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise NmtkitError(f"{path}:{number}: no ` ||| score` (a finite number) at the end; write the teacher's "
                          "translations with nmtkit translate --scores")
    return text, value


def measure(src_path: Path, hyp_path: Path, max_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: source length, translation length (`length_units`) and teacher score (in arrays: 20 bytes a pair,
    where lists of Python numbers took about 100)."""
    src_units, hyp_units, scores = array("q"), array("q"), array("d")
    for number, (src, line) in enumerate(iter_parallel(src_path, hyp_path, max_bytes, RAISE_LIMIT), 1):
        text, score = split_score(line, hyp_path, number)
        src_units.append(length_units(src))
        hyp_units.append(length_units(text))
        scores.append(score)
    return np.frombuffer(src_units, dtype=np.int64), np.frombuffer(hyp_units, dtype=np.int64), \
        np.frombuffer(scores, dtype=np.float64)


def removal_reasons(src_units: np.ndarray, hyp_units: np.ndarray, scores: np.ndarray,
                    config: DistillFilterConfig) -> tuple[np.ndarray, dict]:
    """The reason each pair is dropped ("" kept; each pair counted under its first reason: empty, length_ratio,
    score) and the median length ratio."""
    reasons = np.full(len(scores), "", dtype=object)
    reasons[(src_units == 0) | (hyp_units == 0)] = "empty"
    both = reasons == ""
    log_ratios = np.log(src_units[both] / hyp_units[both]) if both.any() else np.zeros(1)
    median = float(np.median(log_ratios))
    if config.max_ratio > 0:
        far = np.abs(np.log(np.maximum(src_units, 1) / np.maximum(hyp_units, 1)) - median)
        reasons[(reasons == "") & (far > np.log(config.max_ratio))] = "length_ratio"
    worst = int(round(config.drop_worst * len(scores)))
    if worst:
        ranked = np.argsort(scores, kind="stable")
        reasons[ranked[reasons[ranked] == ""][:worst]] = "score"
    return reasons, {"median_length_ratio": round(float(np.exp(median)), 4)}


def check_paths(src_path: Path, hyp_path: Path, out_src: Path, out_tgt: Path, report: Path | None) -> None:
    """An error for an output that is an input (it would be cut before it is read) or another output."""
    outputs = [("--out-src", out_src), ("--out-tgt", out_tgt), ("--report", report)]
    refuse_onto_inputs(outputs, [("--src", src_path), ("--hyp", hyp_path)])
    for index, (flag, path) in enumerate(outputs):
        for other_flag, other in outputs[index + 1:]:
            if path is not None and other is not None and overlaps(path, other):
                raise NmtkitError(f"{flag} and {other_flag} name the same file {path}; give each its own")


def filter_distilled(src_path: Path, hyp_path: Path, out_src: Path, out_tgt: Path, config: DistillFilterConfig,
                     report: Path | None = None) -> dict:
    """Write the kept pairs of a source file and its teacher's scored translations (`translate --scores`) to
    `out_src` and `out_tgt` (translations without their scores); returns the counts, also written to `report`.
    The inputs are read twice (measured, then copied), lines of at most `config.max_line_bytes`; an output that is
    an input is an error, and every output is written whole or not at all."""
    check_paths(src_path, hyp_path, out_src, out_tgt, report)
    src_units, hyp_units, scores = measure(src_path, hyp_path, config.max_line_bytes)
    reasons, stats = removal_reasons(src_units, hyp_units, scores, config)
    kept_scores = scores[reasons == ""]
    with replacing_text([out_src, out_tgt]) as (src_file, tgt_file):
        pairs = iter_parallel(src_path, hyp_path, config.max_line_bytes, RAISE_LIMIT)
        for index, (src, line) in enumerate(pairs):
            if not reasons[index]:
                src_file.write(src + "\n")
                tgt_file.write(line.rpartition(SCORE_SEPARATOR)[0] + "\n")
    removed = {reason: int((reasons == reason).sum()) for reason in ("empty", "length_ratio", "score")}
    summary = {"read": len(scores), "kept": len(kept_scores), "removed": removed, **stats,
               "kept_score_range": [round(float(kept_scores.min()), 4), round(float(kept_scores.max()), 4)]
               if len(kept_scores) else None, "config": {"max_ratio": config.max_ratio,
                                                          "drop_worst": config.drop_worst}}
    log.info("kept %d of %d distilled pairs; removed: %s", summary["kept"], summary["read"],
             ", ".join(f"{count} {reason}" for reason, count in removed.items()))
    if report is not None:
        write_atomic(report, (json.dumps(summary, indent=2) + "\n").encode("utf-8"))
    return summary
