"""The multilingual recipe's table: BLEU and chrF per direction, the multilingual model against the bilingual one.

    python recipes/multilingual/report.py --runs runs/multilingual --langs de fr es ru --zero-shot de-fr fr-de
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def scores(path: Path) -> str:
    """'BLEU / chrF' of an evaluate --json file, or '—' when the run is not there."""
    if not path.exists():
        return "—"
    result = json.loads(path.read_text(encoding="utf-8"))
    return f"{result['bleu']['score']:.2f} / {result['chrf']['score']:.2f}"


def table(runs: Path, langs: list[str], zero_shot: list[str]) -> str:
    rows = ["| direction | multilingual BLEU / chrF | bilingual BLEU / chrF |", "|---|---|---|"]
    for lang in langs:
        for direction in (f"en-{lang}", f"{lang}-en"):
            rows.append(f"| {direction} | {scores(runs / 'multi' / f'test.{direction}.json')} | "
                        f"{scores(runs / direction / 'test.json')} |")
    rows += [f"| {direction} (zero-shot) | {scores(runs / 'multi' / f'test.{direction}.json')} | — |"
             for direction in zero_shot]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--langs", nargs="+", required=True)
    parser.add_argument("--zero-shot", nargs="*", default=[])
    args = parser.parse_args(argv)
    print(table(args.runs, args.langs, args.zero_shot))


if __name__ == "__main__":
    main()
