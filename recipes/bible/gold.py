"""Gold word alignments for the test book (Acts) from the Strong's numbers of RV1909 and the KJV.

Both SWORD modules tag words with Strong's numbers: ``<w lemma="strong:G2316">Dios</w>``. A ``<w>`` element
is a *group* of one or more words; words with the same number translate the same Greek word. For every verse
of ``ids.test`` this script writes, line-aligned with it:

* ``test.words.es`` / ``test.words.en``: the verse cleaned by ``extract.py``'s rules and split into words and
  punctuation (``tokenize``), i.e. ``test.es`` / ``test.en`` tokenized; a word cut by markup stays one word;
* ``test.gold``: Pharaoh links ``i-j`` (sure) and ``ipj`` (possible), i = Spanish word, j = English word, 0-based.

For each number found on both sides, every word of every Spanish group carrying it is linked to every word of
every English group carrying it. The link is *sure* when both groups are one word, carry only that number, and
the number tags only that one group in the verse on each side; otherwise it is *possible* (a multi-word group
such as "the world" <-> "mundo", or a number repeated in the verse, such as G4160 on both "made" and "do" in
Acts 1:1). Untagged words and punctuation stay unaligned.

Usage::

    python recipes/bible/gold.py --data data/bible/raw [--sword-path /usr/share/sword]
"""

from __future__ import annotations

import argparse
import html
import logging
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import extract  # noqa: E402  (the sibling script, whose markup rules this one shares)

LOG = logging.getLogger("bible.gold")
TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*|[^\w\s]")
MARKUP = re.compile(r"<w\b([^>]*)>|</w\s*>|<[^>]*>|[^<]+")
LANGS = ("es", "en")


def tokenize(text: str) -> list[str]:
    """Words and single punctuation marks."""
    return TOKEN.findall(text)


@dataclass
class TaggedVerse:
    words: list[str]
    groups: list[tuple[frozenset[str], list[int]]]  # (Strong's numbers, word indices) per <w> element


def tagged_words(raw: str) -> TaggedVerse:
    """Tokens of one verse of OSIS markup and the groups of them that carry Strong's numbers.

    The text is cleaned with extract.py's rules and tokenized as a whole, so a word split by markup (an enclitic
    "viéndo</w><w>lo", or "day</w>’s") stays one token and belongs to the groups of all its characters.
    """
    text = extract._truncate_at_book_end(raw)
    text = extract._DROP_ELEMENTS.sub(" ", text)
    text = extract._NON_CANONICAL_TITLE.sub(" ", text)
    text = extract._USFM_MARKER.sub("", text)
    text = extract._GLUED_ELEMENTS.sub(extract._separate_glued_words, text)
    chars: list[str] = []
    owners: list[int] = []  # the <w> group of each character, -1 outside
    groups: list[frozenset[str]] = []
    current = -1
    for match in MARKUP.finditer(text):
        chunk = match.group()
        if match.group(1) is not None:
            groups.append(extract.strongs_numbers(chunk))
            current = len(groups) - 1
        elif chunk.startswith("</w"):
            current = -1
        elif not chunk.startswith("<"):
            piece = extract._PARAGRAPH_MARKS.sub(" ", html.unescape(chunk))
            chars.extend(piece)
            owners.extend([current] * len(piece))
    words, members = [], defaultdict(list)
    for match in TOKEN.finditer("".join(chars)):
        for group in {owners[position] for position in range(match.start(), match.end())} - {-1}:
            if groups[group] and re.match(r"\w", match.group()):
                members[group].append(len(words))
        words.append(match.group())
    return TaggedVerse(words, [(groups[group], indices) for group, indices in sorted(members.items())])


def gold_links(source: TaggedVerse, target: TaggedVerse) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(sure, possible) links between the words of two verses; possible excludes sure."""
    by_number: list[dict[str, list[tuple[frozenset[str], list[int]]]]] = [defaultdict(list), defaultdict(list)]
    for side, verse in enumerate((source, target)):
        for group in verse.groups:
            for number in group[0]:
                by_number[side][number].append(group)
    sure, possible = set(), set()
    for number in by_number[0].keys() & by_number[1].keys():
        src_groups, tgt_groups = by_number[0][number], by_number[1][number]
        single = len(src_groups) == len(tgt_groups) == 1 and all(
            len(indices) == 1 and len(numbers) == 1 for numbers, indices in src_groups + tgt_groups)
        for _, src_indices in src_groups:
            for _, tgt_indices in tgt_groups:
                links = {(i, j) for i in src_indices for j in tgt_indices}
                (sure if single else possible).update(links)
    return sure, possible - sure


def format_gold(sure: set[tuple[int, int]], possible: set[tuple[int, int]]) -> str:
    links = [(i, j, "-") for i, j in sure] + [(i, j, "p") for i, j in possible]
    return " ".join(f"{i}{mark}{j}" for i, j, mark in sorted(links))


def parse_ref(text: str) -> tuple[str, int, int]:
    book, _, place = text.rpartition(" ")
    chapter, verse = place.split(":")
    return book, int(chapter), int(verse)


def fetch_verses(bible, refs: list[tuple[str, int, int]]) -> list[str]:
    chapters: dict[tuple[str, int], list[str]] = {}
    for book, chapter, _ in refs:
        if (book, chapter) not in chapters:
            chapters[book, chapter] = extract.fetch_chapter(bible, book, chapter)
    return [chapters[book, chapter][verse - 1] for book, chapter, verse in refs]


def write_gold(data: Path, sword_path: str, split: str = "test") -> int:
    """Write <split>.words.es, <split>.words.en and <split>.gold for the verses of ids.<split>; returns links."""
    bibles = extract.load_bibles(sword_path)
    refs = [parse_ref(line) for line in (data / f"ids.{split}").read_text(encoding="utf-8").splitlines()]
    verses = {lang: [tagged_words(raw) for raw in fetch_verses(bibles[lang], refs)] for lang in LANGS}
    for lang in LANGS:
        extract.write_lines_atomic(data / f"{split}.words.{lang}", (" ".join(v.words) for v in verses[lang]))
    pairs = [gold_links(es, en) for es, en in zip(verses["es"], verses["en"])]
    extract.write_lines_atomic(data / f"{split}.gold", (format_gold(sure, possible) for sure, possible in pairs))
    sure_count, possible_count = sum(len(s) for s, _ in pairs), sum(len(p) for _, p in pairs)
    LOG.info("%d verses: %d sure and %d possible links", len(refs), sure_count, possible_count)
    return sure_count + possible_count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="directory holding ids.test (extract.py --out)")
    parser.add_argument("--sword-path", default=extract.DEFAULT_SWORD_PATH, help="SWORD library")
    parser.add_argument("--split", default="test", help="split whose ids.<split> to align")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        write_gold(args.data, args.sword_path, args.split)
    except extract.MissingModuleError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
