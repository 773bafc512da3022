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
from pathlib import Path

import numpy as np

from nmtkit.data.corpus import iter_parallel, length_units
from nmtkit.data.distilled_config import DistillFilterConfig
from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)
SCORE_SEPARATOR = " ||| "  # nmtkit translate --scores: `translation ||| score`


def split_score(line: str, path: Path, number: int) -> tuple[str, float]:
    """(translation, score) of a `translate --scores` line; a line without a score is an error naming it."""
    text, separator, score = line.rpartition(SCORE_SEPARATOR)
    try:
        if not separator:
            raise ValueError
        return text, float(score)
    except ValueError:
        raise NmtkitError(f"{path}:{number}: no ` ||| score` at the end; write the teacher's translations with "
                          "nmtkit translate --scores") from None


def measure(src_path: Path, hyp_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: source length, translation length (`length_units`) and teacher score."""
    src_units, hyp_units, scores = [], [], []
    for number, (src, line) in enumerate(iter_parallel(src_path, hyp_path), 1):
        text, score = split_score(line, hyp_path, number)
        src_units.append(length_units(src))
        hyp_units.append(length_units(text))
        scores.append(score)
    return np.array(src_units), np.array(hyp_units), np.array(scores, dtype=np.float64)


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


def filter_distilled(src_path: Path, hyp_path: Path, out_src: Path, out_tgt: Path, config: DistillFilterConfig,
                     report: Path | None = None) -> dict:
    """Write the kept pairs of a source file and its teacher's scored translations (`translate --scores`) to
    `out_src` and `out_tgt` (translations without their scores); returns the counts, also written to `report`."""
    src_units, hyp_units, scores = measure(src_path, hyp_path)
    reasons, stats = removal_reasons(src_units, hyp_units, scores, config)
    kept_scores = scores[reasons == ""]
    with open(out_src, "w", encoding="utf-8", newline="\n") as src_file, \
            open(out_tgt, "w", encoding="utf-8", newline="\n") as tgt_file:
        for index, (src, line) in enumerate(iter_parallel(src_path, hyp_path)):
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
        report.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
