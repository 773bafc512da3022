"""The low-resource back-translation experiment's data and table (`low_resource.sh`).

    python recipes/backtranslation/low_resource.py split --bilingual DIR --lang de --lines 10000 --out DIR
    python recipes/backtranslation/low_resource.py corpora --data DIR --lang de --out corpora.yaml
    python recipes/backtranslation/low_resource.py report --runs DIR --data DIR --lang de

`split` takes a seeded sample of `--lines` genuine X-en training pairs (`genuine.X`, `genuine.en`, in corpus order)
and, as monolingual English (`mono.en`), the English side of the rest: each distinct line once, none that the genuine
pairs hold, never its X side. `corpora` writes the corpora of the X -> en systems: `bilingual` (the genuine pairs,
with the dev and test sets), `bt` and `bt_tagged` (the beam back-translations, the second with `<bt>`), `bt_sample`
(the sampled ones). `report` writes the table of the systems' dev and test scores.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import yaml

SYSTEMS = {  # run name -> (what it reads, the back-translated corpus it mixes in, or None)
    "bilingual": ("bilingual only", None),
    "bt": ("+ back-translation (beam 5)", "bt"),
    "bt-tagged": ("+ tagged back-translation `<bt>` (beam 5)", "bt_tagged"),
    "bt-sample": ("+ back-translation (sampled)", "bt_sample"),
}


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def split(bilingual: Path, lang: str, lines: int, out: Path, seed: int) -> dict:
    english, foreign = read_lines(bilingual / "train.en"), read_lines(bilingual / f"train.{lang}")
    order = list(range(len(english)))
    random.Random(seed).shuffle(order)
    genuine, rest = sorted(order[:lines]), sorted(order[lines:])
    out.mkdir(parents=True, exist_ok=True)
    write_lines(out / "genuine.en", [english[index] for index in genuine])
    write_lines(out / f"genuine.{lang}", [foreign[index] for index in genuine])
    held, mono = {english[index] for index in genuine}, []
    for index in rest:
        if english[index].strip() and english[index] not in held:
            held.add(english[index])
            mono.append(english[index])
    write_lines(out / "mono.en", mono)
    return {"genuine": len(genuine), "mono": len(mono), "seed": seed}


def corpora(data: Path, bilingual: Path, lang: str) -> list[dict]:
    back = {"bt": ("bt.beam", None), "bt_tagged": ("bt.beam", "<bt>"), "bt_sample": ("bt.sample", None)}
    entries = [{"name": "bilingual", "src": str(data / f"genuine.{lang}"), "tgt": str(data / "genuine.en"),
                "dev": [str(bilingual / f"dev.{lang}"), str(bilingual / "dev.en")],
                "test": [str(bilingual / f"test.{lang}"), str(bilingual / "test.en")]}]
    for name, (stem, tag) in back.items():
        entries.append({"name": name, "src": str(data / f"{stem}.{lang}"), "tgt": str(data / "mono.en"),
                        **({"tag": tag} if tag else {})})
    return entries


def stages(system: str, share: float) -> str:
    """The `train.stages` of a system: genuine pairs alone, or mixed with `share` of back-translated tokens."""
    corpus = SYSTEMS[system][1]
    mix = {"bilingual": 1} if corpus is None else {"bilingual": round(1 - share, 4), corpus: share}
    return json.dumps([{"mix": mix}])


def report(runs: Path, data: Path, lang: str) -> str:
    stats = json.loads((data / "split.json").read_text(encoding="utf-8"))
    rows = [f"{lang}→en: {stats['genuine']:,} genuine pairs, {stats['mono']:,} lines of monolingual English "
            "(the rest of the corpus' English side) back-translated by an en→{lang} model trained on the genuine pairs"
            .replace("{lang}", lang), "",
            "| system | updates (best) | dev BLEU (greedy) | test BLEU | test chrF |", "|---|---:|---:|---:|---:|"]
    for name, (label, _) in SYSTEMS.items():
        run = runs / name
        if not (run / "test.json").exists():
            continue
        summary = json.loads((run / "train.summary.json").read_text(encoding="utf-8"))
        scores = json.loads((run / "test.json").read_text(encoding="utf-8"))
        records = [json.loads(line) for line in read_lines(run / "metrics.jsonl")]
        best = max((record for record in records if "valid_bleu" in record), key=lambda record: record["valid_bleu"])
        rows.append(f"| {label} | {summary['steps']:,} ({best['step']:,}) | {best['valid_bleu']:.2f} | "
                    f"{scores['bleu']['score']:.2f} | {scores['chrf']['score']:.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("split")
    made.add_argument("--bilingual", type=Path, required=True)
    made.add_argument("--lang", required=True)
    made.add_argument("--lines", type=int, default=10_000)
    made.add_argument("--seed", type=int, default=11)
    made.add_argument("--out", type=Path, required=True)
    listed = commands.add_parser("corpora")
    listed.add_argument("--data", type=Path, required=True)
    listed.add_argument("--bilingual", type=Path, required=True)
    listed.add_argument("--lang", required=True)
    listed.add_argument("--out", type=Path, required=True)
    staged = commands.add_parser("stages")
    staged.add_argument("--system", choices=SYSTEMS, required=True)
    staged.add_argument("--share", type=float, default=0.5)
    reported = commands.add_parser("report")
    reported.add_argument("--runs", type=Path, required=True)
    reported.add_argument("--data", type=Path, required=True)
    reported.add_argument("--lang", required=True)
    args = parser.parse_args(argv)
    if args.command == "split":
        stats = split(args.bilingual, args.lang, args.lines, args.out, args.seed)
        (args.out / "split.json").write_text(json.dumps(stats) + "\n", encoding="utf-8")
        print(json.dumps(stats))
    elif args.command == "corpora":
        args.out.write_text(yaml.safe_dump(corpora(args.data, args.bilingual, args.lang), sort_keys=False),
                            encoding="utf-8")
    elif args.command == "stages":
        print(stages(args.system, args.share))
    else:
        print(report(args.runs, args.data, args.lang))
    return 0


if __name__ == "__main__":
    sys.exit(main())
