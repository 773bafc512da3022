"""The markdown table of one `mbr_sweep.sh` output directory: BLEU, chrF, TER, the paired bootstrap's p against beam 5
(from `nmtkit evaluate --compare`) and the whole command's wall time.

usage: python benchmarks/experiments/mbr_table.py OUTDIR
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SYSTEMS = {"beam5": "beam 5", "mbr-beam8": "MBR, beam N-best, N = 8", "mbr-beam16": "MBR, beam N-best, N = 16",
           "mbr-beam32": "MBR, beam N-best, N = 32", "mbr-eps8": "MBR, epsilon 0.02 samples, N = 8",
           "mbr-eps16": "MBR, epsilon 0.02 samples, N = 16", "mbr-eps32": "MBR, epsilon 0.02 samples, N = 32",
           "mbr-beam16-bleu": "MBR, beam N-best, N = 16, BLEU utility"}  # the last: when it was run
P_VALUE = re.compile(r"p = (\d\.\d+)")


def main(directory: str) -> None:
    root = Path(directory)
    times = dict(line.split() for line in (root / "times.txt").read_text().splitlines())
    base = float(times["beam5"])
    print("| system | BLEU | chrF | TER | length ratio | p (BLEU / chrF / TER) | time | × beam 5 |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for name, label in SYSTEMS.items():
        if not (root / f"{name}.json").exists():
            continue
        scores = json.loads((root / f"{name}.json").read_text())
        ratio = scores["bleu"]["sys_len"] / scores["bleu"]["ref_len"]
        compare = root / f"{name}.compare.txt"
        p_values = " / ".join(P_VALUE.findall(compare.read_text())) if compare.exists() else ""
        seconds = float(times[name])
        print(f"| {label} | {scores['bleu']['score']:.2f} | {scores['chrf']['score']:.2f} | "
              f"{scores['ter']['score']:.2f} | {ratio:.3f} | {p_values} | {seconds:.0f} s | {seconds / base:.1f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
