"""Write the pairs file of the multilingual recipe, and its zero-shot test sets.

From English -> X message corpora (recipes/messages/extract.py, one directory `en-X` per language), the pairs file
lists both directions of each language (en-X and X-en, the same files read the other way round) for
`nmtkit prepare --pairs`. A zero-shot test set X -> Y pairs the X and Y translations of the English messages that
are in the test split of both corpora: no training pair of either language holds those messages, and no X -> Y
pair is trained at all.

    python recipes/multilingual/pairs.py --data data/multilingual --langs de fr es ru --zero-shot de-fr fr-de
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SPLITS = ("train", "dev", "test")


def pairs_entries(langs: list[str]) -> list[dict]:
    """en -> X and X -> en for each language, with files relative to the data directory."""
    entries = []
    for lang in langs:
        for src, tgt in (("en", lang), (lang, "en")):
            entry = {"src_lang": src, "tgt_lang": tgt}
            for split in SPLITS:
                entry[split] = [f"en-{lang}/{split}.{src}", f"en-{lang}/{split}.{tgt}"]
            entries.append(entry)
    return entries


def read_test(data: Path, lang: str) -> dict[str, str]:
    """English message -> its first translation in the test split of the en-`lang` corpus."""
    english = (data / f"en-{lang}" / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    other = (data / f"en-{lang}" / f"test.{lang}").read_text(encoding="utf-8").split("\n")[:-1]
    translations: dict[str, str] = {}
    for source, target in zip(english, other):
        translations.setdefault(source, target)
    return translations


def zero_shot(data: Path, src: str, tgt: str) -> int:
    """test.{src}-{tgt}.{src,tgt} and test.{src}-{tgt}.en (the English the two share); returns the line count."""
    source, target = read_test(data, src), read_test(data, tgt)
    shared = [english for english in source if english in target]
    for lang, lines in ((src, [source[e] for e in shared]), (tgt, [target[e] for e in shared]), ("en", shared)):
        (data / f"test.{src}-{tgt}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(shared)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="directory holding en-X corpora")
    parser.add_argument("--langs", nargs="+", required=True, help="the languages X")
    parser.add_argument("--zero-shot", nargs="*", default=[], help="X-Y directions to write test sets for")
    args = parser.parse_args(argv)
    missing = [lang for lang in args.langs if not (args.data / f"en-{lang}" / "test.en").exists()]
    if missing:
        print(f"error: no extracted corpus for {', '.join(missing)} in {args.data} (recipes/messages/extract.py)",
              file=sys.stderr)
        return 1
    (args.data / "pairs.yaml").write_text(json.dumps(pairs_entries(args.langs), indent=1) + "\n", encoding="utf-8")
    for direction in args.zero_shot:
        src, _, tgt = direction.partition("-")
        if src not in args.langs or tgt not in args.langs:
            print(f"error: zero-shot direction {direction} needs two of {', '.join(args.langs)}", file=sys.stderr)
            return 1
        print(f"zero-shot {direction}: {zero_shot(args.data, src, tgt)} test lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
