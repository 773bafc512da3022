"""`nmtkit evaluate`: score a hypothesis file against one or more reference files on a torch device.

BLEU and chrF print sacrebleu's own strings and signatures; WER and CER are jiwer's; with a baseline the
systems are compared by paired bootstrap resampling (Koehn, 2004).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from nmtkit.config import option
from nmtkit.data.corpus import decode_line, read_lines
from nmtkit.errors import NmtkitError
from nmtkit.metrics import Metric
from nmtkit.metrics.bleu import DeviceBLEU
from nmtkit.metrics.bootstrap import DEFAULT_SAMPLES, DEFAULT_SEED, paired_bootstrap
from nmtkit.metrics.chrf import DeviceCHRF
from nmtkit.metrics.edit import DeviceEdit, EditCosts
from nmtkit.metrics.wer import DeviceWER
from nmtkit.runtime import pick_device

METRICS = ("bleu", "chrf", "chrf++", "wer", "cer", "edit")


@dataclass
class EvaluateConfig:
    """What `nmtkit evaluate` computes and how."""

    metrics: list[str] = option(["bleu", "chrf"], f"metrics to compute: {', '.join(METRICS)}")
    device: str = option("auto", "auto (CUDA when present), cpu, cuda or cuda:N")
    lowercase: bool = option(False, "case-insensitive BLEU and chrF")
    tokenize: str | None = option(None, "sacrebleu BLEU tokenizer: 13a (default), intl, zh, char, none, ...")
    smooth: str = option("exp", "BLEU smoothing: exp, floor, add-k or none")
    edit_costs: str = option("1,1,1", "edit distance costs 'ins,del,sub' (1,1,2 is Jurafsky and Martin's)")
    edit_unit: Literal["char", "word"] = option("char", "edit distance over characters or whitespace tokens")
    sentence: bool = option(False, "also score each sentence (sentence BLEU uses effective order)")
    samples: int = option(DEFAULT_SAMPLES, "paired bootstrap resamples when comparing with a baseline")
    seed: int = option(DEFAULT_SEED, "seed of the bootstrap resampling (sacrebleu's default)")

    def __post_init__(self):
        unknown = [name for name in self.metrics if name not in METRICS]
        if unknown or not self.metrics:
            problem = f"unknown metric {', '.join(map(repr, unknown))}" if unknown else "no metric given"
            raise NmtkitError(f"{problem}; choose from {', '.join(METRICS)}")
        if self.edit_unit not in ("char", "word"):
            raise NmtkitError(f"edit unit must be char or word, not {self.edit_unit!r}")
        if self.samples < 1:
            raise NmtkitError(f"bootstrap needs at least one resample, not {self.samples}")
        EditCosts.parse(self.edit_costs)


def build_metric(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
                 device: torch.device) -> Metric:
    """The metric called `name`, bound to the references."""
    if name == "bleu":
        return DeviceBLEU(references, device, config.lowercase, config.tokenize, config.smooth)
    if name in ("chrf", "chrf++"):
        return DeviceCHRF(references, device, word_order=2 if name == "chrf++" else 0, lowercase=config.lowercase)
    if name in ("wer", "cer"):
        return DeviceWER(references, device, characters=name == "cer")
    return DeviceEdit(references, device, EditCosts.parse(config.edit_costs), config.edit_unit == "char")


def evaluate(hypotheses: Sequence[str], references: Sequence[Sequence[str]], config: EvaluateConfig,
             baseline: Sequence[str] | None = None) -> dict[str, dict]:
    """{metric: report} for the hypotheses; with a baseline, each report gains a paired `bootstrap` entry."""
    for stream in [*references, *([baseline] if baseline is not None else [])]:
        if len(stream) != len(hypotheses):
            raise NmtkitError(f"{len(hypotheses)} hypotheses but a reference or baseline has {len(stream)} lines")
    device = pick_device(config.device)
    results = {}
    for name in config.metrics:
        metric = build_metric(name, references, config, device)
        stats = metric.statistics(hypotheses)
        result = metric.report(stats)
        if config.sentence:
            result["sentences"] = metric.sentence_scores(stats)
        if baseline is not None:
            comparison = paired_bootstrap(stats, metric.statistics(baseline), metric.score, config.samples,
                                          config.seed)
            result["bootstrap"] = dataclasses.asdict(comparison)
        results[name] = result
    return results


def read_stream_lines(stream) -> list[str]:
    """Lines of a binary stream (stdin), validated like files."""
    data = stream.read()
    if data.endswith(b"\n"):
        data = data[:-1]
    return [decode_line(raw, "<stdin>", number) for number, raw in enumerate(data.split(b"\n"), 1)] if data else []


def _aligned(path: str | Path, count: int, hyp_name: str) -> list[str]:
    lines = read_lines(path)
    if len(lines) != count:
        raise NmtkitError(f"{path} has {len(lines)} lines but {hyp_name} has {count}")
    return lines


def evaluate_files(hypotheses: list[str], hyp_name: str, refs: Sequence[Path], config: EvaluateConfig,
                   compare: Path | None = None) -> dict[str, dict]:
    """Check that every reference (and the baseline) has one line per hypothesis, then score."""
    if not refs:
        raise NmtkitError("evaluate needs at least one --ref file")
    if not hypotheses:
        raise NmtkitError(f"{hyp_name} is empty; there is nothing to score")
    references = [_aligned(path, len(hypotheses), hyp_name) for path in refs]
    baseline = _aligned(compare, len(hypotheses), hyp_name) if compare else None
    return evaluate(hypotheses, references, config, baseline)


def _bootstrap_line(comparison: dict) -> str:
    system, baseline = comparison["system_interval"], comparison["baseline_interval"]
    return (f"  paired bootstrap ({comparison['samples']} resamples, seed {comparison['seed']}): "
            f"p = {comparison['p_value']:.4f}; system {comparison['system']:.4f} "
            f"(μ = {system['mean']:.4f} ± {system['half_width']:.4f}), baseline {comparison['baseline']:.4f} "
            f"(μ = {baseline['mean']:.4f} ± {baseline['half_width']:.4f})")


def _sentence_table(results: dict[str, dict]) -> list[str]:
    names = list(results)
    rows = ["sentence\t" + "\t".join(names)]
    for index, scores in enumerate(zip(*(results[name]["sentences"] for name in names)), 1):
        rows.append(f"{index}\t" + "\t".join(f"{score:.4f}" for score in scores))
    return rows


def render(results: dict[str, dict], as_json: bool = False) -> str:
    """One JSON object keyed by metric, or readable lines: the score, its signature, the comparison."""
    if as_json:
        return json.dumps({name: {key: value for key, value in result.items() if key != "text"}
                           for name, result in results.items()}, ensure_ascii=False)
    lines = []
    for result in results.values():
        lines.append(result["text"])
        if "signature" in result:
            lines.append(f"  signature: {result['signature']}")
        if "bootstrap" in result:
            lines.append(_bootstrap_line(result["bootstrap"]))
    if any("sentences" in result for result in results.values()):
        lines.extend(_sentence_table(results))
    return "\n".join(lines)
