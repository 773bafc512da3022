"""How many placeholders real software messages hold, and how faithfully human translations keep them.

For each language, the (English, translation) line pairs of this machine's gettext catalogs, read as the messages
recipe reads them (recipes/messages/extract.py: every *.mo of <locale-dir>/<lang>/LC_MESSAGES, plurals as two pairs,
multi-line messages split, exact duplicates removed), and nmtkit's placeholder families (`--placeholders`, default
auto; what `mask` masks: a usage mark such as `<file>` is text). Prints a Markdown table: the pairs, the share whose
English holds a placeholder, and of those the share whose translation holds exactly the same multiset of
placeholders (the same texts, each as often, in any order): what a translation that keeps the source's marks
achieves. A translation that reorders `%s %d` into `%2$d %1$s` counts as not keeping them there; the last column
counts it as keeping them (printf conversions compared by the argument they print, `placeholder_keys`), as
nmtkit's restoring writes a reordered translation's conversions.

Usage: python benchmarks/experiments/placeholder_stats.py [--langs de zh_CN ja ar ru] [--locale-dir /usr/share/locale]
       [--placeholders auto]
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

from nmtkit.errors import NmtkitError
from nmtkit.symbols.placeholders import Patterns, load_patterns, placeholder_keys, placeholder_spans


def _messages_extract() -> ModuleType:
    """The messages recipe's catalog reader (a script, not a module of the package), loaded by its path under a name
    of its own: `import extract` would take whichever `extract` a process loaded first (the Bible recipe has one)."""
    path = Path(__file__).resolve().parents[2] / "recipes" / "messages" / "extract.py"
    spec = importlib.util.spec_from_file_location("nmtkit_messages_extract", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


extract = _messages_extract()

def placeholder_texts(text: str, patterns: Patterns) -> Counter:
    return Counter(text[span.start:span.end] for span in placeholder_spans(text, patterns))


def language_row(lang: str, locale_dir: Path, patterns: Patterns) -> dict:
    """The counts of one language's catalogs."""
    pairs = extract.extract(extract.catalog_paths(locale_dir, lang)).pairs
    with_placeholders = kept = reordered = 0
    for english, translation in pairs:
        source = placeholder_texts(english, patterns)
        if source:
            target = placeholder_texts(translation, patterns)
            with_placeholders += 1
            kept += source == target
            reordered += source != target and placeholder_keys(english, patterns) == placeholder_keys(translation,
                                                                                                  patterns)
    return {"lang": lang, "pairs": len(pairs), "with": with_placeholders, "kept": kept, "reordered": reordered}


def table(rows: list[dict]) -> str:
    lines = ["| language | line pairs | English lines with placeholders | references keeping them exactly | "
             "... or printf conversions by argument |", "|---|---:|---:|---:|---:|"]
    for row in rows:
        share = 100 * row["with"] / max(row["pairs"], 1)
        kept, also = (100 * count / max(row["with"], 1) for count in (row["kept"], row["kept"] + row["reordered"]))
        lines.append(f"| {row['lang']} | {row['pairs']} | {row['with']} ({share:.1f}%) | {row['kept']} ({kept:.1f}%) "
                     f"| {row['kept'] + row['reordered']} ({also:.1f}%) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--langs", nargs="+", default=["de", "zh_CN", "ja", "ar", "ru"])
    parser.add_argument("--locale-dir", type=Path, default=Path("/usr/share/locale"))
    parser.add_argument("--placeholders", default="auto", help="auto or a pattern file (see docs/translate.md)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.ERROR, format="%(levelname)s: %(message)s")
    try:
        patterns = load_patterns(args.placeholders)
        if patterns is None:
            raise NmtkitError("--placeholders none finds nothing to count; give auto or a pattern file")
        rows = [language_row(lang, args.locale_dir, patterns) for lang in args.langs]
    except (NmtkitError, extract.ExtractError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
