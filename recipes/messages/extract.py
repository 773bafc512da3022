"""Extract a line-aligned English -> X corpus of software messages from the gettext catalogs of this machine.

Derivation
----------
Every ``*.mo`` file directly under ``<locale-dir>/<lang>/LC_MESSAGES/`` is read in name order by :func:`parse_mo`,
a reader of the GNU .mo format (GNU gettext manual, "The Format of GNU MO Files"): magic number 0x950412de in
either byte order, major revision 0 or 1, and two tables of (length, offset) for the original and the translated
strings. A catalog is decoded with the charset its header declares (UTF-8 when it declares none); a catalog that
cannot be read or decoded is skipped with a warning and named in stats.json, and so is one in visual-order
ISO-8859-8 (RFC 1556), whose Hebrew lines are stored reversed.

Each entry becomes (English, translation) pairs: a message context (before "\\x04") is dropped; a plural entry
gives (singular, the form the catalog's Plural-Forms rule uses for n=1) and (plural, the form for n=2), which is
(form 0, form 1) for most languages and under GNU's default rule, but not for Arabic, whose form 0 is for n=0, nor
for one-form languages (Chinese, Japanese, Thai), whose only form translates both. System-dependent strings
(revision x.1 tables, e.g. messages with <PRIu64>) are not read, only counted.

Text is kept as the catalog holds it (byte for byte from UTF-8 catalogs): nothing is stripped or normalised. Only
what cannot live in a line-based file is cut:
a message with line breaks ("\\n", "\\r", "\\r\\n") becomes one pair per line when both sides have as many lines.
Every pair that is dropped is counted by reason (see README.md), the counts go to stats.json and to stderr.

Splits: the distinct English messages are ordered by the blake2b hash of their UTF-8 bytes and fill test, then
dev, with all their pairs (a message whose pairs would overflow a split goes to the next one), so that no English
message is in two splits; the rest is train. Inside each split the pairs keep catalog order.

Usage::

    python recipes/messages/extract.py --lang zh_CN --out data/messages/en-zh [--code zh]
        [--locale-dir /usr/share/locale] [--dev 1000] [--test 1000]
"""

from __future__ import annotations

import argparse
import codecs
import gettext
import hashlib
import json
import logging
import re
import struct
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("messages.extract")

MO_MAGIC = 0x950412DE
MO_HEADER = "5I"  # magic, revision, number of strings, offsets of the original and translation tables
MO_HEADER_SIZE = struct.calcsize(MO_HEADER)
SYSTEM_DEPENDENT_COUNT_AT = 36  # from minor revision 1 on: the number of system-dependent strings, a uint32
# RFC 1556: MIME "ISO-8859-8" is Hebrew in visual order, i.e. each line stored reversed ("-I" is logical order)
VISUAL_ORDER_CODECS = {"iso8859-8"}
DEFAULT_PLURAL_FORMS = (0, 1)  # GNU gettext's rule without a (readable) Plural-Forms header: n != 1
SPLITS = ("train", "dev", "test")
MIN_CORPUS_FACTOR = 5  # below 5 x (dev + test) pairs, fixed-size dev and test would starve train
LINE_BREAK = re.compile(r"\r\n|\r|\n")
CHARSET = re.compile(r"charset=([^\s;]+)")
PLURAL_RULE = re.compile(r"\bplural\s*=\s*([^;\n]+)")


class CatalogError(Exception):
    """A catalog that cannot be read; it is skipped with a warning."""


class ExtractError(Exception):
    """An error in the arguments or the input as a whole: one line on stderr and exit status 1."""


@dataclass
class Catalog:
    """The raw strings of one .mo file."""

    entries: list[tuple[bytes, bytes]]
    system_dependent: int  # strings in the revision x.1 tables, which are not read


@dataclass
class DecodedCatalog:
    """One catalog as text, with the indices of its plural forms for n=1 and n=2."""

    entries: list[tuple[str, str]]
    charset: str
    plural_forms: tuple[int, int]
    system_dependent: int


@dataclass
class Corpus:
    """The kept pairs in catalog order, and the account of everything else."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    entries: int = 0
    removed: Counter = field(default_factory=Counter)
    catalogs_read: dict[str, str] = field(default_factory=dict)  # file name -> charset
    catalogs_skipped: dict[str, str] = field(default_factory=dict)  # file name -> why


def _byte_order(data: bytes) -> str:
    for order in "<>":
        if len(data) >= 4 and struct.unpack_from(order + "I", data)[0] == MO_MAGIC:
            return order
    raise CatalogError("not a .mo file (bad magic number)")


def _string_table(data: bytes, order: str, offset: int, count: int) -> list[bytes]:
    """The `count` strings whose (length, offset) descriptors start at `offset`."""
    if offset + 8 * count > len(data):
        raise CatalogError("truncated string table")
    strings = []
    for length, start in struct.iter_unpack(order + "2I", data[offset:offset + 8 * count]):
        if start + length > len(data):
            raise CatalogError("truncated string")
        strings.append(data[start:start + length])
    return strings


def parse_mo(data: bytes) -> Catalog:
    """The (original, translation) byte strings of a GNU .mo file, in file order."""
    order = _byte_order(data)
    if len(data) < MO_HEADER_SIZE:
        raise CatalogError("truncated header")
    _, revision, count, originals, translations = struct.unpack_from(order + MO_HEADER, data)
    if revision >> 16 > 1:
        raise CatalogError(f"unsupported major revision {revision >> 16}")
    entries = list(zip(_string_table(data, order, originals, count),
                       _string_table(data, order, translations, count)))
    system_dependent = 0
    if revision & 0xFFFF:
        if len(data) < SYSTEM_DEPENDENT_COUNT_AT + 4:
            raise CatalogError("truncated header")
        system_dependent = struct.unpack_from(order + "I", data, SYSTEM_DEPENDENT_COUNT_AT)[0]
    return Catalog(entries, system_dependent)


def catalog_charset(header: str) -> str:
    """The codec of the charset a catalog header declares; UTF-8 when it declares none."""
    match = CHARSET.search(header)
    if match is None:
        return "utf-8"
    try:
        codec = codecs.lookup(match.group(1)).name
    except LookupError:
        raise CatalogError(f"unknown charset {match.group(1)!r}") from None
    if codec in VISUAL_ORDER_CODECS:
        raise CatalogError(f"charset {match.group(1)} stores right-to-left text in visual (reversed) order")
    return codec


def plural_forms(header: str, name: str) -> tuple[int, int]:
    """Which translation forms the header's Plural-Forms rule picks for n=1 and n=2 (English singular and plural)."""
    match = PLURAL_RULE.search(header)
    if match is None:
        return DEFAULT_PLURAL_FORMS
    try:
        rule = gettext.c2py(match.group(1).strip())
        return rule(1), rule(2)
    except (ValueError, ArithmeticError, RecursionError):
        log.warning("%s: cannot read the plural rule %r; using forms 0 and 1", name, match.group(1))
        return DEFAULT_PLURAL_FORMS


def read_catalog(path: Path) -> DecodedCatalog:
    """Parse and decode a whole catalog before any of it is counted, so that a bad one leaves no trace."""
    try:
        catalog = parse_mo(path.read_bytes())
    except OSError as error:
        raise CatalogError(f"cannot read it: {error.strerror}") from None
    header = dict(catalog.entries).get(b"", b"").decode("ascii", "replace")
    charset = catalog_charset(header)
    try:
        entries = [(key.decode(charset), value.decode(charset)) for key, value in catalog.entries]
    except UnicodeDecodeError as error:
        raise CatalogError(f"not valid {charset} ({error.reason})") from None
    return DecodedCatalog(entries, charset, plural_forms(header, path.name), catalog.system_dependent)


def entry_pairs(key: str, value: str, forms: tuple[int, int], removed: Counter) -> Iterator[tuple[str, str]]:
    """The (English, translation) pairs of one entry: without its context, a plural as two pairs."""
    _, _, message = key.rpartition("\x04")
    if "\x00" not in message:
        yield message, value
        return
    translations = value.split("\x00")
    for english, form in zip(message.split("\x00", 1), forms):
        if form < len(translations):
            yield english, translations[form]
        else:
            removed["plural_form_missing"] += 1


def line_pairs(english: str, translation: str, removed: Counter) -> Iterator[tuple[str, str]]:
    """A pair as line pairs: untranslated pairs, pairs whose sides differ in line count and blank lines are
    counted and dropped."""
    if not translation:
        removed["empty_translation"] += 1
        return
    if english == translation:
        removed["untranslated_copy"] += 1
        return
    english_lines, translated_lines = LINE_BREAK.split(english), LINE_BREAK.split(translation)
    if len(english_lines) != len(translated_lines):
        removed["multiline_mismatch"] += 1
        return
    blank = "blank" if len(english_lines) == 1 else "blank_line"
    for english_line, translated_line in zip(english_lines, translated_lines):
        if english_line.strip() and translated_line.strip():
            yield english_line, translated_line
        else:
            removed[blank] += 1


def add_catalog(corpus: Corpus, catalog: DecodedCatalog, seen: set[tuple[str, str]]) -> None:
    """Append the new pairs of one catalog to `corpus` (`seen`: the pairs kept so far)."""
    corpus.entries += len(catalog.entries) + catalog.system_dependent
    if catalog.system_dependent:
        corpus.removed["system_dependent"] += catalog.system_dependent
    for key, value in catalog.entries:
        if not key:
            corpus.removed["header"] += 1
            continue
        for pair in entry_pairs(key, value, catalog.plural_forms, corpus.removed):
            for line_pair in line_pairs(*pair, corpus.removed):
                if line_pair in seen:
                    corpus.removed["duplicate"] += 1
                    continue
                seen.add(line_pair)
                corpus.pairs.append(line_pair)


def extract(paths: list[Path]) -> Corpus:
    """The pairs of the catalogs at `paths`, in order, with exact duplicates removed."""
    corpus, seen = Corpus(), set()
    for path in paths:
        try:
            catalog = read_catalog(path)
        except CatalogError as error:
            log.warning("skipping %s: %s", path, error)
            corpus.catalogs_skipped[path.name] = str(error)
            continue
        corpus.catalogs_read[path.name] = catalog.charset
        add_catalog(corpus, catalog, seen)
    return corpus


def split_sizes(total: int, dev: int, test: int) -> tuple[int, int]:
    """(dev, test) sizes: as asked, or 10% each when the corpus is smaller than 5 x (dev + test)."""
    if total >= MIN_CORPUS_FACTOR * (dev + test):
        return dev, test
    log.warning("only %d pairs (< %d x %d): dev and test get 10%% each (%d pairs)",
                total, MIN_CORPUS_FACTOR, dev + test, total // 10)
    return total // 10, total // 10


def english_hash(english: str) -> bytes:
    return hashlib.blake2b(english.encode("utf-8"), digest_size=16).digest()


def assign_splits(pairs: list[tuple[str, str]], dev_size: int, test_size: int) -> dict[str, list[tuple[str, str]]]:
    """Train/dev/test by the hash of the English side: each English message with all its pairs in one split."""
    pair_counts = Counter(english for english, _ in pairs)
    room = {"test": test_size, "dev": dev_size}
    split_of = {}
    for english in sorted(pair_counts, key=english_hash):
        name = next((name for name in room if pair_counts[english] <= room[name]), "train")
        if name != "train":
            room[name] -= pair_counts[english]
        split_of[english] = name
    splits = {name: [] for name in SPLITS}
    for pair in pairs:
        splits[split_of[pair[0]]].append(pair)
    return splits


def write_corpus(out: Path, code: str, splits: dict[str, list[tuple[str, str]]], stats: dict) -> None:
    """`<split>.en` and `<split>.<code>` for each split, then stats.json, whose presence marks a finished corpus."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "stats.json").unlink(missing_ok=True)
    for name, pairs in splits.items():
        for side, lang in enumerate(("en", code)):
            text = "".join(pair[side] + "\n" for pair in pairs)
            (out / f"{name}.{lang}").write_text(text, encoding="utf-8", newline="\n")
    (out / "stats.json").write_text(json.dumps(stats, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def catalog_paths(locale_dir: Path, lang: str) -> list[Path]:
    if not locale_dir.is_dir():
        raise ExtractError(f"locale directory {locale_dir} does not exist")
    messages_dir = locale_dir / lang / "LC_MESSAGES"
    paths = sorted(messages_dir.glob("*.mo"))
    if not paths:
        raise ExtractError(f"no catalogs for {lang!r}: no *.mo files in {messages_dir}")
    return paths


def corpus_stats(args: argparse.Namespace, code: str, corpus: Corpus, splits: dict[str, list]) -> dict:
    return {"lang": args.lang, "code": code, "locale_dir": str(args.locale_dir),
            "catalogs": {"read": corpus.catalogs_read, "skipped": corpus.catalogs_skipped},
            "entries": corpus.entries, "pairs": {name: len(pairs) for name, pairs in splits.items()},
            "removed": dict(sorted(corpus.removed.items()))}


def summary(stats: dict) -> str:
    pairs = ", ".join(f"{name} {count}" for name, count in stats["pairs"].items())
    removed = ", ".join(f"{reason} {count}" for reason, count in stats["removed"].items())
    return (f"{stats['lang']}: {len(stats['catalogs']['read'])} catalogs read, {len(stats['catalogs']['skipped'])} "
            f"skipped; {stats['entries']} entries -> pairs: {pairs}; removed: {removed or 'none'}")


def run(args: argparse.Namespace) -> dict:
    """Extract, split and write the corpus that `args` describe; returns its stats."""
    code = args.code or re.split(r"[_@]", args.lang)[0]
    if code == "en" or not re.fullmatch(r"[\w-]+", code):
        raise ExtractError(f"--code {code!r} cannot name the target files (it must be a word other than 'en')")
    if args.dev < 0 or args.test < 0:
        raise ExtractError("--dev and --test must not be negative")
    paths = catalog_paths(args.locale_dir, args.lang)
    corpus = extract(paths)
    if not corpus.catalogs_read:
        raise ExtractError(f"none of the {len(paths)} catalogs in {paths[0].parent} could be read")
    if not corpus.pairs:
        raise ExtractError(f"the {len(corpus.catalogs_read)} catalogs of {args.lang!r} hold no translated pairs")
    splits = assign_splits(corpus.pairs, *split_sizes(len(corpus.pairs), args.dev, args.test))
    stats = corpus_stats(args, code, corpus, splits)
    write_corpus(args.out, code, splits, stats)
    return stats


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True, help="locale directory name, e.g. zh_CN, ja, ca@valencia")
    parser.add_argument("--out", type=Path, required=True, help="directory to write the corpus to")
    parser.add_argument("--code", help="language code of the target files (default: --lang before _ or @)")
    parser.add_argument("--locale-dir", type=Path, default=Path("/usr/share/locale"))
    parser.add_argument("--dev", type=int, default=1000, help="dev pairs")
    parser.add_argument("--test", type=int, default=1000, help="test pairs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s: %(message)s")
    try:
        stats = run(args)
    except ExtractError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: cannot write {error.filename}: {error.strerror or error}", file=sys.stderr)
        return 1
    log.info("%s", summary(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
