"""Scoring speed of nmtkit's device metrics against the reference tools, on the same text, in one run.

For each size in --lines, a synthetic but realistic test set is built (seeded): references are sentences of
Zipf-distributed pseudo-words with attached punctuation, numbers and capitals, about 22 words (130 characters)
long; hypotheses are the references with about 8% of the words substituted, 5% deleted and 5% inserted. Then:

- BLEU: sacrebleu `BLEU().corpus_score` against nmtkit `DeviceBLEU` (13a tokenization by sacrebleu's own class,
  in forked worker processes; n-gram counting on --device). Both times include tokenizing the references.
- chrF: sacrebleu `CHRF().corpus_score` against nmtkit `DeviceCHRF`.
- WER: jiwer against nmtkit `DeviceWER` (both count S, D, I and H). jiwer keeps an alignment object per
  edit operation, gigabytes for a million lines, so it runs on chunks of 100,000 lines whose S, D, I and H
  are summed: the same corpus WER as one `jiwer.wer` call.
- edit: character Levenshtein distance of every pair: rapidfuzz `process.cpdist` with one worker and with all
  cores, against nmtkit's batched bit-parallel programme on --device (`metrics.edit.levenshtein`, no
  rapidfuzz fast path).

Every row checks that both tools give the same score (BLEU: the same printed string; edit: every distance).
On CUDA the nmtkit timings synchronise the device before stopping the clock, and a small warm-up run (not
timed) loads the kernels first.

Usage: python benchmarks/metrics_speed.py [--lines 100000 1000000] [--device auto] [--metrics bleu chrf wer edit]
"""

from __future__ import annotations

import argparse
import string
import time
from collections.abc import Callable

import jiwer
import numpy as np
import torch
from rapidfuzz.distance import Levenshtein
from rapidfuzz.process import cpdist
from sacrebleu.metrics import BLEU, CHRF

from nmtkit.metrics.bleu import DeviceBLEU
from nmtkit.metrics.chrf import DeviceCHRF
from nmtkit.metrics.edit import levenshtein
from nmtkit.metrics.ngrams import char_tokens
from nmtkit.metrics.wer import DeviceWER
from nmtkit.runtime import pick_device

NUMBERS = ["1999", "2024", "3.5", "10,000", "42", "7.2%", "$300", "1/2"]


def vocabulary(rng: np.random.Generator, size: int = 30000) -> np.ndarray:
    """Pseudo-words, longer the rarer (about 2 letters for the commonest, 8 for rank 10000), one in ten
    capitalised (names), and some numbers."""
    letters = np.array(list(string.ascii_lowercase))
    lengths = np.clip(np.round(rng.normal(1.6 + 1.6 * np.log10(np.arange(size) + 10), 1.0)), 1, 14).astype(int)
    words = ["".join(rng.choice(letters, size=length)) for length in lengths]
    words = [word.capitalize() if rng.random() < 0.1 else word for word in words]
    return np.array(words[:50] + NUMBERS + words[50:], dtype=object)


def zipf_ids(rng: np.random.Generator, vocab_size: int, count: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
    return rng.choice(vocab_size, size=count, p=weights / weights.sum())


def with_punctuation(rng: np.random.Generator, words: np.ndarray) -> np.ndarray:
    """Words with a comma, semicolon, colon or closing bracket attached to about 7% of them."""
    marks = np.array(["", ",", ";", ":", ")"], dtype=object)
    return words + marks[rng.choice(5, size=len(words), p=[0.93, 0.05, 0.008, 0.006, 0.006])]


def edited(rng: np.random.Generator, tokens: np.ndarray, line_of: np.ndarray, words: np.ndarray):
    """Substitute 8%, delete 5% and insert 5% of the tokens: the new tokens and the line of each."""
    draw = rng.random(len(tokens))
    substitutes = with_punctuation(rng, words[zipf_ids(rng, len(words), len(tokens))])
    tokens = np.where(draw < 0.08, substitutes, tokens)
    copies = np.where((draw >= 0.08) & (draw < 0.13), 0, np.where((draw >= 0.13) & (draw < 0.18), 2, 1))
    new_tokens, new_lines = np.repeat(tokens, copies), np.repeat(line_of, copies)
    second = (np.cumsum(copies) - copies)[copies == 2] + 1  # the inserted word follows the one it was drawn for
    new_tokens[second] = words[zipf_ids(rng, len(words), len(second))]
    return new_tokens, new_lines


def join_lines(tokens: np.ndarray, line_of: np.ndarray, ends: np.ndarray) -> list[str]:
    """Sentences from tokens: the first word capitalised, a full stop (or ? or !) at the end."""
    bounds = np.searchsorted(line_of, np.arange(len(ends) + 1))
    return [" ".join(tokens[start:end]).capitalize() + end_mark if end > start else ""
            for start, end, end_mark in zip(bounds[:-1], bounds[1:], ends)]


def synthetic_test_set(lines: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(hypotheses, references) with about 22 words per line."""
    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    lengths = np.clip(rng.lognormal(3.0, 0.5, size=lines), 1, 120).astype(np.int64)
    line_of = np.repeat(np.arange(lines), lengths)
    ref_tokens = with_punctuation(rng, words[zipf_ids(rng, len(words), len(line_of))])
    hyp_tokens, hyp_lines = edited(rng, ref_tokens, line_of, words)
    ends = np.array([".", "?", "!"], dtype=object)[rng.choice(3, size=lines, p=[0.9, 0.07, 0.03])]
    return join_lines(hyp_tokens, hyp_lines, ends), join_lines(ref_tokens, line_of, ends)


def timed(device: torch.device, function: Callable, *args):
    """Seconds taken by function(*args), and its result; on CUDA the device is synchronised around it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = function(*args)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result


def nmtkit_bleu(hyps, refs, device):
    metric = DeviceBLEU([refs], device)
    return str(metric.corpus(metric.statistics(hyps).sum(dim=0).tolist()))


def nmtkit_chrf(hyps, refs, device):
    metric = DeviceCHRF([refs], device)
    return metric.score(metric.statistics(hyps).sum(dim=0).tolist())


def nmtkit_wer(hyps, refs, device):
    metric = DeviceWER([refs], device)
    return metric.report(metric.statistics(hyps))["score"]


def nmtkit_edit(hyps, refs, device):
    return levenshtein(char_tokens(refs, device), char_tokens(hyps, device)).distance.numpy()


def jiwer_wer(hyps: list[str], refs: list[str], chunk: int = 100000) -> float:
    """jiwer's corpus WER, computed on chunks of lines to bound its memory."""
    outputs = [jiwer.process_words(refs[start:start + chunk], hyps[start:start + chunk])
               for start in range(0, len(refs), chunk)]
    errors = sum(output.substitutions + output.deletions + output.insertions for output in outputs)
    return errors / sum(output.hits + output.substitutions + output.deletions for output in outputs)


CASES = {  # metric: (nmtkit, [(reference tool, its function)])
    "bleu": (nmtkit_bleu, [("sacrebleu", lambda hyps, refs: str(BLEU().corpus_score(hyps, [refs])))]),
    "chrf": (nmtkit_chrf, [("sacrebleu", lambda hyps, refs: CHRF().corpus_score(hyps, [refs]).score)]),
    "wer": (nmtkit_wer, [("jiwer", jiwer_wer)]),
    "edit": (nmtkit_edit, [
        ("rapidfuzz 1 core", lambda hyps, refs: cpdist(refs, hyps, scorer=Levenshtein.distance, workers=1)),
        ("rapidfuzz all cores", lambda hyps, refs: cpdist(refs, hyps, scorer=Levenshtein.distance, workers=-1))]),
}


def same(ours, theirs) -> bool:
    return bool(np.array_equal(ours, theirs)) if isinstance(ours, np.ndarray) else ours == theirs


def run(metric: str, hyps: list[str], refs: list[str], device: torch.device) -> list[tuple]:
    ours, references = CASES[metric]
    ours(hyps[:100], refs[:100], device)  # warm-up: kernels, caches of imports
    seconds, result = timed(device, ours, hyps, refs, device)
    rows = []
    for tool, theirs in references:
        their_seconds, their_result = timed(torch.device("cpu"), theirs, hyps, refs)
        rows.append((metric, len(hyps), tool, their_seconds, seconds, their_seconds / seconds,
                     same(result, their_result)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[100000, 1000000], help="test set sizes")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--metrics", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    device = pick_device(args.device)
    print(f"device: {device}, torch threads: {torch.get_num_threads()}")
    print(f"{'metric':6} {'lines':>8} {'reference':20} {'ref s':>8} {'nmtkit s':>9} {'ratio':>7}  same")
    for lines in args.lines:
        hyps, refs = synthetic_test_set(lines)
        for metric in args.metrics:
            for name, size, tool, their_seconds, seconds, ratio, equal in run(metric, hyps, refs, device):
                print(f"{name:6} {size:8d} {tool:20} {their_seconds:8.2f} {seconds:9.2f} {ratio:6.1f}x  {equal}",
                      flush=True)


if __name__ == "__main__":
    main()
