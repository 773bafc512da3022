"""Throughput of `nmtkit serve` under concurrent clients against `nmtkit translate` on the same input, in one run.

The model (a checkpoint, or a directory written by `nmtkit export`) translates the non-empty lines of --input
once with `nmtkit translate` (its time without startup, measured as benchmarks/translate_speed.py does: the wall
time minus that of the same command on the first line alone), and then through `nmtkit serve` on a free loopback
port, once for each number of concurrent clients in --clients. The clients take requests of --per-request lines
from one shared queue until it is empty, so every line is translated once per round; the server gathers what
arrives within a few milliseconds into one translation call. Printed per round: sentences/s and its ratio to
`nmtkit translate`'s, request latency (median and 95th percentile), and how many answers equal translate's line.

Usage: python benchmarks/serve_speed.py [--model runs/bible-es-en/transformer/model.pt]
       [--input data/bible/raw/test.es] [--clients 1 4 16] [--per-request 1] [--threads 2] [--beam 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("serve_speed")

ADDRESS = re.compile(r"serving on (http://[\w.:\[\]-]+:\d+)")


@dataclass
class Round:
    """One round of the server benchmark: `clients` concurrent clients through the whole input."""

    clients: int
    seconds: float
    latencies: list[float]
    outputs: list[str] = field(repr=False)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("runs/bible-es-en/transformer/model.pt"),
                        help="checkpoint, or a directory written by nmtkit export")
    parser.add_argument("--input", type=Path, default=Path("data/bible/raw/test.es"), help="source text")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16], help="concurrent clients per round")
    parser.add_argument("--per-request", type=int, default=1, help="lines in one request")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of translate and of the server")
    parser.add_argument("--beam", type=int, default=5, help="beam size")
    return parser.parse_args()


def chunks(lines: list[str], size: int) -> list[tuple[int, list[str]]]:
    """(index of the first line, lines) of consecutive requests of `size` lines."""
    return [(start, lines[start : start + size]) for start in range(0, len(lines), size)]


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def nmtkit(args: argparse.Namespace, command: str, *options: str) -> list[str]:
    """An nmtkit command on the model; `serve` logs where it listens, so only `translate` is quiet."""
    quiet = ["-q"] if command == "translate" else []
    return [sys.executable, "-m", "nmtkit", *quiet, command, "--model", str(args.model), "--threads",
            str(args.threads), "--device", "cpu", "--beam", str(args.beam), *options]


def time_translate(args: argparse.Namespace, text: Path) -> tuple[float, list[str]]:
    """`nmtkit translate`'s seconds without startup, and its outputs."""
    seconds = []
    for source in (text.with_name("first.txt"), text):
        started = time.monotonic()
        result = subprocess.run(nmtkit(args, "translate", "--input", str(source)), capture_output=True, text=True)
        seconds.append(time.monotonic() - started)
        if result.returncode != 0:
            raise SystemExit(f"nmtkit translate failed:\n{result.stderr}")
    return seconds[1] - seconds[0], result.stdout.split("\n")[:-1]


def start_server(args: argparse.Namespace, max_sentences: int) -> tuple[subprocess.Popen, str]:
    """`nmtkit serve` on a port the system chooses; returns the process and its URL once it listens."""
    process = subprocess.Popen(nmtkit(args, "serve", "--port", "0", "--max-sentences", str(max_sentences)),
                               stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        found = ADDRESS.search(line)
        if found:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keep its pipe from filling
            return process, found.group(1)
    raise SystemExit(f"nmtkit serve exited with status {process.wait()} before listening")


def post(url: str, lines: list[str]) -> list[str]:
    request = urllib.request.Request(url + "/translate", data=json.dumps({"sentences": lines}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["translations"]


def run_round(url: str, requests: list[tuple[int, list[str]]], clients: int, total: int) -> Round:
    """All `requests` through `clients` threads that share one queue of them."""
    todo: queue.Queue = queue.Queue()
    for request in requests:
        todo.put(request)
    outputs, latencies = [""] * total, []

    def client() -> None:
        while True:
            try:
                start, lines = todo.get_nowait()
            except queue.Empty:
                return
            sent = time.monotonic()
            outputs[start : start + len(lines)] = post(url, lines)
            latencies.append(time.monotonic() - sent)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Round(clients, time.monotonic() - started, latencies, outputs)


def format_round(round_: Round, translate_seconds: float, expected: list[str]) -> str:
    sentences = len(expected)
    rate = sentences / round_.seconds
    versus = f"{rate / (sentences / translate_seconds):.2f}" if translate_seconds > 0 else "—"
    same = sum(left == right for left, right in zip(round_.outputs, expected))
    return (f"| {round_.clients} | {len(round_.latencies)} | {round_.seconds:.1f} | {rate:,.1f} | {versus} | "
            f"{1000 * percentile(round_.latencies, 0.5):,.0f} | {1000 * percentile(round_.latencies, 0.95):,.0f} | "
            f"{same}/{sentences} |")


def print_report(args: argparse.Namespace, translate_seconds: float, expected: list[str], rounds: list[Round]) -> None:
    sentences = len(expected)
    rate = f"{sentences / translate_seconds:,.1f}" if translate_seconds > 0 else "—"
    print(f"{args.model}, CPU, {args.threads} threads, beam {args.beam}, {args.per_request} line(s) per request; "
          f"nmtkit translate: {sentences} sentences in {translate_seconds:.1f} s without startup ({rate} sent/s).\n")
    print("| clients | requests | wall s | sent/s | × translate | latency p50 ms | latency p95 ms "
          "| same as translate |")
    print("|---|---|---|---|---|---|---|---|")
    for round_ in rounds:
        print(format_round(round_, translate_seconds, expected))


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    lines = [line for line in args.input.read_text(encoding="utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="serve_speed-") as tmp:
        text = Path(tmp) / "input.txt"
        text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        text.with_name("first.txt").write_text(lines[0] + "\n", encoding="utf-8")
        log.info("nmtkit translate on %d lines", len(lines))
        translate_seconds, expected = time_translate(args, text)
    process, url = start_server(args, max(args.per_request, 1))
    try:
        rounds = []
        for clients in args.clients:
            log.info("%d client(s)", clients)
            rounds.append(run_round(url, chunks(lines, args.per_request), clients, len(lines)))
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait()
    if status != 0:
        log.warning("nmtkit serve exited with status %d", status)
    print_report(args, translate_seconds, expected, rounds)


if __name__ == "__main__":
    main()
