"""Extract a verse-aligned Spanish/English Bible corpus from local SWORD modules.

Derivation
----------
Three public-domain translations are read with ``pysword`` from the SWORD
library installed by Debian (``/usr/share/sword`` by default):

* ``es``  - Reina-Valera 1909 (module ``spaRV1909eb``, package sword-text-sparv)
* ``en``  - King James Version (module ``engKJV2006eb``, package sword-text-kjv)
* ``web`` - World English Bible (module ``engWEB2015eb``, package sword-text-web)

All three modules are OSIS-encoded.  We walk every book, chapter and verse of
the KJV versification (the KJV module's own structure).  RV1909 is stored in
the same KJV slots; the WEB uses NRSVA, which agrees with the KJV on the 66
canonical books apart from III John 1:15 and Revelation 12:18, both empty in
the WEB module.  For each reference the raw OSIS text of every module is
fetched and cleaned by :func:`strip_markup`:

* footnotes and cross references (``<note>`` with everything inside, e.g.
  ``<reference>``/``<rdg>``/``<catchWord>``) are deleted;
* non-canonical headings (``<title>`` without ``canonical="true"``, e.g. the
  Psalm 119 acrostic letters of the KJV) and Song of Solomon speaker labels
  (``<speaker>``) are deleted;
* canonical Psalm superscriptions (``<title canonical="true">``) keep their
  words, because RV1909 has them as plain text at the start of verse 1:
  dropping them on the English side would misalign those verses;
* the words inside ``<w>``, ``<transChange>``, ``<q>``, ``<divineName>``,
  ``<foreign>``, ``<hi>``, ``<seg>`` ... are kept, all other tags and their
  Strong's/morphology attributes are dropped;
* USFM markers leaking from the KJV conversion (``\\nd``, ``\\+nd*``),
  pilcrows and other paragraph signs are removed, HTML entities unescaped and
  whitespace collapsed; anything after an end-of-book marker is cut (the WEB
  appends its glossary to Revelation 22:21).

RV1909 also carries the traditional subscriptions of the epistles ("Fué
escrita de Corinto ...") after the final "Amén."; they are cut because
neither English text has them.

A verse is kept only when all three cleaned texts are non-empty (e.g. the WEB
has Acts 8:37 only as a footnote).  RV1909 follows Hebrew/Spanish verse
divisions in a few chapters (Numbers 13, Job 39-40, Jonah 2, ...) while still
filling KJV slots, which shifts whole chapters by a verse or more.  Both RV1909
and KJV tag words with Strong's numbers, so a verse is also dropped when its
Spanish Strong's numbers match a neighbouring KJV verse clearly better than
its own slot, or when it swallowed the text of an empty or shifted neighbour
(disable with ``--keep-misaligned``).  The WEB text follows the KJV division
(its Strong's tags do not, so they are not used).

Splits are by book: Judges is ``dev``, Acts is ``test``, everything else is
``train``.  For each split the files ``<split>.es``, ``<split>.en``,
``<split>.web`` and ``ids.<split>`` ("Book C:V") are written line-aligned.

Usage::

    python recipes/bible/extract.py --out DIR [--sword-path /usr/share/sword]
"""

import argparse
import functools
import html
import logging
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG = logging.getLogger("bible.extract")

DEFAULT_SWORD_PATH = "/usr/share/sword"
# language key -> SWORD module name (the [Section] name of mods.d/*.conf)
MODULES: dict[str, str] = {
    "es": "spaRV1909eb",
    "en": "engKJV2006eb",
    "web": "engWEB2015eb",
}
DEBIAN_PACKAGES: dict[str, str] = {
    "spaRV1909eb": "sword-text-sparv",
    "engKJV2006eb": "sword-text-kjv",
    "engWEB2015eb": "sword-text-web",
}
REFERENCE_LANG = "en"  # whose versification drives the verse iteration
CHECK_LANG = "es"  # compared with REFERENCE_LANG through Strong's numbers
SPLIT_BOOKS: dict[str, str] = {"Judges": "dev", "Acts": "test"}
SPLITS = ("train", "dev", "test")

# alignment check thresholds (Jaccard similarity of Strong's number sets)
MAX_SHIFT = 5  # look this many verses either side for a better match
MIN_SHIFT_SCORE = 0.4  # a neighbour must match at least this well ...
SHIFT_MARGIN = 0.15  # ... and this much better than the verse's own slot
WEAK_SCORE = 0.2  # next to a shifted verse, a match this poor is dropped too
ABSORB_COVERAGE = 0.5  # share of a displaced verse's numbers found in a neighbour

# --- markup stripping -------------------------------------------------------

_BOOK_END = re.compile(r'<div\b(?=[^>]*\btype="book")(?=[^>]*\beID=)[^>]*/>')
_DROP_ELEMENTS = re.compile(r"<(note|speaker|catchWord|rdg)\b[^>]*?(?:/>|>.*?</\1\s*>)", re.DOTALL)
_NON_CANONICAL_TITLE = re.compile(r'<title\b(?![^>]*\bcanonical="true")[^>]*?(?:/>|>.*?</title\s*>)', re.DOTALL)
_USFM_MARKER = re.compile(r"\\\+?[a-z]+\d*(?:\*| ?)")  # \nd opens, \+nd* closes
# "engendró</w><transChange>un": two elements glued although two words meet
_GLUED_ELEMENTS = re.compile(r"(?<=[\w,.;:!?\u201d\u2019])(?:</[^>]+>)+(?:<[^/>][^>]*(?<!/)>)+(?=(?P<right>\w+))")
_LAST_WORD = re.compile(r"\w*$")
# ... except a Spanish object pronoun attached to its verb ("oyéndo</w><...>lo")
_CLITICS = frozenset("me te se le les lo los la las nos os".split())
_ACCENTED = re.compile("[áéíóú]")
_BLOCK_TAG = re.compile(r"</?(?:l|lg|lb|p|div|item|list|chapter|milestone|verse|table|row|cell)\b[^>]*>")
_ANY_TAG = re.compile(r"<[^>]*>")
_PARAGRAPH_MARKS = re.compile("[\u00b6\u204b\u2029\u2028]")
_WHITESPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)\]\u00bb])")
# keep the WEB's deliberate space between nested quotes ("walk.\u2019 \u201d")
_SPACE_BEFORE_QUOTE = re.compile(r"(?<![\u2018\u2019\u201c\u201d])\s+([\u201d\u2019])")
_SPACE_AFTER_OPENER = re.compile(r"([(\[\u201c\u00ab\u00a1\u00bf])\s+")
_SPANISH_COLOPHON = re.compile(r"(?<=Am[eé]n\.)\s+[^.]*\b(?:[Ee]scrita|[Ee]nviada)\b[^.]*\.$")
_LEMMA_ATTR = re.compile(r'\blemma="([^"]*)"')
_STRONGS_NUMBER = re.compile(r"\b[GH]\d+")


def strip_markup(raw: str) -> str:
    """Turn one verse of raw OSIS markup into clean natural text."""
    text = _truncate_at_book_end(raw)
    text = _DROP_ELEMENTS.sub(" ", text)
    text = _NON_CANONICAL_TITLE.sub(" ", text)
    text = _USFM_MARKER.sub("", text)
    text = _GLUED_ELEMENTS.sub(_separate_glued_words, text)
    text = _BLOCK_TAG.sub(" ", text)
    text = _ANY_TAG.sub("", text)
    text = html.unescape(text)
    text = _PARAGRAPH_MARKS.sub(" ", text)
    return normalise_spacing(text)


def _truncate_at_book_end(raw: str) -> str:
    """Cut whatever follows the end-of-book marker (e.g. the WEB glossary)."""
    match = _BOOK_END.search(raw)
    return raw[: match.start()] if match else raw


def _separate_glued_words(match: re.Match[str]) -> str:
    left = _LAST_WORD.search(match.string, max(0, match.start() - 40), match.start()).group()
    return match.group() if is_enclitic(left, match["right"]) else " " + match.group()


def is_enclitic(left: str, right: str) -> bool:
    """True if ``right`` is a Spanish pronoun written onto the verb ``left``.

    Infinitives/imperatives (decir+les, guardad+lo) and forms that carry a
    written accent only because of the attached pronoun (oyéndo+lo, sáca+lo).
    """
    if right.lower() not in _CLITICS:
        return False
    return left.endswith(("r", "d")) or bool(_ACCENTED.search(left[:-1]))


def normalise_spacing(text: str) -> str:
    """Collapse whitespace and remove spaces left inside punctuation."""
    text = _WHITESPACE.sub(" ", text).strip()
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _SPACE_BEFORE_QUOTE.sub(r"\1", text)
    return _SPACE_AFTER_OPENER.sub(r"\1", text)


def strip_spanish_colophon(text: str) -> str:
    """Drop an epistle subscription such as "Amén. Escrita de Roma ..."."""
    return _SPANISH_COLOPHON.sub("", text)


def clean_verse(lang: str, raw: str) -> str:
    """Clean text of one verse of the module behind ``lang``."""
    text = strip_markup(raw)
    return strip_spanish_colophon(text) if lang == "es" else text


def strongs_numbers(raw: str) -> frozenset[str]:
    """Strong's numbers tagged in raw OSIS (lemma="strong:G2424 G5547")."""
    return frozenset(number for attr in _LEMMA_ATTR.findall(raw) for number in _STRONGS_NUMBER.findall(attr))


# --- reading the SWORD modules -----------------------------------------------


class MissingModuleError(Exception):
    """A required SWORD module is not installed under the given path."""


@dataclass(frozen=True)
class VerseRef:
    """One verse reference in the reference versification."""

    book: str
    chapter: int
    verse: int

    def __str__(self) -> str:
        return f"{self.book} {self.chapter}:{self.verse}"


@dataclass(frozen=True)
class AlignedVerse:
    """Cleaned texts and Strong's numbers of one verse, keyed by language."""

    ref: VerseRef
    texts: dict[str, str]
    strongs: dict[str, frozenset[str]]


def missing_module_message(module: str, sword_path: str) -> str:
    """One-line error telling how to install a missing module."""
    package = DEBIAN_PACKAGES.get(module, "sword-text-...")
    return (
        f"error: SWORD module {module} not found under {sword_path}; "
        f"install Debian package {package} (apt-get install {package})"
    )


def load_bibles(sword_path: str) -> dict[str, Any]:
    """Open every module of MODULES; raise MissingModuleError if one is absent."""
    from pysword.modules import SwordModules

    library = SwordModules(sword_path)
    try:
        available = library.parse_modules()
    except OSError:
        available = {}
    bibles = {}
    for lang, module in MODULES.items():
        if module not in available:
            raise MissingModuleError(missing_module_message(module, sword_path))
        _warn_if_not_osis(module, available[module])
        bibles[lang] = _cache_blocks(_open_module(library, module, sword_path))
    return bibles


def _open_module(library: Any, module: str, sword_path: str) -> Any:
    """Open one module; a conf file without its data files counts as missing."""
    try:
        return library.get_bible_from_module(module)
    except OSError as exc:
        raise MissingModuleError(missing_module_message(module, sword_path)) from exc


def _warn_if_not_osis(module: str, conf: dict[str, str]) -> None:
    source_type = conf.get("sourcetype", "")
    if source_type.upper() != "OSIS":
        LOG.warning("%s has SourceType=%r; only OSIS markup is handled", module, source_type)


def _cache_blocks(bible: Any) -> Any:
    """Memoise block decompression; pysword inflates a whole book per verse."""
    if hasattr(bible, "_decompressed_text"):
        bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
    return bible


def iter_chapters(bible: Any) -> Iterator[tuple[str, int, int]]:
    """Yield (book name, chapter number, verse count) in canonical order."""
    for books in bible.get_structure().get_books().values():
        for book in books:
            for chapter, n_verses in enumerate(book.chapter_lengths, start=1):
                yield book.name, chapter, n_verses


def fetch_chapter(bible: Any, book: str, chapter: int) -> list[str]:
    """Raw verse texts of one chapter; empty when the module lacks it."""
    try:
        return list(bible.get_iter(books=book, chapters=chapter, clean=False))
    except ValueError:
        return []


def iter_verses(bibles: dict[str, Any]) -> Iterator[AlignedVerse]:
    """Yield every verse of the reference versification, in canonical order."""
    for book, chapter, n_verses in iter_chapters(bibles[REFERENCE_LANG]):
        chapters = {lang: fetch_chapter(bible, book, chapter) for lang, bible in bibles.items()}
        for verse in range(1, n_verses + 1):
            raw = {lang: texts[verse - 1] if verse <= len(texts) else "" for lang, texts in chapters.items()}
            yield AlignedVerse(
                VerseRef(book, chapter, verse),
                texts={lang: clean_verse(lang, text) for lang, text in raw.items()},
                strongs={lang: strongs_numbers(raw[lang]) for lang in (CHECK_LANG, REFERENCE_LANG)},
            )


# --- alignment check ------------------------------------------------------------


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two sets (0 when both are empty)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def prefers_neighbour(src: Sequence[frozenset[str]], ref: Sequence[frozenset[str]], i: int) -> bool:
    """True when verse i of src matches a nearby ref verse clearly better than ref[i]."""
    if not src[i] or not ref[i]:
        return False
    own = jaccard(src[i], ref[i])
    nearby = range(max(0, i - MAX_SHIFT), min(len(ref), i + MAX_SHIFT + 1))
    best = max((jaccard(src[i], ref[j]) for j in nearby if j != i), default=0.0)
    return best >= MIN_SHIFT_SCORE and best > own + SHIFT_MARGIN


def weak_run_edges(src: Sequence[frozenset[str]], ref: Sequence[frozenset[str]], shifted: set[int]) -> set[int]:
    """Poorly matching verses next to shifted ones (the ends of a shifted run)."""
    edges = {i for j in shifted for i in (j - 1, j + 1) if 0 <= i < len(src)}
    return {i for i in edges - shifted if src[i] and ref[i] and jaccard(src[i], ref[i]) < WEAK_SCORE}


def absorbers(src: Sequence[frozenset[str]], ref: Sequence[frozenset[str]], displaced: set[int]) -> set[int]:
    """Verses whose src text also holds the ref text of a displaced neighbour.

    A displaced slot is empty or shifted in src; its ref text then often ends
    up merged into the verse next to it (e.g. RV1909 Acts 19:40 holds 19:40-41).
    """
    found = set()
    for slot in displaced:
        for i in (slot - 1, slot + 1):
            extra = ref[slot] - ref[i] if 0 <= i < len(src) and i not in displaced else frozenset()
            if extra and len(src[i] & extra) / len(extra) >= ABSORB_COVERAGE:
                found.add(i)
    return found


def find_misaligned(verses: Sequence[AlignedVerse]) -> set[int]:
    """Indices of verses whose CHECK_LANG text is not the REFERENCE_LANG verse."""
    src = [v.strongs[CHECK_LANG] for v in verses]
    ref = [v.strongs[REFERENCE_LANG] for v in verses]
    empty = {i for i, v in enumerate(verses) if not v.texts[CHECK_LANG]}
    shifted = {i for i in range(len(verses)) if prefers_neighbour(src, ref, i)}
    return shifted | weak_run_edges(src, ref, shifted) | absorbers(src, ref, empty | shifted)


# --- selecting, splitting and writing ---------------------------------------------


def select_verses(verses: Sequence[AlignedVerse], check_alignment: bool) -> list[AlignedVerse]:
    """Keep verses with text in every module (and, optionally, aligned ones)."""
    misaligned = find_misaligned(verses) if check_alignment else set()
    dropped: Counter[str] = Counter()
    kept = []
    for i, item in enumerate(verses):
        missing = [lang for lang, text in item.texts.items() if not text]
        reason = f"empty in {','.join(missing)}" if missing else "misaligned" if i in misaligned else ""
        if reason:
            dropped[reason] += 1
            LOG.debug("dropping %s: %s", item.ref, reason)
        else:
            kept.append(item)
    for reason, count in sorted(dropped.items()):
        LOG.info("dropped %d verses: %s", count, reason)
    return kept


def split_of(book: str) -> str:
    """Name of the split a book belongs to."""
    return SPLIT_BOOKS.get(book, "train")


def group_by_split(verses: Iterable[AlignedVerse]) -> dict[str, list[AlignedVerse]]:
    """Group verses by the split of their book."""
    splits: dict[str, list[AlignedVerse]] = {name: [] for name in SPLITS}
    for item in verses:
        splits[split_of(item.ref.book)].append(item)
    return splits


def write_lines_atomic(path: Path, lines: Iterable[str]) -> None:
    """Write one item per line via a temporary file and os.replace."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            for line in lines:
                if "\n" in line or "\t" in line or "\r" in line:
                    raise ValueError(f"control whitespace in line for {path}: {line!r}")
                handle.write(line + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_split(out_dir: Path, split: str, items: list[AlignedVerse]) -> None:
    """Write the text files and the ids file of one split."""
    for lang in MODULES:
        write_lines_atomic(out_dir / f"{split}.{lang}", (v.texts[lang] for v in items))
    write_lines_atomic(out_dir / f"ids.{split}", (str(v.ref) for v in items))


# --- command line --------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--sword-path",
        default=DEFAULT_SWORD_PATH,
        help=f"SWORD library holding mods.d/ and modules/ (default: {DEFAULT_SWORD_PATH})",
    )
    parser.add_argument(
        "--keep-misaligned",
        action="store_true",
        help="skip the Strong's-number check that drops shifted RV1909 verses",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every dropped verse")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    start = time.monotonic()
    try:
        bibles = load_bibles(args.sword_path)
    except MissingModuleError as exc:
        print(exc, file=sys.stderr)
        return 1
    verses = select_verses(list(iter_verses(bibles)), check_alignment=not args.keep_misaligned)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, items in group_by_split(verses).items():
        write_split(args.out, split, items)
        LOG.info("%s: %d verses", split, len(items))
    LOG.info("total %d verses in %s (%.1fs)", len(verses), args.out, time.monotonic() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
