"""How well each sentence-confidence estimator of `nmtkit translate --confidence` tracks translation quality: Kendall's
tau-b and Pearson's r between each estimator and the sentence chrF of the translation against its reference, and what
flagging the least confident lines catches. Results go to docs/benchmarks.md (Sentence confidence).

usage: python benchmarks/experiments/confidence_correlation.py TRANSLATED REF [MIN_WORDS]
  TRANSLATED: the output of `nmtkit translate --confidence mean,min,q10,prob` (text ||| name=value ...)
"""

from __future__ import annotations

import sys

import numpy as np
import sacrebleu


def read_rated(path: str) -> tuple[list[str], dict[str, np.ndarray]]:
    texts, values = [], {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            text, rated = line.rstrip("\n").rsplit(" ||| ", 1)
            texts.append(text)
            for field in rated.split():
                name, value = field.split("=")
                values.setdefault(name, []).append(float(value))
    return texts, {name: np.array(column) for name, column in values.items()}


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b (ties in either variable corrected), over all pairs i < j."""
    upper = np.triu_indices(len(x), 1)
    sx = np.sign(x[:, None] - x[None, :])[upper]
    sy = np.sign(y[:, None] - y[None, :])[upper]
    return float((sx * sy).sum() / np.sqrt(np.count_nonzero(sx) * np.count_nonzero(sy)))


def flagged(confidence: np.ndarray, quality: np.ndarray, share: float) -> tuple[float, float]:
    """Of the `share` least confident lines: the part that is among the `share` worst by chrF (precision at that
    share, random flagging gets `share`), and their mean chrF."""
    count = max(1, round(share * len(quality)))
    least = np.argsort(confidence, kind="stable")[:count]
    worst = set(np.argsort(quality, kind="stable")[:count].tolist())
    return len(worst.intersection(least.tolist())) / count, float(quality[least].mean())


def main(translated: str, reference: str, min_words: str = "1") -> None:
    """The table over the lines whose reference has at least `min_words` words."""
    texts, estimators = read_rated(translated)
    with open(reference, encoding="utf-8") as handle:
        refs = [line.rstrip("\n") for line in handle]
    keep = [index for index, ref in enumerate(refs) if len(ref.split()) >= int(min_words)]
    chrf = np.array([sacrebleu.sentence_chrf(texts[index], [refs[index]]).score for index in keep])
    print(f"{len(keep)} lines of at least {min_words} reference words, mean sentence chrF {chrf.mean():.2f}; least "
          "confident 10% flagged (random: 0.10)")
    print("| estimator | Kendall tau | Pearson r | worst-10% caught | chrF of flagged 10% |")
    print("|---|---:|---:|---:|---:|")
    for name, values in estimators.items():
        values = values[keep]
        caught, flagged_chrf = flagged(values, chrf, 0.1)
        print(f"| {name} | {kendall_tau_b(values, chrf):.3f} | {np.corrcoef(values, chrf)[0, 1]:.3f} | "
              f"{caught:.2f} | {flagged_chrf:.1f} |")
    lengths = np.array([len(texts[index].split()) for index in keep], dtype=float)
    print(f"| (length in words) | {kendall_tau_b(lengths, chrf):.3f} | {np.corrcoef(lengths, chrf)[0, 1]:.3f} | "
          f"{flagged(lengths, chrf, 0.1)[0]:.2f} | {flagged(lengths, chrf, 0.1)[1]:.1f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
