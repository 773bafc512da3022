"""A noisy parallel corpus built from a clean one, with every spoiled pair labelled, and what cleaning removed of it.

    python benchmarks/noisy_corpus.py build --clean data/messages/en-de --src en --tgt de \
        --others data/messages/others --out data/cleaning/noisy [--share 0.4] [--seed 1]
    python benchmarks/noisy_corpus.py score --noisy data/cleaning/noisy --prepared data/cleaning/prepared-defaults
    python benchmarks/noisy_corpus.py seed --clean data/messages/en-de --lines 10000 --out data/cleaning/seed
    python benchmarks/noisy_corpus.py report --runs runs/cleaning      (recipes/cleaning/run.sh's table)

`build` keeps every clean training pair and adds spoiled ones until they are `--share` of the whole (40%, a crawl's
share), in equal parts of seven kinds, the noise crawled corpora are known for (OpusCleaner's filters, the WMT
filtering tasks):
- `wrong_lang_src`: the source is another language's translation of the same English message (from `--others`,
  extracted catalogs `<dir>/en-<code>/train.*`), the target the clean one;
- `wrong_lang_tgt`: the target is another language's translation of the source;
- `misaligned`: a source with the target of another pair;
- `untranslated`: the source copied as the target;
- `truncated`: the target cut to 30-60% of its words (targets of 4 words or more);
- `number_mismatch`: one digit of a number both sides share changed in the target;
- `boilerplate`: web boilerplate pairs (page counters, copyright lines, navigation), correct translations repeated
  with other numbers, case and spacing: near-duplicates a crawl holds thousands of.
Clean and spoiled pairs are shuffled together (seeded); `labels` says `clean` or the kind of each line. Dev and test
are the clean corpus' own.

`score` walks the noisy corpus and the training text a `nmtkit prepare` kept (in order: filters only remove) and
prints, per kind, the pairs and the share removed (JSON with `--json`), and the share of clean pairs kept.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

KINDS = ("wrong_lang_src", "wrong_lang_tgt", "misaligned", "untranslated", "truncated", "number_mismatch",
         "boilerplate")
DIGITS = re.compile(r"[0-9]+")
BOILERPLATE = [  # English, German: templates with {n}, {m}, {y} numbers
    ("Page {n} of {m}", "Seite {n} von {m}"),
    ("Copyright © {y} All rights reserved.", "Copyright © {y} Alle Rechte vorbehalten."),
    ("Back to top", "Nach oben"),
    ("Posted on {n}/{m}/{y}", "Veröffentlicht am {n}.{m}.{y}"),
    ("Showing {n} to {m} of {y} entries", "Zeige {n} bis {m} von {y} Einträgen"),
    ("{n} comments", "{n} Kommentare"),
    ("Read more", "Weiterlesen"),
    ("Previous page", "Vorherige Seite"),
    ("Next page", "Nächste Seite"),
    ("Share this article", "Diesen Artikel teilen"),
    ("Last updated: {n}/{m}/{y}", "Zuletzt aktualisiert: {n}.{m}.{y}"),
    ("Cookies help us deliver our services.", "Cookies helfen uns bei der Bereitstellung unserer Dienste."),
]


def read_pairs(directory: Path, src: str, tgt: str, split: str = "train") -> list[tuple[str, str]]:
    sources = (directory / f"{split}.{src}").read_text(encoding="utf-8").split("\n")[:-1]
    targets = (directory / f"{split}.{tgt}").read_text(encoding="utf-8").split("\n")[:-1]  # nmtkit's own files
    assert len(sources) == len(targets), f"{directory}: {split} sides differ in length"
    return list(zip(sources, targets))


def other_translations(others: Path, src: str) -> dict[str, list[str]]:
    """English message -> its translations into the other languages (every `en-<code>` corpus under `others`)."""
    found: dict[str, list[str]] = defaultdict(list)
    for directory in sorted(others.glob(f"{src}-*")):
        code = directory.name.split("-", 1)[1]
        for english, translation in read_pairs(directory, src, code):
            if translation.strip() and translation != english:
                found[english].append(translation)
    return found


def truncate(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    return " ".join(words[:max(1, round(len(words) * rng.uniform(0.3, 0.6)))])


def change_digit(text: str, rng: random.Random) -> str:
    """`text` with one digit of one of its numbers replaced by another digit."""
    numbers = list(DIGITS.finditer(text))
    number = numbers[rng.randrange(len(numbers))]
    at = rng.randrange(number.start(), number.end())
    digit = rng.choice([d for d in "0123456789" if d != text[at]])
    return text[:at] + digit + text[at + 1:]


def boilerplate(rng: random.Random) -> tuple[str, str]:
    english, german = rng.choice(BOILERPLATE)
    values = {"n": rng.randint(1, 99), "m": rng.randint(1, 99), "y": rng.randint(1995, 2026)}
    english, german = english.format(**values), german.format(**values)
    if rng.random() < 0.3:
        english, german = english.upper(), german.upper()
    if rng.random() < 0.3:
        english, german = f"  {english} ", f" {german}  "
    return english, german


def can_spoil(kind: str, pair: tuple[str, str], others: dict[str, list[str]]) -> bool:
    """Whether clean `pair` can be spoiled as `kind`."""
    source, target = pair
    return {"wrong_lang_src": bool(others.get(source)), "wrong_lang_tgt": bool(others.get(source)),
            "untranslated": bool(source.strip()), "truncated": len(target.split(" ")) >= 4,
            "number_mismatch": bool(DIGITS.search(target)) and
            sorted(DIGITS.findall(source)) == sorted(DIGITS.findall(target))}.get(kind, True)


def spoil(kind: str, clean: list[tuple[str, str]], others: dict[str, list[str]], rng: random.Random) -> tuple[str, str]:
    """One spoiled pair of `kind`, from the first random clean pair that can be (`can_spoil`: build checks that one
    can)."""
    while True:
        source, target = clean[rng.randrange(len(clean))]
        if not can_spoil(kind, (source, target), others):
            continue
        if kind == "wrong_lang_src":
            return rng.choice(others[source]), target
        if kind == "wrong_lang_tgt":
            return source, rng.choice(others[source])
        if kind == "misaligned":
            other = clean[rng.randrange(len(clean))][1]
            if other != target:
                return source, other
            continue
        if kind == "untranslated":
            return source, source
        if kind == "truncated":
            return source, truncate(target, rng)
        if kind == "number_mismatch":
            return source, change_digit(target, rng)
        return boilerplate(rng)


def build(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    clean = read_pairs(args.clean, args.src, args.tgt)
    others = other_translations(args.others, args.src)
    noise = round(len(clean) * args.share / (1 - args.share))
    empty = [kind for kind in KINDS if not any(can_spoil(kind, pair, others) for pair in clean)]
    if len({target for _, target in clean}) < 2:
        empty.append("misaligned")
    if empty:  # spoil would draw forever
        raise SystemExit(f"error: no clean pair can be spoiled as {', '.join(empty)} (other languages' catalogs, "
                         "numbers, four-word targets, two distinct targets)")
    labelled = [(pair, "clean") for pair in clean]
    labelled += [(spoil(KINDS[index % len(KINDS)], clean, others, rng), KINDS[index % len(KINDS)])
                 for index in range(noise)]
    rng.shuffle(labelled)
    args.out.mkdir(parents=True, exist_ok=True)
    for side, position in ((args.src, 0), (args.tgt, 1)):
        (args.out / f"train.{side}").write_text("".join(pair[position] + "\n" for pair, _ in labelled),
                                                 encoding="utf-8")
        for split in ("dev", "test"):
            shutil.copyfile(args.clean / f"{split}.{side}", args.out / f"{split}.{side}")
    (args.out / "labels").write_text("".join(label + "\n" for _, label in labelled), encoding="utf-8")
    stats = {"clean": len(clean), "spoiled": noise, "share": args.share, "seed": args.seed,
             "kinds": dict(Counter(label for _, label in labelled if label != "clean")),
             "other_languages": sorted(path.name for path in args.others.glob(f"{args.src}-*"))}
    (args.out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    return stats


def score(args: argparse.Namespace) -> dict:
    """Per label: pairs, and those removed (a pair is kept when the kept text, walked in order, holds it next)."""
    noisy = read_pairs(args.noisy, args.src, args.tgt)
    labels = (args.noisy / "labels").read_text(encoding="utf-8").split("\n")[:-1]
    kept = read_pairs(args.prepared, "src.txt", "tgt.txt")
    totals, removed, position = Counter(labels), Counter(), 0
    for pair, label in zip(noisy, labels):
        if position < len(kept) and kept[position] == pair:
            position += 1
        else:
            removed[label] += 1
    assert position == len(kept), "the kept text is not a subsequence of the noisy corpus"
    table = {label: {"pairs": totals[label], "removed": removed[label],
                     "removed_share": round(removed[label] / totals[label], 4)} for label in ("clean", *KINDS)
             if totals[label]}
    table["clean"]["kept_share"] = round(1 - table["clean"]["removed_share"], 4)
    return table


def seed(args: argparse.Namespace) -> dict:
    """A seeded sample of `--lines` clean training pairs, in corpus order (what the seed models learn from)."""
    pairs = read_pairs(args.clean, args.src, args.tgt)
    chosen = sorted(random.Random(args.seed).sample(range(len(pairs)), min(args.lines, len(pairs))))
    args.out.mkdir(parents=True, exist_ok=True)
    for side, position in ((args.src, 0), (args.tgt, 1)):
        (args.out / f"train.{side}").write_text("".join(pairs[index][position] + "\n" for index in chosen),
                                                 encoding="utf-8")
    return {"lines": len(chosen), "seed": args.seed}


def report(runs: Path) -> str:
    """The recipe's table: per system, the share of each kind its prepare removed, and its test BLEU and chrF."""
    header = ["system", "clean kept", *(kind.replace("_", " ") for kind in KINDS), "BLEU", "chrF"]
    rows = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for system in ("clean", "noisy", "defaults", "full"):
        if not (runs / system / "test.json").exists():
            continue
        scores = json.loads((runs / system / "test.json").read_text(encoding="utf-8"))
        removed = runs / f"{system}.removed.json"
        table = json.loads(removed.read_text(encoding="utf-8")) if removed.exists() else {}
        cells = [f"{100 * table['clean']['kept_share']:.1f}%" if table else "100%"]
        cells += [f"{100 * table[kind]['removed_share']:.1f}%" if kind in table else "" for kind in KINDS]
        rows.append(f"| {system} | " + " | ".join(cells) + f" | {scores['bleu']['score']:.2f} | "
                    f"{scores['chrf']['score']:.2f} |")
    return "\n".join(rows)


def render(table: dict) -> str:
    rows = ["| pairs of | in the corpus | removed |", "|---|---:|---:|"]
    for label, row in table.items():
        rows.append(f"| {label} | {row['pairs']:,} | {100 * row['removed_share']:.1f}% |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("build", help="write the noisy corpus and its labels")
    made.add_argument("--clean", type=Path, required=True, help="a clean corpus: train/dev/test.<src|tgt>")
    made.add_argument("--others", type=Path, required=True, help="directories <src>-<code> of other languages")
    made.add_argument("--src", default="en")
    made.add_argument("--tgt", default="de")
    made.add_argument("--out", type=Path, required=True)
    made.add_argument("--share", type=float, default=0.4, help="share of spoiled pairs in the whole corpus")
    made.add_argument("--seed", type=int, default=1)
    scored = commands.add_parser("score", help="what a prepared data directory kept of the noisy corpus")
    scored.add_argument("--noisy", type=Path, required=True)
    scored.add_argument("--prepared", type=Path, required=True)
    scored.add_argument("--src", default="en")
    scored.add_argument("--tgt", default="de")
    scored.add_argument("--json", action="store_true")
    sampled = commands.add_parser("seed", help="a seeded sample of clean pairs (for the seed models)")
    sampled.add_argument("--clean", type=Path, required=True)
    sampled.add_argument("--src", default="en")
    sampled.add_argument("--tgt", default="de")
    sampled.add_argument("--lines", type=int, default=10_000)
    sampled.add_argument("--seed", type=int, default=7)
    sampled.add_argument("--out", type=Path, required=True)
    reported = commands.add_parser("report", help="the recipe's table from its runs")
    reported.add_argument("--runs", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command in ("build", "seed"):
        print(json.dumps((build if args.command == "build" else seed)(args)))
        return 0
    if args.command == "report":
        print(report(args.runs))
        return 0
    table = score(args)
    print(json.dumps(table) if args.json else render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
