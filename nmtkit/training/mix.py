"""The data a training epoch mixes: with several language pairs (multilingual data), each pair's share of an epoch
follows `train.pair_temperature`; otherwise every kept pair once."""

from __future__ import annotations

import numpy as np

from nmtkit.data.dataset import ParallelData


def epoch_batches(data: ParallelData, max_tokens: int, seed: int, epoch: int, temperature: float) -> list[np.ndarray]:
    """The training batches of `epoch`, the same for the same (seed, epoch) (exact resume mid-epoch). With several
    language pairs and a `temperature` other than 1, the epoch is drawn pair by pair (`temperature_sample`), from
    the same random generator that then orders the batches."""
    rng = np.random.default_rng([seed, epoch])
    lines = data.kept
    if data.corpus is not None and temperature != 1.0:
        lines = data.kept[temperature_sample(data.corpus[data.kept], temperature, rng)]
    return data.batches_of(lines, max_tokens, rng)


def temperature_sample(line_pairs: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Positions in `line_pairs` (each line's language pair) for an epoch of as many lines, in which pair i takes a
    share proportional to n_i^(1/temperature) (Arivazhagan et al. 2019, Section 4.2): 1 keeps the data's shares,
    larger values give small pairs more (drawn again when they run out), large ones less."""
    counts = np.bincount(line_pairs)
    shares = counts.astype(np.float64) ** (1.0 / temperature)
    shares /= shares.sum()
    drawn = []
    for pair, share in enumerate(shares):
        members = np.flatnonzero(line_pairs == pair)
        size = int(round(share * len(line_pairs)))
        if len(members) and size:
            drawn.append(rng.choice(members, size=size, replace=size > len(members)))
    return np.sort(np.concatenate(drawn)) if drawn else np.arange(0)
