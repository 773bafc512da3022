"""Translation speed of an exported model (`nmtkit export`) at several batch sizes, in one process.

The table of docs/export-serve.md (`--inter-threads`): the model is loaded once, then `Translator.translate` of the
input runs at each size and search, --repeats times in shuffled rounds, and the median run counts. Sizes are
source tokens per batch: each of the --inter-threads workers searches batches of that many tokens (its
`--batch-tokens` is the size times the workers). "identical" compares each size's output lines with those of the
first size.

Usage: python benchmarks/experiments/batch_sweep.py MODEL_DIR [--input data/bible/raw/test.es] [--threads 2]
       [--inter-threads 1] [--sizes 500,1000,1500,3000,6000] [--beams 5,1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from nmtkit import Translator


def sized(translator: Translator, size: int) -> Translator:
    """`translator` searching batches of `size` tokens, above the cap it puts on int8 batches of one-thread workers
    (`Translator.batch_budget`) too."""
    translator.engine.single_thread_int8_batch = size
    return translator


def sweep(model: Path, lines: list[str], threads: int, inter_threads: int, sizes: list[int], beams: list[int],
          repeats: int) -> list[dict]:
    """One row per (beam, size): the median sentences/s of `repeats` runs and the share of lines identical to the
    first size's output. The runs go round by round, each round through every cell in a shuffled order: sizes
    timed one after the other drift with the machine (sizes in ascending order, one cell after the other, once
    made small batches look faster than they were)."""
    translator = Translator.load(model, threads=threads, inter_threads=inter_threads)
    cells = [(beam, size) for beam in beams for size in sizes]
    workers = translator.capabilities.workers
    variants = {cell: sized(translator.with_decode(beam=cell[0], batch_tokens=cell[1] * workers), cell[1])
                for cell in cells}
    variants[cells[0]].translate(lines[:100])  # CTranslate2 allocates its buffers on the first calls
    seconds: dict[tuple[int, int], list[float]] = {cell: [] for cell in cells}
    outputs: dict[tuple[int, int], list[str]] = {}
    order = random.Random(0)
    for _ in range(repeats):
        for cell in order.sample(cells, len(cells)):
            start = time.perf_counter()
            outputs[cell] = variants[cell].translate(lines)
            seconds[cell].append(time.perf_counter() - start)
    rows = []
    for beam, size in cells:
        first = outputs[(beam, sizes[0])]
        identical = sum(a == b for a, b in zip(outputs[(beam, size)], first)) / max(len(lines), 1)
        rows.append({"beam": beam, "size": size, "sent_per_s": len(lines) / statistics.median(seconds[(beam, size)]),
                     "identical": identical})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a directory written by nmtkit export")
    parser.add_argument("--input", type=Path, default=Path("data/bible/raw/test.es"), help="source text")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads in all")
    parser.add_argument("--inter-threads", type=int, default=1, help="CTranslate2 workers (threads/N threads each)")
    parser.add_argument("--sizes", default="500,1000,1500,3000,6000", help="source tokens per batch, comma-separated")
    parser.add_argument("--beams", default="5,1", help="beam sizes, comma-separated (1: greedy)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell, in shuffled rounds; the median counts")
    args = parser.parse_args()
    lines = args.input.read_text(encoding="utf-8").splitlines()
    rows = sweep(args.model, lines, args.threads, args.inter_threads, [int(size) for size in args.sizes.split(",")],
                 [int(beam) for beam in args.beams.split(",")], args.repeats)
    print(f"{len(lines)} lines, {args.inter_threads} worker(s) × {max(1, args.threads // args.inter_threads)} "
          f"thread(s)\n\n| beam | tokens per batch | sent/s | identical lines |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['beam']} | {row['size']:,} | {row['sent_per_s']:.1f} | {row['identical']:.1%} |")


if __name__ == "__main__":
    main()
