"""Minimum Bayes risk decoding on fixed candidates (Kumar & Byrne 2004; Eikema & Aziz 2020; Freitag et al. 2022):
of a line's N candidates y_1..y_N, output the one of highest expected utility against the others, each taken as a
pseudo-reference drawn from the model,

    E(y_i) = 1 / (N - 1) * sum_{j != i} u(y_i, y_j),

u a sentence-level metric of `nmtkit evaluate` (`nmtkit.registry.get_metric`), with y_i as hypothesis and y_j as
reference; a metric where lower is better (TER) counts negated. Every (hypothesis, reference) pair of a batch of
lines is scored by one call of the metric on its device; chrF's sentence scores are sacrebleu's formula computed on
that device in float64 for all pairs at once (`nmtkit.metrics.chrf.f_scores`). Candidates written more than once (as
samples often are) are scored once and weighed by their count; ties go to the earliest candidate (a beam's best).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

import nmtkit.metrics.builtin  # noqa: F401  (registers the metrics `get_metric` finds)
from nmtkit.errors import NmtkitError
from nmtkit.metrics.chrf import DeviceCHRF, f_scores
from nmtkit.metrics.options import EvaluateConfig
from nmtkit.registry import get_metric

LOWER_IS_BETTER = ("ter",)  # utilities whose score falls as the translations agree more
UTILITIES = ("chrf", "chrf++", "bleu", "ter")


def check_utility(name: str) -> None:
    """A one-line error for a utility MBR cannot use."""
    if name not in UTILITIES:
        raise NmtkitError(f"unknown MBR utility {name!r}; choose from {', '.join(UTILITIES)}")


def distinct(candidates: Sequence[str]) -> tuple[list[str], list[int], list[int]]:
    """The distinct texts of `candidates` in order of first appearance, how many times each is written, and the
    index in `candidates` of each one's first appearance."""
    order: dict[str, int] = {}
    counts: list[int] = []
    first: list[int] = []
    for index, text in enumerate(candidates):
        if text not in order:
            order[text] = len(counts)
            counts.append(0)
            first.append(index)
        counts[order[text]] += 1
    return list(order), counts, first


def pair_utilities(name: str, hypotheses: list[str], references: list[str], device: torch.device) -> Tensor:
    """u(hypotheses[k], references[k]) for each k: (K,) float64 on the CPU, higher is better."""
    if not hypotheses:
        return torch.zeros(0, dtype=torch.float64)
    metric = get_metric(name)(name, [references], EvaluateConfig(), device)
    stats = metric.statistics(hypotheses)
    if isinstance(metric, DeviceCHRF):  # every pair's sentence chrF at once, sacrebleu's float64 operations
        orders = metric.metric.order
        scores = f_scores(stats.view(-1, orders, 3), metric.metric.beta, metric.metric.eps_smoothing).cpu()
    else:
        scores = torch.tensor(metric.sentence_scores(stats), dtype=torch.float64)
    return -scores if name in LOWER_IS_BETTER else scores


def utility_matrices(name: str, candidates: Sequence[Sequence[str]],
                     device: torch.device) -> list[Tensor]:
    """Each line's (U, U) float64 matrix of u(hypothesis i, reference j) over its U distinct candidates, the pairs of
    every line scored by one call of the metric."""
    texts = [distinct(line)[0] for line in candidates]
    hypotheses = [hyp for line in texts for hyp in line for _ in line]
    references = [ref for line in texts for _ in line for ref in line]
    scores = pair_utilities(name, hypotheses, references, device)
    matrices, start = [], 0
    for line in texts:
        size = len(line)
        matrices.append(scores[start: start + size * size].view(size, size))
        start += size * size
    return matrices


def expected_utilities(matrix: Tensor, counts: Sequence[int]) -> Tensor:
    """E(y_i) of each distinct candidate i (rows of `matrix`), against the N - 1 other candidates of the line, each
    distinct one `counts` times: (U,) float64. A line of one candidate gets 0."""
    weights = torch.tensor(counts, dtype=torch.float64)
    total = int(weights.sum())
    if total < 2:
        return torch.zeros(len(counts), dtype=torch.float64)
    return (matrix @ weights - matrix.diagonal()) / (total - 1)


LINES_AT_ONCE = 64  # lines whose utilities one metric call counts: `check` runs between such groups


def mbr_choices(candidates: Sequence[Sequence[str]], utility: str = "chrf", device: torch.device | None = None,
                check: Callable[[], None] | None = None) -> list[int]:
    """The index, in each line's `candidates`, of the candidate of highest expected utility (the first of equals).
    `check` is called before each group of LINES_AT_ONCE lines and stops the work by raising (`nmtkit serve`'s time
    budget: TER's pairs, scored in Python, can take seconds)."""
    check_utility(utility)
    device = device or torch.device("cpu")
    choices = []
    for start in range(0, len(candidates), LINES_AT_ONCE):
        if check is not None:
            check()
        group = candidates[start: start + LINES_AT_ONCE]
        for line, matrix in zip(group, utility_matrices(utility, group, device)):
            _, counts, first = distinct(line)
            best = int(expected_utilities(matrix, counts).argmax()) if counts else 0
            choices.append(first[best] if first else 0)
    return choices
