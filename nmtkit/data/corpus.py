"""Read, validate and clean parallel text.

Validation errors name the file and the line, so a user can fix the input without reading a traceback.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.config import DataConfig
from nmtkit.errors import NmtkitError


def decode_line(raw: bytes, path: str | Path, number: int) -> str:
    """Decode one line of UTF-8, dropping a CRLF line end; invalid bytes are an error naming the line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NmtkitError(
            f"{path}:{number}: invalid UTF-8 at byte {error.start}; convert the file to UTF-8 (e.g. iconv)"
        ) from error
    return text.rstrip("\r")


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file, without line ends."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise NmtkitError(f"cannot read {path}: {error.strerror}") from error
    if not data:
        return []
    if data.endswith(b"\n"):  # "\n" alone is one empty line, as for wc -l (an empty hypothesis is a line)
        data = data[:-1]
    return [decode_line(raw, path, number) for number, raw in enumerate(data.split(b"\n"), 1)]


def iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file without line ends, read one at a time (as `read_lines` splits them)."""
    try:
        with open(path, "rb") as file:
            for number, raw in enumerate(file, 1):
                yield decode_line(raw[:-1] if raw.endswith(b"\n") else raw, path, number)
    except OSError as error:
        raise NmtkitError(f"cannot read {path}: {error.strerror}") from error


def iter_parallel(src_path: str | Path, tgt_path: str | Path) -> Iterator[tuple[str, str]]:
    """The line pairs of two line-aligned files, read one at a time; once either file ends, different line counts
    or no lines at all are errors."""
    sources, targets = iter_lines(src_path), iter_lines(tgt_path)
    count = 0
    for src in sources:
        tgt = next(targets, None)
        if tgt is None:
            src_count = count + 1 + sum(1 for _ in sources)
            raise NmtkitError(f"{src_path} has {src_count} lines but {tgt_path} has {count}; parallel files must align")
        count += 1
        yield src, tgt
    tgt_count = count + sum(1 for _ in targets)
    if tgt_count != count:
        raise NmtkitError(f"{src_path} has {count} lines but {tgt_path} has {tgt_count}; parallel files must align")
    if not count:
        raise NmtkitError(f"{src_path} and {tgt_path} are empty")


def iter_tsv(path: str | Path) -> Iterator[tuple[str, str]]:
    """The `source<TAB>target` lines of a file, read one at a time; a file without lines is an error."""
    number = 0
    for number, line in enumerate(iter_lines(path), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise NmtkitError(f"{path}:{number}: expected 2 tab-separated fields, found {len(parts)}")
        yield parts[0], parts[1]
    if not number:
        raise NmtkitError(f"{path} is empty")


def normalize(line: str) -> str:
    """Collapse runs of whitespace (tabs included) into single spaces."""
    return " ".join(line.split())


@dataclass
class FilterStats:
    """How many training pairs each filter removed; written to manifest.json."""

    read: int = 0
    kept: int = 0
    removed: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {"read": self.read, "kept": self.kept, "removed": dict(self.removed)}


def _reject_reason(src: str, tgt: str, config: DataConfig) -> str | None:
    if not src or not tgt:
        return "empty"
    src_words, tgt_words = len(src.split()), len(tgt.split())
    if min(src_words, tgt_words) < config.min_words:
        return "too_short"
    if max(src_words, tgt_words) > config.max_words:
        return "too_long"
    if config.max_ratio > 0 and max(src_words, tgt_words) > config.max_ratio * min(src_words, tgt_words):
        return "length_ratio"
    return None


def filter_pairs(pairs: Iterable[tuple[str, str]], config: DataConfig, stats: FilterStats) -> Iterator[tuple[str, str]]:
    """Normalise whitespace and drop empty, too short/long, badly proportioned and duplicate pairs, one pair at a
    time; `stats` counts them. Duplicates are found by a 64-bit digest per pair, not by keeping the text."""
    seen: set[int] = set()
    for src_line, tgt_line in pairs:
        stats.read += 1
        pair = (normalize(src_line), normalize(tgt_line))
        reason = _reject_reason(*pair, config)
        if reason is None and config.dedup:
            digest = int.from_bytes(hashlib.blake2b(f"{pair[0]}\t{pair[1]}".encode(), digest_size=8).digest())
            reason = "duplicate" if digest in seen else None
            seen.add(digest)
        if reason:
            stats.removed[reason] += 1
            continue
        stats.kept += 1
        yield pair
