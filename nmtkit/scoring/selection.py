"""The dual conditional cross-entropy score of a pair and which pairs a share or a threshold keeps: pure functions
over arrays, one element a pair (Junczys-Dowmunt 2018, "Dual Conditional Cross-Entropy Filtering of Noisy Parallel
Corpora", WMT 2018: its adequacy score adq(x, y), without the paper's further language-ID and domain factors).

Each pair holds a reason code (`REASONS`): 0 while it is kept, else the first reason it was removed for. A pair the
models did not score (an empty side, longer than a model reads) has an infinite cost, a score of 0, and its own
reason; the keep share counts the scored pairs only.
"""

from __future__ import annotations

import math

import numpy as np

REASONS = ("", "empty", "too_long", "min_score", "keep_share")
EMPTY, TOO_LONG, MIN_SCORE, KEEP_SHARE = 1, 2, 3, 4


def dual_cost(h_fwd: np.ndarray, h_bwd: np.ndarray) -> np.ndarray:
    """|H_A(y|x) - H_B(x|y)| + (H_A(y|x) + H_B(x|y)) / 2, the paper's adq without its exp(-): low when both
    directions find the pair likely and agree on how likely; infinite where either entropy is (an unscored pair)."""
    with np.errstate(invalid="ignore"):  # inf - inf of a pair neither model scored
        cost = np.abs(h_fwd - h_bwd) + 0.5 * (h_fwd + h_bwd)
    return np.where(np.isinf(h_fwd) | np.isinf(h_bwd), np.inf, cost)


def adequacy(cost: np.ndarray) -> np.ndarray:
    """exp(-cost), in (0, 1] for a scored pair (0 where the cost is infinite, or so large that it underflows)."""
    return np.exp(-cost)


def kept_count(keep: float, scored: int) -> int:
    """How many of `scored` pairs a keep share of `keep` keeps: ceil(keep x scored), so that any share above 0
    keeps a pair; the product is rounded to 9 digits first, so that 0.7 x 10 keeps 7, not 8."""
    return min(scored, math.ceil(round(keep * scored, 9)))


def removal_reasons(unscored: np.ndarray, cost: np.ndarray, keep: float, min_score: float) -> np.ndarray:
    """Each pair's reason code: `unscored` (EMPTY, TOO_LONG or 0) where set; MIN_SCORE for a scored pair whose
    score is below `min_score`; KEEP_SHARE for one outside the best `kept_count(keep, scored)` pairs by cost (ties
    go to the earlier line). A pair removed for both is counted under MIN_SCORE."""
    reasons = unscored.astype(np.int8, copy=True)
    scored = np.flatnonzero(reasons == 0)
    if min_score > 0:
        reasons[scored[adequacy(cost[scored]) < min_score]] = MIN_SCORE
    ranked = scored[np.argsort(cost[scored], kind="stable")]
    outside = ranked[kept_count(keep, len(scored)):]
    reasons[outside[reasons[outside] == 0]] = KEEP_SHARE
    return reasons


def reason_counts(reasons: np.ndarray, codes: tuple[int, ...]) -> dict[str, int]:
    """How many pairs each of `codes` removed, by name."""
    counts = np.bincount(reasons, minlength=len(REASONS))
    return {REASONS[code]: int(counts[code]) for code in codes}
