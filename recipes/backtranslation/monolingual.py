"""Monolingual English for back-translation into X: the English lines of this machine's gettext catalogs that X's
catalogs do not hold, without X's dev and test lines or near copies of them.

Derivation
----------
Every ``*.mo`` under ``<locale-dir>/<other>/LC_MESSAGES/`` for every locale directory other than X's is read with
the messages recipe's reader (recipes/messages/extract.py), and each entry's English (msgid) becomes lines as that
recipe makes them: a message context dropped, a plural's singular and plural both taken, a multi-line message split
into its lines, blank lines left out, the rest kept byte for byte. A catalog that cannot be read is skipped with a
warning and named in the stats. Of the distinct lines, each is left out, counted by the first reason that holds:

- ``dev_test_copy``: it is an English line of the bilingual dev or test split (``dev.en``, ``test.en``);
- ``dev_test_near_copy``: its near-copy key equals one of theirs. The key (:func:`near_copy_key`) is the line's
  letters, case-folded, once nmtkit's placeholders (``%s``, ``{0}``, ``<b>``, ``&amp;``...) are removed: case,
  whitespace, punctuation (gettext's ``_`` and ``&`` accelerators too), digits and placeholders do not count, so
  ``_Open %d files...`` is a near copy of ``Open 3 Files``. A line with no letters outside its placeholders (an
  empty key: ``%s: %s``, ``----``) is a near copy of nothing, or every such line would be one of each other;
- ``in_x_catalogs``: X's own catalogs hold it as English (it is X's bilingual data, or X dropped it);
- ``over_max_lines``: past ``--max-lines`` once the kept lines are ordered by the blake2b hash of their UTF-8 bytes
  (a fixed pseudo-random order, so a cap takes a sample, not the first catalogs).

The kept lines are written in that hash order to ``mono.en``; ``mono.stats.json`` (written last: its presence marks
a finished extraction) holds the counts, which also go to stderr.

Usage::

    python recipes/backtranslation/monolingual.py --lang de --bilingual data/backtranslation/de/bilingual \
        --out data/backtranslation/de/mono [--locale-dir /usr/share/locale] [--max-lines 0]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from nmtkit.symbols.placeholders import Patterns, load_patterns

log = logging.getLogger("backtranslation.monolingual")
LETTER_CATEGORIES = ("L", "M")  # letters and the marks that belong to them (accents, Indic vowel signs)


def _messages_extract() -> ModuleType:
    """The messages recipe's catalog reader (a script, not a package module), loaded by its path under a name of its
    own: `import extract` would take whichever `extract` a process loaded first (the Bible recipe has one)."""
    path = Path(__file__).resolve().parents[1] / "messages" / "extract.py"
    spec = importlib.util.spec_from_file_location("nmtkit_messages_extract", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


extract = _messages_extract()


@dataclass
class CatalogLines:
    """The distinct English lines of a set of catalogs, and which catalogs were read or skipped."""

    lines: set[str] = field(default_factory=set)
    read: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why


def english_lines(keys: Iterable[str]) -> Iterator[str]:
    """The non-blank English lines of catalog keys: context dropped, singular and plural, one line at a time."""
    for key in keys:
        _, _, message = key.rpartition("\x04")
        for english in message.split("\x00"):
            yield from (line for line in extract.LINE_BREAK.split(english) if line.strip())


def read_lines(paths: Iterable[Path]) -> CatalogLines:
    """The English lines of the catalogs at `paths`; one that cannot be read is skipped with a warning."""
    found = CatalogLines()
    for path in paths:
        try:
            catalog = extract.read_catalog(path)
        except extract.CatalogError as error:
            log.warning("skipping %s: %s", path, error)
            found.skipped[str(path)] = str(error)
            continue
        found.read += 1
        found.lines.update(english_lines(key for key, _ in catalog.entries if key))
    return found


def other_catalogs(locale_dir: Path, lang: str) -> list[Path]:
    """Every catalog of every locale directory but `lang`'s, in name order."""
    return sorted(path for path in locale_dir.glob("*/LC_MESSAGES/*.mo") if path.parents[1].name != lang)


def near_copy_key(line: str, patterns: Patterns) -> str:
    """The line's letters, case-folded, without its placeholders: what two near copies have in common."""
    kept, position = [], 0
    for span in patterns.find(line):
        kept.append(line[position:span.start])
        position = span.end
    kept.append(line[position:])
    text = "".join(kept).casefold()
    return "".join(char for char in text if unicodedata.category(char)[0] in LETTER_CATEGORIES)


def select(candidates: set[str], x_lines: set[str], held_out: list[str], max_lines: int) -> tuple[list[str], Counter]:
    """The candidates to keep, in hash order, and the count of each reason the others were left out (module doc)."""
    patterns = load_patterns("auto")
    held_out_lines = set(held_out)
    held_out_keys = {near_copy_key(line, patterns) for line in held_out_lines} - {""}
    kept, removed = [], Counter()
    for line in sorted(candidates, key=extract.english_hash):
        if line in held_out_lines:
            removed["dev_test_copy"] += 1
        elif near_copy_key(line, patterns) in held_out_keys:
            removed["dev_test_near_copy"] += 1
        elif line in x_lines:
            removed["in_x_catalogs"] += 1
        elif max_lines and len(kept) >= max_lines:
            removed["over_max_lines"] += 1
        else:
            kept.append(line)
    return kept, removed


def read_held_out(bilingual: Path) -> list[str]:
    """The English lines of the bilingual dev and test splits."""
    lines = []
    for split in ("dev", "test"):
        path = bilingual / f"{split}.en"
        if not path.is_file():
            raise extract.ExtractError(f"{path} does not exist: extract the bilingual corpus first")
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def summary(stats: dict) -> str:
    removed = stats["removed"]
    return (f"{stats['lang']}: {stats['candidates']} distinct English lines in {stats['catalogs']['other']} other "
            f"catalogs ({len(stats['catalogs']['skipped'])} skipped); excluded {removed.get('dev_test_copy', 0)} "
            f"dev/test lines and {removed.get('dev_test_near_copy', 0)} near copies of them, "
            f"{removed.get('in_x_catalogs', 0)} lines of {stats['lang']}'s catalogs, "
            f"{removed.get('over_max_lines', 0)} over --max-lines; kept {stats['kept']}")


def run(args: argparse.Namespace) -> dict:
    """Extract, select and write the monolingual English that `args` describe; returns its stats."""
    if args.max_lines < 0:
        raise extract.ExtractError("--max-lines must not be negative")
    held_out = read_held_out(args.bilingual)
    x_catalogs = read_lines(extract.catalog_paths(args.locale_dir, args.lang))
    others = read_lines(other_catalogs(args.locale_dir, args.lang))
    kept, removed = select(others.lines, x_catalogs.lines, held_out, args.max_lines)
    if not kept:
        raise extract.ExtractError(f"no English line is left for {args.lang!r} ({len(others.lines)} candidates)")
    stats = {"lang": args.lang, "locale_dir": str(args.locale_dir),
             "catalogs": {"x": x_catalogs.read, "other": others.read, "skipped": {**x_catalogs.skipped,
                                                                                 **others.skipped}},
             "candidates": len(others.lines), "removed": dict(sorted(removed.items())), "kept": len(kept)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mono.stats.json").unlink(missing_ok=True)
    (args.out / "mono.en").write_text("".join(line + "\n" for line in kept), encoding="utf-8", newline="\n")
    (args.out / "mono.stats.json").write_text(json.dumps(stats, ensure_ascii=False, indent=2) + "\n",
                                              encoding="utf-8")
    return stats


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True, help="X's locale directory name, e.g. de, ru, ja")
    parser.add_argument("--bilingual", type=Path, required=True,
                        help="X's messages corpus (recipes/messages/extract.py --out): its dev.en and test.en")
    parser.add_argument("--out", type=Path, required=True, help="directory for mono.en and mono.stats.json")
    parser.add_argument("--locale-dir", type=Path, default=Path("/usr/share/locale"))
    parser.add_argument("--max-lines", type=int, default=0, help="keep at most N lines, a hash-ordered sample (0: all)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s: %(message)s")
    try:
        stats = run(args)
    except extract.ExtractError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: cannot write {error.filename}: {error.strerror or error}", file=sys.stderr)
        return 1
    log.info("%s", summary(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
