"""Write a synthetic sequence-reversal task: source = random symbols, target = the same symbols reversed.

python recipes/reverse/make_data.py --out DIR [--train 20000] [--seed 1]
writes DIR/{train,dev,test}.{src,tgt}. The task trains in well under a minute on a CPU, so `make test` and CI
use it as the end-to-end smoke test of prepare -> train -> translate -> evaluate.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

SYMBOLS = [chr(ord("a") + index) for index in range(20)]


def make_pairs(count: int, rng: random.Random, min_len: int = 3, max_len: int = 12) -> list[tuple[str, str]]:
    pairs = []
    for _ in range(count):
        tokens = [rng.choice(SYMBOLS) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((" ".join(tokens), " ".join(reversed(tokens))))
    return pairs


def write_split(out: Path, name: str, pairs: list[tuple[str, str]]) -> None:
    (out / f"{name}.src").write_text("".join(src + "\n" for src, _ in pairs), encoding="utf-8")
    (out / f"{name}.tgt").write_text("".join(tgt + "\n" for _, tgt in pairs), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train", type=int, default=20000, help="training pairs")
    parser.add_argument("--test", type=int, default=200, help="dev and test pairs each")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", args.train), ("dev", args.test), ("test", args.test)):
        write_split(args.out, name, make_pairs(count, rng))


if __name__ == "__main__":
    main()
