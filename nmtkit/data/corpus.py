"""Read, validate and clean parallel text.

Validation errors name the file and the line, so a user can fix the input without reading a traceback.
"""

from __future__ import annotations

from collections import Counter
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
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        return []
    return [decode_line(raw, path, number) for number, raw in enumerate(data.split(b"\n"), 1)]


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """Read two line-aligned files; different line counts or an empty corpus are errors."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise NmtkitError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; parallel files must align"
        )
    if not src:
        raise NmtkitError(f"{src_path} and {tgt_path} are empty")
    return src, tgt


def read_tsv(path: str | Path) -> tuple[list[str], list[str]]:
    """Read `source<TAB>target` lines."""
    src, tgt = [], []
    for number, line in enumerate(read_lines(path), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise NmtkitError(f"{path}:{number}: expected 2 tab-separated fields, found {len(parts)}")
        src.append(parts[0])
        tgt.append(parts[1])
    if not src:
        raise NmtkitError(f"{path} is empty")
    return src, tgt


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


def filter_pairs(
    src: list[str], tgt: list[str], config: DataConfig
) -> tuple[list[str], list[str], FilterStats]:
    """Normalise whitespace and drop empty, too short/long, badly proportioned and duplicate pairs."""
    stats = FilterStats(read=len(src))
    seen: set[tuple[str, str]] = set()
    kept_src, kept_tgt = [], []
    for src_line, tgt_line in zip(src, tgt):
        pair = (normalize(src_line), normalize(tgt_line))
        reason = _reject_reason(*pair, config)
        if reason is None and config.dedup:
            reason = "duplicate" if pair in seen else None
            seen.add(pair)
        if reason:
            stats.removed[reason] += 1
            continue
        kept_src.append(pair[0])
        kept_tgt.append(pair[1])
    stats.kept = len(kept_src)
    if not kept_src:
        raise NmtkitError("no training pairs are left after filtering; check the input and the filter settings")
    return kept_src, kept_tgt, stats
