"""BLEU and chrF through sacrebleu with several references."""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF

from nmtkit.errors import NmtkitError

METRICS = ("bleu", "chrf")


def _metric(name: str, lowercase: bool, tokenize: str | None):
    if name == "bleu":
        return BLEU(lowercase=lowercase, tokenize=tokenize)
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    raise NmtkitError(f"unknown metric {name!r}; choose from {', '.join(METRICS)}")


def score_corpus(hypotheses: list[str], references: list[list[str]], metrics: list[str],
                 lowercase: bool = False, tokenize: str | None = None) -> dict[str, dict]:
    """{metric: {"score", "signature", "text", ...}} for a corpus against one or more reference streams."""
    results = {}
    for name in metrics:
        metric = _metric(name, lowercase, tokenize)
        score = metric.corpus_score(hypotheses, references)
        result = {"score": score.score, "signature": str(metric.get_signature()), "text": str(score)}
        if name == "bleu":
            result.update(precisions=score.precisions, bp=score.bp, sys_len=score.sys_len, ref_len=score.ref_len)
        results[name] = result
    return results
