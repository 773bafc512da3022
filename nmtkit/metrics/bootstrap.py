"""Paired bootstrap resampling (Koehn, 2004) of two systems on one test set, as sacrebleu's `--paired-bs`.

A resample draws as many sentences as the test set has, with replacement; both systems are scored on the same
draws. The draws are sacrebleu's (numpy's PCG64 seeded with 12345, `choice` of shape (samples, sentences)),
the resampled sufficient statistics are summed on the device as (draw counts) @ (sentence statistics), and each
resample is scored by the metric's own formula, fed float32 sums as sacrebleu feeds it. The p-value is
sacrebleu's: the share of resampled score differences, centred on their mean, above the observed difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from nmtkit.metrics import corpus_totals

DEFAULT_SAMPLES = 1000
DEFAULT_SEED = 12345  # sacrebleu's default SACREBLEU_SEED
DRAWS_PER_CHUNK = 1 << 24  # sentence draws held at once


@dataclass
class Interval:
    """Mean of the resampled scores and half the width of their 95% interval, printed as mean ± half_width."""

    mean: float
    half_width: float


@dataclass
class PairedBootstrap:
    """The outcome of comparing a system with a baseline."""

    samples: int
    seed: int
    system: float
    baseline: float
    system_interval: Interval
    baseline_interval: Interval
    p_value: float


def draw_indices(sentences: int, samples: int, seed: int) -> Iterator[np.ndarray]:
    """sacrebleu's resamples: the sentences each draws, in chunks of resamples: (S_chunk, N)."""
    rng = np.random.default_rng(seed)
    chunk = max(DRAWS_PER_CHUNK // max(sentences, 1), 1)
    for start in range(0, samples, chunk):
        yield rng.choice(sentences, size=(min(chunk, samples - start), sentences), replace=True)


def draw_counts(sentences: int, samples: int, seed: int, device: torch.device) -> Iterator[Tensor]:
    """How often each sentence is drawn in each resample, in chunks of resamples: (S_chunk, N) float64."""
    for chunk in draw_indices(sentences, samples, seed):
        rows = len(chunk)
        draws = torch.from_numpy(chunk).to(device)
        offsets = torch.arange(rows, device=device)[:, None] * sentences
        yield torch.bincount((draws + offsets).flatten(), minlength=rows * sentences).view(rows, sentences).double()


def resampled_totals(stats: Tensor, samples: int, seed: int) -> np.ndarray:
    """Summed statistics of each resample, float32 like sacrebleu's sums: (S, K); stats (N, K) on the device.

    Integer statistics are summed exactly on the device as (draw counts) @ (statistics). Fractional ones (TER's)
    would round differently, so they are summed as sacrebleu sums them: float32, one drawn sentence after another.
    """
    if stats.is_floating_point():
        values = stats.cpu().numpy().astype(np.float32)
        return np.stack([values[draw].sum(axis=0) for chunk in draw_indices(len(stats), samples, seed)
                         for draw in chunk])
    values = stats.double()
    chunks = [counts @ values for counts in draw_counts(len(stats), samples, seed, stats.device)]
    return torch.cat(chunks).float().cpu().numpy()


def interval(scores: np.ndarray) -> Interval:
    """sacrebleu's `estimate_ci`: the mean, and half the distance between the 2.5% and 97.5% order statistics."""
    ordered = np.sort(scores)
    lower = len(ordered) // 40
    return Interval(float(ordered.mean()), float(0.5 * (ordered[len(ordered) - lower - 1] - ordered[lower])))


def paired_bootstrap(system: Tensor, baseline: Tensor, score: Callable[[Sequence], float],
                     samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> PairedBootstrap:
    """Compare per-sentence statistics (N, K) of a system and a baseline under the corpus formula `score`."""
    system_score, baseline_score = score(corpus_totals(system)), score(corpus_totals(baseline))
    totals = resampled_totals(torch.cat([system, baseline], dim=1), samples, seed)  # (S, 2K)
    width = system.shape[1]
    system_scores = np.array([score(row[:width]) for row in totals])
    baseline_scores = np.array([score(row[width:]) for row in totals])
    differences = np.abs(system_scores - baseline_scores)
    above = np.sum(differences - differences.mean() > abs(baseline_score - system_score)).item()
    return PairedBootstrap(samples, seed, system_score, baseline_score, interval(system_scores),
                           interval(baseline_scores), (above + 1) / (samples + 1))
