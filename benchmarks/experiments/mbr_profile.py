"""Where MBR's time goes: a profile of `Translator.translate` with MBR over the first 100 lines of a test set (one
thread), the cumulative time of the candidates' search and of the utilities. Results: docs/benchmarks.md (MBR).

usage: python benchmarks/experiments/mbr_profile.py MODEL SRC N [sample|beam]
"""

from __future__ import annotations

import cProfile
import pstats
import sys

import torch

from nmtkit.translate import Translator


def main(model: str, source: str, count: str, candidates: str = "sample") -> None:
    torch.set_num_threads(1)
    with open(source, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle][:100]
    epsilon = 0.02 if candidates == "sample" else 0.0
    translator = Translator.load(model, device="cpu", threads=1, mbr=int(count), mbr_candidates=candidates,
                                 epsilon=epsilon)
    profile = cProfile.Profile()
    profile.runcall(translator.translate, lines)
    wanted = "mbr_choices|candidate_search|multinomial|transformer.py.*(encode|step)"
    pstats.Stats(profile).sort_stats("cumtime").print_stats(wanted)


if __name__ == "__main__":
    main(*sys.argv[1:])
