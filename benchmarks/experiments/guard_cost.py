"""What the placeholder guarantee (`nmtkit.decoding.placeholder_guard`) costs the PyTorch search: the same batches of
source ids searched without the guard and with it, on a random Transformer of a small real size whose vocabulary holds
the 64 reserved symbols (its last ids). A share of the lines holds one to three placeholders and, some of them, a tag
pair (the messages recipes' test sets: about a third of the lines hold a placeholder); the others hold none, and with
the guard on they only have the reserved symbols banned. Random weights make no translations, so only the search's
time is measured, each setting the fastest of --repeats runs taken in turns; the lengths searched are the same
both ways (the length limits, as the engine raises them for the symbols). Prints one line a setting.

Usage: python benchmarks/experiments/guard_cost.py [--lines 300] [--share 0.36] [--beam 5] [--threads 2]
       [--repeats 3] [--batch 32]
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from nmtkit.data.dataset import encode_sources
from nmtkit.decoding.constraints import constrained_limits
from nmtkit.decoding.placeholder_guard import ReservedIds
from nmtkit.decoding.search import beam_search, greedy_search, max_lengths
from nmtkit.models.transformer import TransformerConfig
from nmtkit.registry import build_model
from nmtkit.runtime.device import set_threads
from nmtkit.symbols.placeholders import PLACEHOLDER_SYMBOLS, TAG_PAIR_SYMBOLS

VOCAB = 8000
SMALL = TransformerConfig(encoder_layers=3, decoder_layers=3, d_model=256, heads=4, ffn=1024, dropout=0.0)


def reserved_ids() -> ReservedIds:
    """ph1..ph32 then t1, /t1 ... t16, /t16 as the vocabulary's last 64 ids, as `reserved_symbols` orders them."""
    first = VOCAB - PLACEHOLDER_SYMBOLS - 2 * TAG_PAIR_SYMBOLS
    ids = list(range(first, VOCAB))
    partner = list(range(PLACEHOLDER_SYMBOLS)) + [PLACEHOLDER_SYMBOLS + (index ^ 1) for index in
                                                  range(2 * TAG_PAIR_SYMBOLS)]
    closing = [False] * PLACEHOLDER_SYMBOLS + [index % 2 == 1 for index in range(2 * TAG_PAIR_SYMBOLS)]
    return ReservedIds(tuple(ids), torch.tensor(ids), torch.tensor(partner), torch.tensor(closing))


def sources(count: int, share: float, seed: int = 0) -> list[list[int]]:
    """Lines of 5-30 ordinary ids; a `share` of them with 1-3 placeholders, every other of those with a tag pair."""
    rng, first = random.Random(seed), VOCAB - PLACEHOLDER_SYMBOLS - 2 * TAG_PAIR_SYMBOLS
    lines = []
    for index in range(count):
        line = [rng.randrange(4, first) for _ in range(rng.randint(5, 30))]
        if rng.random() < share:
            for symbol in range(rng.randint(1, 3)):
                line.insert(rng.randrange(len(line) + 1), first + symbol)
            if index % 2:
                start = rng.randrange(len(line))
                line[start:start] = [first + PLACEHOLDER_SYMBOLS]
                line.insert(rng.randrange(start + 1, len(line) + 1), first + PLACEHOLDER_SYMBOLS + 1)
        lines.append(line)
    return sorted(lines, key=len)


def prepared(batches: list[list[list[int]]], reserved: ReservedIds) -> list[tuple]:
    """Each batch's ids, padded, and its length limits, raised where its symbols need room (as the engine does)."""
    ready = []
    for batch in batches:
        src, src_mask = encode_sources(batch)
        needs = reserved.guard(batch, src.device).constraints(None)
        ready.append((batch, src, src_mask, constrained_limits(max_lengths(src_mask, 1.2, 5), needs, 1023)))
    return ready


def search_all(model, ready: list[tuple], beam: int, reserved: ReservedIds | None) -> tuple[float, float]:
    """Seconds to search every batch, with the guard of `reserved` (made from each batch's ids) or without: wall
    clock, and CPU time of this process (all its threads; less sensitive to a machine shared with others)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    for batch, src, src_mask, limits in ready:
        guard = None if reserved is None else reserved.guard(batch, src.device)
        if beam == 1:
            greedy_search(model, src, src_mask, limits, guard=guard)
        else:
            beam_search(model, src, src_mask, limits, beam, guard=guard)
    return time.perf_counter() - start, time.process_time() - cpu_start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--share", type=float, default=0.36, help="share of lines with placeholders")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="lines a batch")
    args = parser.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(SMALL, VOCAB, VOCAB, True).eval()
    lines = sources(args.lines, args.share)
    reserved = reserved_ids()
    ready = prepared([lines[start:start + args.batch] for start in range(0, len(lines), args.batch)], reserved)
    for beam in sorted({1, args.beam}):
        plain, guarded = [], []
        for _ in range(args.repeats):  # in turns, so that a busy machine slows both alike
            plain.append(search_all(model, ready, beam, None))
            guarded.append(search_all(model, ready, beam, reserved))
        (wall, cpu), (guarded_wall, guarded_cpu) = (map(min, zip(*runs)) for runs in (plain, guarded))
        print(f"beam {beam}: {len(lines)} lines ({args.share:.0%} with placeholders), {args.threads} threads: "
              f"without the guard {wall:.2f} s ({cpu:.2f} s CPU), with it {guarded_wall:.2f} s ({guarded_cpu:.2f} s "
              f"CPU): {guarded_wall / wall - 1:+.1%} wall, {guarded_cpu / cpu - 1:+.1%} CPU")


if __name__ == "__main__":
    main()
