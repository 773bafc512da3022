"""Encode and decode reference lines with a prepared data directory's subword model: which come back changed?

A measurement, not a test: it prints one JSON object and exits 0 whatever it finds. `changed` counts the lines
whose decoded text differs from the original in any byte; `changed_beyond_whitespace` those that differ in more
than runs of whitespace (which `nmtkit prepare` collapses in the training text anyway). Up to five changed lines
are shown as Python reprs, so that invisible characters (NFKC-folded full-width punctuation, combining accents,
bidi marks) can be seen.

Usage::

    python recipes/messages/roundtrip.py --data data/messages/en-zh/prepared --ref data/messages/en-zh/test.zh \
        [--ref FILE ...] [--side tgt] [--output decoded.txt]

`--output` writes the decoded lines, to be scored against the references as if they were a translation
(`nmtkit evaluate`: 100 when nothing changed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from nmtkit.data.corpus import read_lines
from nmtkit.data.prepare import load_subwords, read_manifest
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError

CHUNK = 10_000  # lines encoded at once
MAX_EXAMPLES = 5


def roundtrip(model: Subword, lines: list[str]) -> list[str]:
    """`lines` encoded to subword ids and decoded back, `CHUNK` lines at a time."""
    decoded = []
    for start in range(0, len(lines), CHUNK):
        decoded.extend(model.decode(model.encode(lines[start:start + CHUNK])))
    return decoded


def measure(data_dir: Path, refs: list[Path], side: str, output: Path | None = None) -> dict:
    """How many lines of `refs` the data directory's `side` subword model does not give back unchanged; the decoded
    lines go to `output` when given."""
    read_manifest(data_dir)  # a clear error for a directory that is not prepared data
    model = dict(zip(("src", "tgt"), load_subwords(data_dir)))[side]
    report = {"data": str(data_dir), "side": side, "lines": 0, "changed": 0, "changed_beyond_whitespace": 0,
              "examples": []}
    decoded_lines = []
    for ref in refs:
        lines = read_lines(ref)
        decoded = roundtrip(model, lines)
        decoded_lines += decoded
        changed = [(number, before, after) for number, before, after in
                   zip(itertools.count(1), lines, decoded) if before != after]
        report["lines"] += len(lines)
        report["changed"] += len(changed)
        report["changed_beyond_whitespace"] += sum(before.split() != after.split() for _, before, after in changed)
        room = MAX_EXAMPLES - len(report["examples"])
        report["examples"] += [{"file": str(ref), "line": number, "before": repr(before), "after": repr(after)}
                               for number, before, after in changed[:room]]
    if output is not None:
        output.write_text("".join(line + "\n" for line in decoded_lines), encoding="utf-8")
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="data directory written by nmtkit prepare")
    parser.add_argument("--ref", type=Path, action="append", required=True, help="reference file (repeatable)")
    parser.add_argument("--side", choices=("src", "tgt"), default="tgt", help="whose subword model encodes")
    parser.add_argument("--output", type=Path, help="write the decoded lines here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = measure(args.data, args.ref, args.side, args.output)
    except NmtkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a data directory with a manifest but without its subword model
        print(f"error: cannot read {error.filename}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(json.dumps(report, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
