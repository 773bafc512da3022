"""Scoring speed and peak memory of nmtkit's device metrics against the reference tools, on the same text.

For each size in --lines, a synthetic but realistic test set is built (seeded): references are sentences of
Zipf-distributed pseudo-words with attached punctuation, numbers and capitals, about 22 words (130 characters)
long; hypotheses are the references with about 8% of the words substituted, 5% deleted and 5% inserted. Then:

- BLEU: sacrebleu `BLEU` against nmtkit `DeviceBLEU` (13a tokenization by sacrebleu's own class, in forked
  worker processes; n-gram counting on --device). Both times include tokenizing the references.
- chrF: sacrebleu `CHRF` against nmtkit `DeviceCHRF`.
- WER: jiwer against nmtkit `DeviceWER` (both count S, D, I and H).
- edit: character Levenshtein distance of every pair: rapidfuzz `process.cpdist` with one worker and with all
  cores, against nmtkit's batched bit-parallel programme on --device (`metrics.edit.levenshtein`, no
  rapidfuzz fast path), on the runs of lines `DeviceEdit` uses.

The reference tools keep per-sentence objects for the whole corpus (sacrebleu's cached reference n-grams take
about 46 kB a line for chrF and 11 kB for BLEU, jiwer an alignment object per edit operation), tens of
gigabytes for a million lines, so they run on consecutive chunks of 100,000 lines whose sentence statistics
are summed: the same corpus score as one call (sacrebleu: `corpus_score` is exactly
`_aggregate_and_compute(_extract_corpus_statistics(...))`).

Each tool runs in its own fresh process (spawned; the test set is read from a temporary file), so that no
tool inherits another's memory, and its peak resident memory while scoring is printed beside its time (VmHWM,
reset after the test set is read: the process alone, with the interpreter, its imports and the test set;
BLEU's forked tokenizer workers are not added).
Every row checks that both tools give the same score (BLEU: the same printed string; edit: every distance).
On CUDA the nmtkit timings synchronise the device before stopping the clock, and a small warm-up run (not
timed) loads the kernels first.

Usage: python benchmarks/metrics_speed.py [--lines 100000 1000000] [--device auto] [--metrics bleu chrf wer edit]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jiwer
import numpy as np
import torch
from rapidfuzz.distance import Levenshtein
from rapidfuzz.process import cpdist
from sacrebleu.metrics import BLEU, CHRF

from nmtkit.metrics.bleu import DeviceBLEU
from nmtkit.metrics.chrf import DeviceCHRF
from nmtkit.metrics.edit import levenshtein
from nmtkit.metrics.ngrams import char_tokens, chunked, default_chunk, on_one_thread
from nmtkit.metrics.wer import DeviceWER
from nmtkit.runtime.device import pick_device

REFERENCE_CHUNK = 100000  # lines the reference tools score at once
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


@on_one_thread
def nmtkit_edit(hyps, refs, device):
    def distances(hyp_lines: list[str], ref_lines: list[list[str]]) -> torch.Tensor:
        return levenshtein(char_tokens(ref_lines[0], device), char_tokens(hyp_lines, device)).distance[:, None]

    return chunked(distances, hyps, [refs], default_chunk(device))[:, 0].numpy()


def consecutive_chunks(hyps: list[str], refs: list[str]):
    """Consecutive (hypotheses, references) of at most REFERENCE_CHUNK lines."""
    for start in range(0, len(refs), REFERENCE_CHUNK):
        yield hyps[start:start + REFERENCE_CHUNK], refs[start:start + REFERENCE_CHUNK]


def sacrebleu_score(metric, hyps: list[str], refs: list[str]):
    """sacrebleu's corpus score, its sentence statistics extracted chunk by chunk to bound its memory."""
    stats = []
    for hyp_chunk, ref_chunk in consecutive_chunks(hyps, refs):
        stats.extend(metric._extract_corpus_statistics(hyp_chunk, [ref_chunk]))
    return metric._aggregate_and_compute(stats)


def jiwer_wer(hyps: list[str], refs: list[str]) -> float:
    """jiwer's corpus WER, its S, D, I and H counted chunk by chunk to bound its memory."""
    errors = words = 0
    for hyp_chunk, ref_chunk in consecutive_chunks(hyps, refs):
        output = jiwer.process_words(ref_chunk, hyp_chunk)
        errors += output.substitutions + output.deletions + output.insertions
        words += output.hits + output.substitutions + output.deletions
    return errors / words


CASES = {  # metric: (nmtkit, [(reference tool, its function)])
    "bleu": (nmtkit_bleu, [("sacrebleu", lambda hyps, refs: str(sacrebleu_score(BLEU(), hyps, refs)))]),
    "chrf": (nmtkit_chrf, [("sacrebleu", lambda hyps, refs: sacrebleu_score(CHRF(), hyps, refs).score)]),
    "wer": (nmtkit_wer, [("jiwer", jiwer_wer)]),
    "edit": (nmtkit_edit, [
        ("rapidfuzz 1 core", lambda hyps, refs: cpdist(refs, hyps, scorer=Levenshtein.distance, workers=1)),
        ("rapidfuzz all cores", lambda hyps, refs: cpdist(refs, hyps, scorer=Levenshtein.distance, workers=-1))]),
}


def same(ours, theirs) -> bool:
    return bool(np.array_equal(ours, theirs)) if isinstance(ours, np.ndarray) else ours == theirs


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")  # the synthetic lines hold no newline


def memory_mb(field: str) -> int:
    """A memory figure of this process from /proc (Linux): VmRSS now, VmHWM its peak. Unlike ru_maxrss, VmHWM
    belongs to this process's own address space, not to the parent it was started from."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith(field + ":"))


def reset_peak_memory() -> None:
    """Start VmHWM again from the present RSS, so that reading the test set leaves no peak of its own."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def measure(metric: str, tool: int, folder: str, device_name: str, connection) -> None:
    """In a fresh process: score the test set in `folder` with tool `tool` of `metric` (-1: nmtkit) and send
    back (seconds, result, peak RSS in MB, RSS in MB before scoring)."""
    hyps, refs = read_lines(Path(folder) / "hyps.txt"), read_lines(Path(folder) / "refs.txt")
    device = pick_device(device_name)
    ours, references = CASES[metric]
    if tool < 0:
        ours(hyps[:100], refs[:100], device)  # warm-up: kernels, caches of imports
        function, args = ours, (hyps, refs, device)
    else:
        device, function, args = torch.device("cpu"), references[tool][1], (hyps, refs)
    loaded = memory_mb("VmRSS")
    reset_peak_memory()
    seconds, result = timed(device, function, *args)
    connection.send((seconds, result, memory_mb("VmHWM"), loaded))
    connection.close()


def in_own_process(metric: str, tool: int, folder: str, device_name: str) -> tuple | None:
    """`measure` in a spawned process; None if it died (for instance killed for memory)."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=measure, args=(metric, tool, folder, device_name, sender))
    process.start()
    sender.close()
    try:
        measured = receiver.recv()
    except EOFError:
        measured = None
    process.join()
    name = "nmtkit" if tool < 0 else CASES[metric][1][tool][0]
    if measured is None:
        logging.error("%s, %s: the process died with exit code %s", metric, name, process.exitcode)
    else:
        logging.info("%s, %s: %d MB resident before scoring, %d MB at the peak", metric, name, measured[3],
                     measured[2])
    return measured


def run(metric: str, folder: str, lines: int, device_name: str) -> list[tuple]:
    """Rows (metric, lines, tool, their seconds, our seconds, their MB, our MB, equal); None where one died."""
    ours = in_own_process(metric, -1, folder, device_name)
    rows = []
    for index, (tool, _) in enumerate(CASES[metric][1]):
        theirs = in_own_process(metric, index, folder, device_name)
        equal = same(ours[1], theirs[1]) if ours and theirs else None
        rows.append((metric, lines, tool, theirs and theirs[0], ours and ours[0], theirs and theirs[2],
                     ours and ours[2], equal))
    return rows


def figure(value, width: int, digits: int = 2) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def print_row(metric, lines, tool, their_seconds, seconds, their_mb, mb, equal) -> None:
    ratio = their_seconds / seconds if their_seconds and seconds else None
    print(f"{metric:6} {lines:8d} {tool:20} {figure(their_seconds, 8)} {figure(seconds, 9)} {figure(ratio, 6, 1)}x "
          f"{figure(their_mb, 7, 0)} {figure(mb, 9, 0)}  {equal}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[100000, 1000000], help="test set sizes")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--metrics", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"device: {pick_device(args.device)}, cores: {len(os.sched_getaffinity(0))}")
    print(f"{'metric':6} {'lines':>8} {'reference':20} {'ref s':>8} {'nmtkit s':>9} {'ratio':>7} {'ref MB':>7} "
          f"{'nmtkit MB':>9}  same")
    for lines in args.lines:
        with tempfile.TemporaryDirectory() as folder:
            hyps, refs = synthetic_test_set(lines)
            (Path(folder) / "hyps.txt").write_text("\n".join(hyps), encoding="utf-8")
            (Path(folder) / "refs.txt").write_text("\n".join(refs), encoding="utf-8")
            del hyps, refs
            for metric in args.metrics:
                for row in run(metric, folder, lines, args.device):
                    print_row(*row)


if __name__ == "__main__":
    main()
