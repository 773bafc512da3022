"""Data at scale (issue 49): `nmtkit prepare --corpora` lines/s and peak memory, `nmtkit train`'s time from its start
to the first update of a two-stage mix, and its training tokens/s against the same model on 30k pairs.

Corpora: synthetic parallel text of realistic length, generated here and deterministic for a seed. Each line is two
halves, each drawn from a pool of 20,000 half-lines of made-up words (Zipfian over a 50,000-word vocabulary of
syllable words, the frequent ones short; half lengths log-normal, median 11 words): a line has about 26 words, 35
subwords of an 8k BPE vocabulary and a long tail, as news and Europarl sentences have; a pair is about 290 bytes.
A target half is its source half word by word through a fixed dictionary (each word to one about as frequent), with
a word dropped or added now and then. Line n joins half n mod 20,000 to another half chosen so that no two lines
of the first 400 million join the same halves. Each size N is two corpora in one data directory:
`clean` (10% of the pairs) and `crawled` (90%), trained as two stages: {clean: 0.3, crawled: 0.7} for the first
half of the steps, then {clean: 1}.

Measured per size, each command a child process (peak RSS from wait4 of that child):
- prepare: pairs read / wall seconds, and the peak resident memory of the prepare process;
- train: seconds from starting `nmtkit train` to its first update's record in metrics.jsonl (imports, reading the
  data directory, building the first passes' batches, the model), its peak RSS, and wall target tokens/s: the
  target tokens of the records after the first tenth of the steps over the difference of their `elapsed`;
- the same training on a 30k-pair directory made the same way; "vs 30k" is the ratio of the wall tokens/s.

Disk: a size takes its text (`--work`) about three times over (input, prepare's copy, token arrays while they are
written). A size that does not fit in the free space is skipped with what it needs. `--shards K` simulates a size
whose input does not fit: the crawled corpus is written once at 1/K of its pairs and listed K times, as K corpora
(crawled1..K) that the stages weigh as one; prepare reads, filters, encodes and writes all N pairs as for distinct
files (deduplication is within a corpus), so its figures stand for N distinct pairs, and the input takes 1/K of
the disk. The data directory is the full size either way.

Usage: python benchmarks/data_scale.py --sizes 1M,10M,50M [--work DIR] [--device cpu|cuda] [--steps 200]
[--batch-tokens 4096] [--model small|base] [--shards K] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

POOL, VOCAB, REFERENCE_PAIRS, SEED = 20_000, 50_000, 30_000, 1
STEP = 7_919  # coprime with POOL: line n's second half makes (first, second) distinct for n < POOL ** 2
CONSONANTS, VOWELS = "bcdfghjklmnprstvzñç", "aeiouáé"
MODELS = {"small": {"name": "transformer", "encoder_layers": 3, "decoder_layers": 3, "d_model": 256, "heads": 4,
                    "ffn": 1024},
          "base": {"name": "transformer", "encoder_layers": 6, "decoder_layers": 6, "d_model": 512, "heads": 8,
                   "ffn": 2048}}


@dataclass
class Row:
    """One size's figures (None: not measured)."""

    pairs: int
    prepare_seconds: float | None = None
    prepare_rss_mb: float | None = None
    data_gb: float | None = None
    first_update_s: float | None = None
    train_rss_mb: float | None = None
    wall_tps: float | None = None
    note: str = ""


def parse_size(text: str) -> int:
    """'100k', '1M', '2.5M', '30000' -> pairs."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def half_pool(rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """POOL (source, target) half-lines of made-up words."""
    syllables = [consonant + vowel for consonant in CONSONANTS for vowel in VOWELS]
    words = ["".join(syllables[i] for i in rng.integers(0, len(syllables), size=1 + (rank >= 100) + (rank >= 3000)))
             for rank in range(VOCAB)]  # the frequent words short, as in natural languages
    dictionary = np.arange(VOCAB) ^ 1  # source word i -> target word i ^ 1: a word about as frequent
    zipf = 1.0 / (np.arange(VOCAB) + 2.7)
    lengths = np.clip(np.rint(rng.lognormal(np.log(11), 0.6, size=POOL)), 1, 120).astype(int)
    ids = np.split(rng.choice(VOCAB, size=int(lengths.sum()), p=zipf / zipf.sum()), np.cumsum(lengths)[:-1])
    extra = rng.choice(VOCAB, size=POOL, p=zipf / zipf.sum())
    sources, targets = [], []
    for half, (drop, add), word in zip(ids, rng.random((POOL, 2)) < 0.15, extra):
        target = dictionary[half].tolist()
        if drop and len(target) > 1:
            del target[int(rng.integers(len(target)))]
        if add:
            target.insert(int(rng.integers(len(target) + 1)), int(word))
        sources.append(" ".join(words[i] for i in half))
        targets.append(" ".join(words[i] for i in target))
    return sources, targets


def write_corpus(path: Path, first: int, count: int, pool: tuple[list[str], list[str]]) -> None:
    """Lines first .. first + count - 1 of the synthetic corpus as `source<TAB>target` lines."""
    sources, targets = pool
    with open(path, "w", encoding="utf-8") as out:
        for start in range(first, first + count, 100_000):
            lines = np.arange(start, min(start + 100_000, first + count))
            left, right = lines % POOL, (lines % POOL + (lines // POOL) * STEP) % POOL
            out.writelines(f"{sources[a]} {sources[b]}\t{targets[a]} {targets[b]}\n" for a, b in zip(left, right))


def corpora_layout(pairs: int, shards: int) -> tuple[list[dict], dict[str, float]]:
    """The corpora file's entries (with each one's first line and count) and the first stage's weights."""
    clean = max(pairs // 10, 1)
    crawled = pairs - clean
    shard = -(-crawled // shards)
    entries = [{"name": "clean", "tsv": "clean.tsv", "first": 0, "count": clean}]
    if shards == 1:
        entries.append({"name": "crawled", "tsv": "crawled.tsv", "first": clean, "count": crawled})
    else:
        entries += [{"name": f"crawled{k}", "tsv": "crawled.tsv", "first": clean, "count": shard}
                    for k in range(1, shards + 1)]
    weights = {"clean": 0.3} | {entry["name"]: 0.7 / (len(entries) - 1) for entry in entries[1:]}
    return entries, weights


def write_corpora(folder: Path, entries: list[dict], pool: tuple[list[str], list[str]]) -> Path:
    """Each distinct TSV file once, and corpora.yaml listing the corpora."""
    written = set()
    for entry in entries:
        if entry["tsv"] not in written:
            write_corpus(folder / entry["tsv"], entry["first"], entry["count"], pool)
            written.add(entry["tsv"])
    listing = [{"name": entry["name"], "tsv": entry["tsv"]} for entry in entries]
    (folder / "corpora.yaml").write_text(yaml.safe_dump(listing), encoding="utf-8")
    return folder / "corpora.yaml"


def disk_needed(pairs: int, shards: int, pool: tuple[list[str], list[str]]) -> float:
    """Bytes a size needs at its peak: its input, prepare's text copy and token arrays (one side twice while it is
    written), estimated from the pool's bytes and words (1.3 subwords a word)."""
    line_bytes = sum(len(text.encode()) + 1 for side in pool for text in side) / POOL * 2
    tokens = sum(len(text.split()) for side in pool for text in side) / POOL * 2 * 1.3
    text = pairs * line_bytes
    return text * (0.1 + 0.9 / shards) + text + pairs * tokens * 4 * 1.5


def run_measured(command: list[str], log_path: Path, watch: Path | None = None) -> tuple[int, float, float, float]:
    """Run `command` (output to `log_path`); its exit status, wall seconds, peak RSS in MB, and the seconds until
    `watch` first held a line (None: not watched)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started, first = time.monotonic(), float("nan")
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        while watch is not None and process.poll() is None:
            if watch.exists() and watch.stat().st_size > 0:
                first = time.monotonic() - started
                break
            time.sleep(0.02)
        _, status, usage = os.wait4(process.pid, 0)
    return os.waitstatus_to_exitcode(status), time.monotonic() - started, usage.ru_maxrss / 1024, first


def prepare(folder: Path, corpora: Path, row: Row, vocab_size: int) -> Path | None:
    data = folder / "data"
    command = [sys.executable, "-m", "nmtkit", "-q", "prepare", "--corpora", str(corpora), "--out", str(data),
               "--vocab-size", str(vocab_size)]
    status, seconds, rss, _ = run_measured(command, folder / "prepare.log")
    if status != 0:
        row.note = f"prepare failed ({folder / 'prepare.log'})"
        return None
    row.prepare_seconds, row.prepare_rss_mb = seconds, rss
    row.data_gb = sum(path.stat().st_size for path in data.iterdir() if path.is_file()) / 1e9
    return data


def train_config(args: argparse.Namespace, weights: dict[str, float]) -> dict:
    amp = "bf16" if args.device.startswith("cuda") else "none"
    return {"model": MODELS[args.model], "train": {
        "batch_tokens": args.batch_tokens, "warmup": max(args.steps // 4, 1), "log_every": 1, "valid_every": 10**9,
        "valid_bleu": False, "amp": amp, "device": args.device, "threads": args.threads,
        "stages": [{"until": {"updates": args.steps // 2}, "mix": weights}, {"mix": {"clean": 1.0}}]}}


def wall_tokens_per_second(metrics: Path) -> float:
    """Target tokens of the records after the first tenth over the training time between them."""
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    records = [record for record in records if "tgt_tokens" in record]
    timed = records[max(len(records) // 10, 1):]
    seconds = timed[-1]["elapsed"] - records[max(len(records) // 10, 1) - 1]["elapsed"]
    return sum(record["tgt_tokens"] for record in timed) / seconds if seconds > 0 else float("nan")


def train(folder: Path, data: Path, args: argparse.Namespace, weights: dict[str, float], row: Row) -> None:
    config, run = folder / "train.yaml", folder / "run"
    config.write_text(yaml.safe_dump(train_config(args, weights)), encoding="utf-8")
    command = [sys.executable, "-m", "nmtkit", "-q", "train", "--data", str(data), "--config", str(config),
               "--out", str(run), "--max-steps", str(args.steps)]
    run.mkdir()
    status, _, rss, first = run_measured(command, folder / "train.log", watch=run / "metrics.jsonl")
    if status != 0:
        row.note = f"train failed ({folder / 'train.log'})"
        return
    row.first_update_s, row.train_rss_mb = first, rss
    row.wall_tps = wall_tokens_per_second(run / "metrics.jsonl")


def measure(pairs: int, args: argparse.Namespace, pool: tuple[list[str], list[str]], work: Path) -> Row:
    """One size: generate, prepare, train; the folder is deleted afterwards unless --keep."""
    row, shards = Row(pairs), args.shards if pairs > REFERENCE_PAIRS else 1
    needed, free = disk_needed(pairs, shards, pool), shutil.disk_usage(work).free
    if needed > free:
        row.note = f"skipped: needs ~{needed / 1e9:.0f} GB, {free / 1e9:.0f} GB free (try --shards)"
        return row
    folder = Path(tempfile.mkdtemp(prefix=f"scale-{pairs}-", dir=work))
    try:
        entries, weights = corpora_layout(pairs, shards)
        data = prepare(folder, write_corpora(folder, entries, pool), row, args.vocab_size)
        if data is not None:
            train(folder, data, args, weights, row)
        if shards > 1:
            row.note = f"input simulated: {shards} shards of crawled"
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return row


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None or value != value else format(value, spec)


def format_row(row: Row, reference_tps: float | None) -> str:
    lines_per_s = row.pairs / row.prepare_seconds if row.prepare_seconds else None
    ratio = row.wall_tps / reference_tps if row.wall_tps and reference_tps else None
    cells = [f"{row.pairs:>11,}", fmt(lines_per_s, ",.0f").rjust(9), fmt(row.prepare_rss_mb, ",.0f").rjust(8),
             fmt(row.data_gb, ".2f").rjust(7), fmt(row.first_update_s, ".1f").rjust(8),
             fmt(row.train_rss_mb, ",.0f").rjust(8), fmt(row.wall_tps, ",.0f").rjust(8), fmt(ratio, ".2f").rjust(6),
             row.note]
    return "| " + " | ".join(cells)


HEADER = ("| pairs       | prepare   | prepare  | data    | first    | train    | wall     | vs 30k | note\n"
          "|             | lines/s   | RSS MB   | dir GB  | update s | RSS MB   | tok/s    |        |\n"
          "|-------------|-----------|----------|---------|----------|----------|----------|--------|-----")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1M,10M,50M", help="pairs per size, e.g. 100k,1M,10M,50M")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="folder for the corpora")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = all cores)")
    parser.add_argument("--steps", type=int, default=200, help="training updates per size")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="token budget per batch")
    parser.add_argument("--model", choices=sorted(MODELS), default="small", help="small: 3+3 layers, d_model 256; "
                        "base: Transformer base")
    parser.add_argument("--vocab-size", type=int, default=8000, help="joint SentencePiece vocabulary")
    parser.add_argument("--shards", type=int, default=1, help="write crawled once at 1/K and list it K times")
    parser.add_argument("--keep", action="store_true", help="keep each size's corpora, data and run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Rows are printed as they are measured, so that a run cut short keeps the ones done."""
    args = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    pool = half_pool(np.random.default_rng(SEED))
    print(f"device {args.device}, model {args.model}, {args.steps} steps of {args.batch_tokens} tokens")
    print(HEADER, flush=True)
    reference = measure(REFERENCE_PAIRS, args, pool, args.work)
    print(format_row(reference, reference.wall_tps), flush=True)
    for size in args.sizes.split(","):
        print(format_row(measure(parse_size(size), args, pool, args.work), reference.wall_tps), flush=True)


if __name__ == "__main__":
    main()
