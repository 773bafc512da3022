"""Sentence confidence from the model's own token probabilities: each translation teacher-forced through the model
(`nmtkit.decoding.rescoring`, or CTranslate2's `score_batch`) gives log p(y_t | y_<t, x) for each of its tokens and
its EOS, and an estimator sums them up in one number, higher for a translation the model is surer of.

- `mean`: the length-normalised log-probability, (1/|Y|) sum_t log p_t (|Y| counting the EOS);
- `min`: the least probable token's log-probability (one wrong word makes a bad line, however sure the rest is);
- `q10`: the 10% quantile of the token log-probabilities (linear interpolation, as numpy's default), between the
  two;
- `prob`: the mean token probability, (1/|Y|) sum_t p_t, in which one very improbable token weighs at most 1/|Y|.

Scores are of the chosen translation alone, in float64 sums of the model's float32 log-probabilities: the same line
gets the same confidence (within float rounding) in any batch. This module imports no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from nmtkit.errors import NmtkitError


def quantile(values: Sequence[float], share: float) -> float:
    """The `share` quantile of `values` by linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


ESTIMATORS: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": lambda log_probs: math.fsum(log_probs) / len(log_probs),
    "min": min,
    "q10": lambda log_probs: quantile(log_probs, 0.1),
    "prob": lambda log_probs: math.fsum(math.exp(value) for value in log_probs) / len(log_probs),
}


def parse_estimators(text: str) -> list[str]:
    """The estimator names of a comma-separated list (`--confidence mean,min`); a one-line error for an unknown one
    or an empty list."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ESTIMATORS]
    if unknown or not names:
        what = f"unknown estimator {unknown[0]!r}" if unknown else "no estimator named"
        raise NmtkitError(f"--confidence: {what}; choose from {', '.join(ESTIMATORS)}")
    return names


def confidences(log_probs: Sequence[float], names: Sequence[str]) -> dict[str, float]:
    """Each named estimator of one translation's token log-probabilities (its EOS included); a translation that was
    not searched (an empty line) has none and gets 0 (certain) from each."""
    if not log_probs:
        return {name: 0.0 if name != "prob" else 1.0 for name in names}
    return {name: float(ESTIMATORS[name](log_probs)) for name in names}


def format_confidences(values: dict[str, float]) -> str:
    """`mean=-0.3127 min=-2.0410`: each estimator's name and value, in order."""
    return " ".join(f"{name}={value:.4f}" for name, value in values.items())
