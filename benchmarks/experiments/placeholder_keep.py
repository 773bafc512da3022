"""Issue 50's measurement on a test set: of the source lines that hold placeholders, the share of each system's
translations (and of the human references) that keep exactly the source's multiset of placeholders (their texts;
and the same with printf conversions compared by argument, so that `%2$d ... %1$s` keeps `%s ... %d`), with BLEU
and chrF of each system against the references.

Usage: python benchmarks/experiments/placeholder_keep.py --src test.en --ref test.de --lang de \
           --hyp plain=plain.hyp --hyp masked=masked.hyp [--placeholders auto] [--subsets]

The run of docs/translate.md (D=data/ph/de, R=runs/ph; KIND plain, then masked with `--set placeholders=auto`):
    python recipes/messages/extract.py --lang de --code de --out $D
    nmtkit prepare --src-lang en --tgt-lang de --out $D/KIND --train-src $D/train.en --train-tgt $D/train.de \
        --dev-src $D/dev.en --dev-tgt $D/dev.de [--set placeholders=auto]
    nmtkit train --data $D/KIND --config recipes/bible/transformer.yaml --max-time 6m --threads 2 --out $R/KIND
        (ar and ru: --max-steps 2400 --threads 1, the same work whatever else runs; Japanese seeds: --seed N)
    nmtkit translate -m $R/plain/model.pt --threads 2 --beam 5 --input $D/test.en > $R/plain.hyp
    nmtkit translate -m $R/masked/model.pt --threads 2 --beam 5 --no-guard-placeholders \
        --input $D/test.en > $R/masked.hyp
    nmtkit translate -m $R/masked/model.pt --threads 2 --beam 5 --input $D/test.en > $R/guarded.hyp
    python benchmarks/experiments/placeholder_keep.py --src $D/test.en --ref $D/test.de --lang de \
        --hyp plain=$R/plain.hyp --hyp masked+repair=$R/masked.hyp --hyp masked+guaranteed=$R/guarded.hyp
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import sacrebleu

from nmtkit.symbols.placeholders import Patterns, find_units, load_patterns, placeholder_keys


def placeholder_texts(text: str, patterns: Patterns) -> Counter:
    """The placeholders of `text` as a multiset of their texts (a tag pair counts as its two tags)."""
    return Counter(part for unit in find_units(text, patterns) for part in unit.texts)


def kept_share(sources: list[str], outputs: list[str], patterns: Patterns) -> tuple[int, float, float]:
    """(lines whose source holds a placeholder, the share of them whose output holds the same multiset of texts, the
    share whose output holds the same `placeholder_keys`: printf conversions by argument)."""
    marked = [(source, output) for source, output in zip(sources, outputs) if placeholder_texts(source, patterns)]
    texts = sum(placeholder_texts(output, patterns) == placeholder_texts(source, patterns) for source, output in marked)
    keys = sum(placeholder_keys(output, patterns) == placeholder_keys(source, patterns) for source, output in marked)
    return len(marked), texts / max(len(marked), 1), keys / max(len(marked), 1)


def read(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def subset_scores(sources: list[str], hypotheses: list[str], references: list[str], patterns: Patterns,
                  tokenize: str) -> str:
    """BLEU / chrF on the lines whose source holds a placeholder, and on the others (`--subsets`)."""
    scores = []
    for wanted in (True, False):
        rows = [index for index, source in enumerate(sources) if bool(placeholder_texts(source, patterns)) == wanted]
        hyps, refs = [hypotheses[row] for row in rows], [[references[row] for row in rows]]
        scores.append(f"{sacrebleu.corpus_bleu(hyps, refs, tokenize=tokenize).score:.2f} / "
                      f"{sacrebleu.corpus_chrf(hyps, refs).score:.2f}")
    return " | ".join(scores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--lang", default="en", help="target language, for BLEU's tokenizer (zh, ja: their own)")
    parser.add_argument("--hyp", action="append", default=[], help="NAME=FILE, a system's translations")
    parser.add_argument("--placeholders", default="auto")
    parser.add_argument("--subsets", action="store_true",
                        help="also BLEU / chrF on the lines with placeholders and on the lines without")
    args = parser.parse_args(argv)
    patterns = load_patterns(args.placeholders)
    sources, references = read(args.src), read(args.ref)
    tokenize = {"zh": "zh", "ja": "ja-mecab"}.get(args.lang.split("_")[0], "13a")
    extra = (" with placeholders: BLEU / chrF | without: BLEU / chrF |", "---|---|") if args.subsets else ("", "")
    print(f"| system | lines with placeholders | kept exactly | kept, printf by argument | BLEU | chrF |{extra[0]}")
    print(f"|---|---|---|---|---|---|{extra[1]}")
    for name, path in (item.split("=", 1) for item in args.hyp):
        hypotheses = read(path)
        marked, share, by_argument = kept_share(sources, hypotheses, patterns)
        bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize).score
        chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
        subsets = f" {subset_scores(sources, hypotheses, references, patterns, tokenize)} |" if args.subsets else ""
        shares = f"{100 * share:.1f}% | {100 * by_argument:.1f}%"
        print(f"| {name} | {marked} | {shares} | {bleu:.2f} | {chrf:.2f} |{subsets}")
    marked, share, by_argument = kept_share(sources, references, patterns)
    print(f"| human reference | {marked} | {100 * share:.1f}% | {100 * by_argument:.1f}% | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
