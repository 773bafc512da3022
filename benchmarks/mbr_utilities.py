"""MBR's pairwise utilities on a device against the CPU (issue 66): the time of `mbr_choices` for LINES lines of N
candidates each, and whether both devices choose the same candidates. The candidates are the lines of a text file
with words dropped at random (a fixed seed), so that they differ as a model's candidates do; no model is needed.

usage: python benchmarks/mbr_utilities.py TEXT [--lines 500] [--candidates 32] [--device cuda] [--utility chrf]
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from nmtkit.decoding.mbr import mbr_choices


def candidates_of(lines: list[str], count: int, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    made = []
    for line in lines:
        words = line.split()
        made.append([" ".join(word for word in words if rng.random() > 0.15) for _ in range(count)])
    return made


def timed(candidates: list[list[str]], utility: str, device: torch.device) -> tuple[list[int], float]:
    mbr_choices(candidates[:8], utility, device)  # warm-up: kernels, allocator
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    choices = mbr_choices(candidates, utility, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return choices, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text")
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--utility", default="chrf")
    args = parser.parse_args()
    with open(args.text, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line, _ in zip(handle, range(args.lines))]
    candidates = candidates_of(lines, args.candidates)
    on_cpu, cpu_seconds = timed(candidates, args.utility, torch.device("cpu"))
    print(f"{args.utility} utility, {len(lines)} lines x {args.candidates} candidates "
          f"({len(lines) * args.candidates ** 2} pairs): cpu {cpu_seconds:.2f} s")
    if args.device != "cpu":
        on_device, seconds = timed(candidates, args.utility, torch.device(args.device))
        name = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
        print(f"{name}: {seconds:.2f} s ({cpu_seconds / seconds:.1f}x the CPU); same choices: {on_device == on_cpu}")


if __name__ == "__main__":
    main()
