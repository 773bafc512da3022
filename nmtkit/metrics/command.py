"""`nmtkit evaluate`: score a hypothesis file against one or more reference files on a torch device.

BLEU, chrF and TER print sacrebleu's own strings and signatures; WER, CER, MER, WIL and WIP are jiwer's; with a
baseline the systems are compared by paired bootstrap resampling (Koehn, 2004). Unless a tokenizer is given, BLEU's
suits the target language: the one given, else the one the first reference file's suffix names (test.zh, test.ja).
A directory of test sets (`nmtkit robustness`'s) is scored set by set into one table, the clean set first.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

import nmtkit.metrics.builtin  # noqa: F401 (registers the metrics that build_metric finds)
from nmtkit.data.corpus import decode_line, read_lines
from nmtkit.data.robustness import read_record
from nmtkit.data.robustness_config import CLEAN
from nmtkit.errors import NmtkitError
from nmtkit.metrics import Metric
from nmtkit.metrics.bootstrap import paired_bootstrap
from nmtkit.metrics.options import LANGUAGE_CODE, EvaluateConfig
from nmtkit.registry import get_metric, metric_names
from nmtkit.runtime.device import pick_device

NOT_LANGUAGES = frozenset({"txt", "tsv", "csv", "hyp", "ref", "src", "tgt", "out", "tok", "bpe", "sgm", "xml", "log",
                           "gz", "xz", "bz2", "zst"})  # file suffixes that look like language codes
log = logging.getLogger(__name__)
METRIC_TITLES = {"bleu": "BLEU", "chrf": "chrF", "chrf++": "chrF++", "ter": "TER", "wer": "WER", "cer": "CER",
                 "mer": "MER", "wil": "WIL", "wip": "WIP"}  # the sets' table's column heads


def language_of(path: str | Path) -> str | None:
    """The language code a file's suffix names (test.zh, newstest.de_DE), or None (test.txt, hyp)."""
    suffix = Path(path).suffix[1:]
    return suffix if LANGUAGE_CODE.fullmatch(suffix) and suffix.lower() not in NOT_LANGUAGES else None


def check_config(config: EvaluateConfig) -> None:
    """Known metric names (each metric's options were checked by their class when the config was built)."""
    names = metric_names()
    unknown = [name for name in config.metrics if name not in names]
    if unknown or not config.metrics:
        problem = f"unknown metric {', '.join(map(repr, unknown))}" if unknown else "no metric given"
        raise NmtkitError(f"{problem}; choose from {', '.join(names)}")


def build_metric(name: str, references: Sequence[Sequence[str]], config: EvaluateConfig,
                 device: torch.device) -> Metric:
    """The metric registered as `name`, bound to the references."""
    return get_metric(name)(name, references, config, device)


def _check_streams(hypotheses: Sequence[str], references: Sequence[Sequence[str]],
                   baseline: Sequence[str] | None) -> None:
    """One line per hypothesis in every stream. An empty reference line is an empty reference, as in sacrebleu; a
    missing one (None, which sacrebleu's API leaves out of that sentence's references) is refused."""
    for stream in [*references, *([baseline] if baseline is not None else [])]:
        if len(stream) != len(hypotheses):
            raise NmtkitError(f"{len(hypotheses)} hypotheses but a reference or baseline has {len(stream)} lines")
    for number, stream in enumerate(references, 1):
        if None in stream:
            raise NmtkitError(f"reference {number} has no line {list(stream).index(None) + 1} (None); give every "
                              f"reference stream every line, empty ones as ''")


def evaluate(hypotheses: Sequence[str], references: Sequence[Sequence[str]], config: EvaluateConfig,
             baseline: Sequence[str] | None = None) -> dict[str, dict]:
    """{metric: report} for the hypotheses; with a baseline, each report gains a paired `bootstrap` entry."""
    check_config(config)
    _check_streams(hypotheses, references, baseline)
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
    check_config(config)
    if not refs:
        raise NmtkitError("evaluate needs at least one --ref file")
    if not hypotheses:
        raise NmtkitError(f"{hyp_name} is empty; there is nothing to score")
    references = [_aligned(path, len(hypotheses), hyp_name) for path in refs]
    if len(references) > 1:
        for path, lines in zip(refs, references):
            _warn_empty_lines(path, lines)
    baseline = _aligned(compare, len(hypotheses), hyp_name) if compare else None
    if config.lang is None:
        config = dataclasses.replace(config, lang=language_of(refs[0]))
    return evaluate(hypotheses, references, config, baseline)


def _warn_empty_lines(path: Path, lines: Sequence[str]) -> None:
    """Say so when one of several references has empty lines: probably missing translations, which sacrebleu (and
    so nmtkit) scores as empty references, not as absent ones."""
    empty = [number for number, line in enumerate(lines, 1) if not line.strip()]
    if empty:
        log.warning("%s: %d of %d lines are empty (first: line %d); they are scored as empty references, as "
                    "sacrebleu does", path, len(empty), len(lines), empty[0])


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


def evaluate_command(hyp: str, refs: Sequence[Path] | None, config: EvaluateConfig, compare: Path | None = None,
                     sets: Path | None = None, as_json: bool = False) -> str:
    """What `nmtkit evaluate` prints: the scores of hypothesis file `hyp` ("-": stdin) against `refs`, or with
    `sets`, those of each set's hypotheses in directory `hyp` (`evaluate_sets`)."""
    if sets is not None:
        if refs or compare is not None or config.sentence:
            raise NmtkitError("--sets scores each set against its own <set>.ref: drop --ref, --compare and --sentence")
        return render_sets(evaluate_sets(sets, Path(hyp), config), as_json)
    hypotheses = read_stream_lines(sys.stdin.buffer) if hyp == "-" else read_lines(hyp)
    return render(evaluate_files(hypotheses, "<stdin>" if hyp == "-" else hyp, refs or [], config, compare), as_json)


def set_names(sets: Path) -> tuple[list[str], str | None]:
    """The sets of directory `sets` and their target language: those its sets.json lists (`nmtkit robustness`),
    with its reference file's language; else each <set>.ref in it, by name, clean first."""
    if not sets.is_dir():
        raise NmtkitError(f"--sets {sets} is not a directory")
    record = read_record(sets)
    if record is not None:
        return [entry["name"] for entry in record["sets"]], language_of(str(record.get("ref", "")))
    names = sorted((path.name[: -len(".ref")] for path in sets.glob("*.ref")), key=lambda name: (name != CLEAN, name))
    if not names:
        raise NmtkitError(f"--sets {sets} holds no <set>.ref file (write the sets with nmtkit robustness)")
    return names, None


def evaluate_sets(sets: Path, hyp_dir: Path, config: EvaluateConfig) -> dict[str, tuple[int, dict[str, dict]]]:
    """{set: (lines, {metric: report})} for each set of directory `sets` (`set_names`), scoring hypotheses
    `hyp_dir`/<set>.hyp against `sets`/<set>.ref; a missing hypothesis file is an error naming it."""
    names, lang = set_names(sets)
    if not hyp_dir.is_dir():
        raise NmtkitError(f"with --sets, --hyp is the directory of the sets' translations (<set>.hyp); {hyp_dir} "
                          "is not one")
    missing = [name for name in names if not (hyp_dir / f"{name}.hyp").is_file()]
    if missing:
        more = f" nor of {len(missing) - 1} more" if len(missing) > 1 else ""
        raise NmtkitError(f"no translation of set {missing[0]!r} ({hyp_dir / (missing[0] + '.hyp')}){more}; "
                          f"translate each {sets}/<set>.src into {hyp_dir}/<set>.hyp")
    config = dataclasses.replace(config, lang=config.lang or lang)
    scores = {}
    for name in names:
        hyp_path = hyp_dir / f"{name}.hyp"
        hypotheses = read_lines(hyp_path)
        scores[name] = (len(hypotheses), evaluate_files(hypotheses, str(hyp_path), [sets / f"{name}.ref"], config))
    return scores


def render_sets(scores: dict[str, tuple[int, dict[str, dict]]], as_json: bool = False) -> str:
    """The sets' scores as one JSON object keyed by set ({"lines": n, metric: report}), or a table (set, lines,
    each metric's score) followed by each metric's signature."""
    if as_json:
        return json.dumps({name: {"lines": lines, **json.loads(render(results, as_json=True))}
                           for name, (lines, results) in scores.items()}, ensure_ascii=False)
    first = next(iter(scores.values()))[1]
    titles = {metric: METRIC_TITLES.get(metric, metric) for metric in first}
    width = max(len("set"), *map(len, scores))
    rows = [f"{'set':<{width}}  {'lines':>6}" + "".join(f"  {title:>7}" for title in titles.values())]
    for name, (lines, results) in scores.items():
        cells = "".join(f"  {results[metric]['score']:>7.2f}" for metric in titles)
        rows.append(f"{name:<{width}}  {lines:>6}{cells}")
    rows += [f"{title} signature: {first[metric]['signature']}" for metric, title in titles.items()
             if "signature" in first[metric]]
    return "\n".join(rows)
