"""`nmtkit best-of`: of each line's n-best (a teacher's `nmtkit translate --nbest N` output), keep the hypothesis
closest to the line's reference by a sentence metric of `nmtkit evaluate` (chrF by default), as Mozilla's
distillation pipeline does (its `extract_best`), so that a student learns from the teacher's best translation
rather than from its most probable one. The result has one line per reference line, in order; ties go to the
earlier hypothesis (the beam's better one). A metric where lower is better (TER, WER, edit) counts negated.

The n-best is read as `translate` writes it, `i ||| hypothesis ||| score` with i the 0-based line number; a line
missing, out of order or malformed is an error naming it, never a guess.
"""

from __future__ import annotations

from pathlib import Path

import torch

import nmtkit.metrics.builtin  # noqa: F401  (registers the metrics)
from nmtkit.data.corpus import iter_lines, read_lines
from nmtkit.data.files import open_atomic, refuse_onto_inputs, refuse_stdout_onto
from nmtkit.errors import NmtkitError
from nmtkit.metrics.options import EvaluateConfig
from nmtkit.registry import get_metric
from nmtkit.runtime.device import pick_device

LOWER_IS_BETTER = ("ter", "wer", "cer", "mer", "wil", "edit")  # wip: higher is better
SEPARATOR = " ||| "


def read_nbest(path: Path, lines: int) -> list[list[str]]:
    """The hypotheses of each of `lines` lines, best first, from an n-best file."""
    return read_scored_nbest(path, lines)[0]


def read_scored_nbest(path: Path, lines: int) -> tuple[list[list[str]], list[list[str]]]:
    """The hypotheses of each of `lines` lines, best first, and their scores as written."""
    found: list[list[str]] = [[] for _ in range(lines)]
    scores: list[list[str]] = [[] for _ in range(lines)]
    current = 0
    for number, text in enumerate(iter_lines(path), 1):
        head, _, score = text.rpartition(SEPARATOR)  # the line number before the first separator, the score after
        field, separated, hypothesis = head.partition(SEPARATOR)  # the last: the hypothesis may hold one
        if not separated or not (field.isascii() and field.isdigit()):
            raise NmtkitError(f"{path}:{number}: not an n-best line 'i ||| hypothesis ||| score' (translate --nbest)")
        index = int(field) if len(field) <= 18 else lines  # more digits than any line count: beyond it
        if not current <= index < lines:
            raise NmtkitError(f"{path}:{number}: line number {field[:20]} out of order or beyond the {lines} "
                              "references")
        current = index
        found[index].append(hypothesis)
        scores[index].append(score)
    missing = [index for index, hyps in enumerate(found) if not hyps]
    if missing:
        raise NmtkitError(f"{path}: no hypothesis for line {missing[0]} ({len(missing)} lines without one); "
                          "every reference line needs its n-best")
    return found, scores


def sentence_scores(metric: str, hypotheses: list[str], references: list[str], device: torch.device) -> list[float]:
    """The sentence score of each hypothesis against its reference, higher better; one metric call for all."""
    scorer = get_metric(metric)(metric, [references], EvaluateConfig(), device)
    scores = scorer.sentence_scores(scorer.statistics(hypotheses))
    return [-score for score in scores] if metric in LOWER_IS_BETTER else scores


def best_of(nbest: list[list[str]], references: list[str], metric: str = "chrf",
            device: torch.device | None = None) -> list[int]:
    """The index, in each line's n-best, of its hypothesis closest to the reference (the first of equals)."""
    if len(nbest) != len(references):
        raise NmtkitError(f"{len(nbest)} lines of n-best but {len(references)} references")
    flat = [hyp for hyps in nbest for hyp in hyps]
    scores = sentence_scores(metric, flat, [ref for hyps, ref in zip(nbest, references) for _ in hyps],
                             device or torch.device("cpu"))
    choices, start = [], 0
    for hyps in nbest:
        line = scores[start: start + len(hyps)]
        choices.append(line.index(max(line)))
        start += len(hyps)
    return choices


def best_of_command(nbest: Path, ref: Path, output: Path | None, metric: str = "chrf", device: str = "auto",
                    scores: bool = False) -> dict:
    """Write each line's best hypothesis to `output` (None: stdout), with `scores` as `hypothesis ||| score` (the
    score the n-best gives it: `translate --scores`'s format, which `filter-distilled` reads); returns what was kept,
    as counts."""
    inputs = [("--nbest", nbest), ("--ref", ref)]
    if output is None:
        refuse_stdout_onto(inputs)
    else:
        refuse_onto_inputs([("--output", output)], inputs)
    get_metric(metric)  # an unknown name: the one-line error naming the known ones, before any reading
    references = read_lines(ref)
    hypotheses, written = read_scored_nbest(nbest, len(references))
    choices = best_of(hypotheses, references, metric, pick_device(device))
    best = [hyps[choice] + (SEPARATOR + line_scores[choice] if scores else "")
            for hyps, line_scores, choice in zip(hypotheses, written, choices)]
    if output is None:
        print("".join(line + "\n" for line in best), end="")
    else:
        with open_atomic(output) as file:
            file.writelines(line + "\n" for line in best)
    return {"lines": len(best), "metric": metric, "kept_first": sum(choice == 0 for choice in choices),
            "mean_rank": sum(choices) / max(len(choices), 1), **({"output": str(output)} if output else {})}
