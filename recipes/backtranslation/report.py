"""The back-translation recipe's table for one language: X -> en test BLEU and chrF of the bilingual-only system
against untagged and tagged back-translation, each with its mix, updates and training time, and a line on the data.

    python recipes/backtranslation/report.py --runs runs/backtranslation/de --data data/backtranslation/de \
        --lang de --decode beam
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

SYSTEMS = (("bilingual", "bilingual only"), ("bt-untagged", "+ back-translation, untagged"),
           ("bt-tagged", "+ back-translation, tagged `<bt>`"))


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def scores(result: dict | None) -> tuple[str, str]:
    """(BLEU, chrF) of an evaluate --json result, or dashes when it is missing."""
    if result is None:
        return "—", "—"
    return f"{result['bleu']['score']:.2f}", f"{result['chrf']['score']:.2f}"


def describe_stages(config_path: Path) -> str:
    """A run's stages in words, e.g. `bilingual 0.5 + bt 0.5 for 2880 updates, then bilingual 1.0`."""
    if not config_path.exists():
        return "—"
    stages = (yaml.safe_load(config_path.read_text(encoding="utf-8")).get("train") or {}).get("stages") or []
    parts = []
    for stage in stages:
        mix = " + ".join(f"{name} {weight:g}" for name, weight in stage["mix"].items())
        updates = (stage.get("until") or {}).get("updates")
        parts.append(f"{mix} for {updates} updates" if updates else mix)
    return ", then ".join(parts) or "—"


def system_row(run: Path, label: str) -> str:
    summary = read_json(run / "train.summary.json") or {}
    minutes = f"{summary['elapsed_seconds'] / 60:.1f} min" if "elapsed_seconds" in summary else "—"
    bleu, chrf = scores(read_json(run / "test.json"))
    return (f"| {label} | {describe_stages(run / 'config.yaml')} | {summary.get('steps', '—')} | {minutes} | "
            f"{bleu} | {chrf} |")


def data_line(data: Path, runs: Path, lang: str, decode: str) -> str:
    """The data behind the table: pairs kept per corpus, the monolingual lines and the back-translation model."""
    manifest = read_json(data / "mixed" / "manifest.json") or {}
    kept = {corpus["name"]: corpus["train"]["count"] for corpus in manifest.get("corpora", [])}
    mono = read_json(data / "mono" / "mono.stats.json") or {}
    removed = mono.get("removed", {})
    bleu, chrf = scores(read_json(runs / f"en-{lang}" / "test.json"))
    return (f"{lang}→en: {kept.get('bilingual', '—')} bilingual training pairs and {kept.get('bt', '—')} "
            f"back-translated ({mono.get('kept', '—')} English lines of other catalogs, less "
            f"{removed.get('dev_test_copy', 0)} dev/test lines and {removed.get('dev_test_near_copy', 0)} near copies "
            f"of them; translated by the en→{lang} model, test BLEU {bleu}, chrF {chrf}, with {decode}).")


def table(runs: Path, data: Path, lang: str, decode: str) -> str:
    rows = [data_line(data, runs, lang, decode), "",
            "| system | mix (shares of target tokens) | updates | training time | BLEU | chrF |",
            "|---|---|---|---|---|---|"]
    rows += [system_row(runs / name, label) for name, label in SYSTEMS]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="the language's run directory")
    parser.add_argument("--data", type=Path, required=True, help="the language's data directory")
    parser.add_argument("--lang", required=True, help="X's code")
    parser.add_argument("--decode", required=True, help="how the back-translations were made (beam or sample)")
    args = parser.parse_args(argv)
    print(table(args.runs, args.data, args.lang, args.decode), end="")


if __name__ == "__main__":
    main()
