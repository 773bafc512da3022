"""Read, validate and clean parallel text.

Validation errors name the file and the line, so a user can fix the input without reading a traceback.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmtkit.config import MAX_LINE_BYTES, DataConfig
from nmtkit.data.lines import bounded_lines
from nmtkit.errors import NmtkitError

RAISE_LIMIT = "raise data.max_line_bytes if such lines are meant to be there"  # prepare's line limit


def decode_line(raw: bytes, path: str | Path, number: int) -> str:
    """Decode one line of UTF-8, dropping a CRLF line end; invalid bytes are an error naming the line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NmtkitError(
            f"{path}:{number}: invalid UTF-8 at byte {error.start}; convert the file to UTF-8 (e.g. iconv)"
        ) from error
    return text.rstrip("\r")


def read_lines(path: str | Path, max_bytes: int | None = MAX_LINE_BYTES) -> list[str]:
    """All lines of a UTF-8 text file, without line ends (`iter_lines`: each at most `max_bytes` bytes)."""
    return list(iter_lines(path, max_bytes, f"leave it out (nmtkit reads lines of at most {max_bytes} bytes)"))


def iter_lines(path: str | Path, max_bytes: int | None = MAX_LINE_BYTES,
               remedy: str = RAISE_LIMIT) -> Iterator[str]:
    """The lines of a UTF-8 text file without line ends, read one at a time (a file's last line need not end in a
    newline; "\\n" alone is one empty line, as for wc -l); a file whose name ends in `.gz` is decompressed as it is
    read. A line of more than `max_bytes` bytes (None: no limit) is an error ending in `remedy`
    (`nmtkit.data.lines`)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as file:
            for number, raw in enumerate(bounded_lines(file, max_bytes, path, remedy), 1):
                yield decode_line(raw[:-1] if raw.endswith(b"\n") else raw, path, number)
    except (OSError, EOFError, zlib.error) as error:  # gzip: not gzip data, cut short, or damaged
        raise NmtkitError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from error


def iter_parallel(src_path: str | Path, tgt_path: str | Path, max_bytes: int | None = MAX_LINE_BYTES,
                  remedy: str = RAISE_LIMIT) -> Iterator[tuple[str, str]]:
    """The line pairs of two line-aligned files, read one at a time (`iter_lines`, lines of at most `max_bytes`);
    once either file ends, different line counts or no lines at all are errors."""
    sources, targets = iter_lines(src_path, max_bytes, remedy), iter_lines(tgt_path, max_bytes, remedy)
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


def iter_tsv(path: str | Path, max_bytes: int | None = MAX_LINE_BYTES) -> Iterator[tuple[str, str]]:
    """The `source<TAB>target` lines of a file, read one at a time (lines of at most `max_bytes`); a file without
    lines is an error."""
    number = 0
    for number, line in enumerate(iter_lines(path, max_bytes), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise NmtkitError(f"{path}:{number}: expected 2 tab-separated fields, found {len(parts)}")
        yield parts[0], parts[1]
    if not number:
        raise NmtkitError(f"{path} is empty")


# Scripts written without spaces between words: each character counts as a word in the length filters. Thai, Lao,
# Tibetan, Myanmar, Khmer, kana, CJK ideographs (unified, extension A, compatibility, and the supplementary planes).
UNSPACED = "\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf" \
           "\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
LENGTH_UNITS = re.compile(f"[{UNSPACED}]|[^\\s{UNSPACED}]+")
RATIO_BINS = 0.01  # width of the histogram bins of log length ratios: the median is known to 1%
WARN_SHARE = 0.03  # a filter that removes more than this share of the pairs read is reported as a warning


def length_units(line: str) -> int:
    """The length of a line in words, where every character of a script written without spaces (Chinese,
    Japanese, Thai...) counts as one word, so that length filters mean the same thing in every script."""
    return len(LENGTH_UNITS.findall(line))


def median_length_ratio(pairs: Iterable[tuple[str, str]]) -> float:
    """The median of source length / target length (in `length_units`) over the pairs with both sides non-empty,
    from a histogram of log ratios (constant memory; 1 if no pair has two non-empty sides).

    The ratio filter compares each pair with this corpus median rather than with 1: English has about 0.7 words per
    Chinese character and 0.25 per Thai character, so a fixed ratio would remove a third of such corpora."""
    counts: Counter = Counter()
    for src, tgt in pairs:
        src_units, tgt_units = length_units(src), length_units(tgt)
        if src_units and tgt_units:
            counts[round(math.log(src_units / tgt_units) / RATIO_BINS)] += 1
    seen, half = 0, sum(counts.values()) / 2
    for bin_index in sorted(counts):
        seen += counts[bin_index]
        if seen >= half:
            return math.exp(bin_index * RATIO_BINS)
    return 1.0


@dataclass
class FilterStats:
    """How many training pairs each filter removed; written to manifest.json."""

    read: int = 0
    kept: int = 0
    removed: Counter = field(default_factory=Counter)
    median_ratio: float = 1.0

    def warnings(self) -> list[str]:
        """One line for each filter that removed more than a few percent of the pairs read."""
        return [f"{reason} removed {count} of {self.read} training pairs ({100 * count / self.read:.1f}%)"
                for reason, count in sorted(self.removed.items()) if self.read and count > WARN_SHARE * self.read]

    def as_dict(self) -> dict:
        return {"read": self.read, "kept": self.kept, "removed": dict(self.removed),
                "median_length_ratio": round(self.median_ratio, 4), "warnings": self.warnings()}


def _reject_reason(src: str, tgt: str, config: DataConfig, median_ratio: float) -> str | None:
    if not src.strip() or not tgt.strip():
        return "empty"
    src_units, tgt_units = length_units(src), length_units(tgt)
    if min(src_units, tgt_units) < config.min_words:
        return "too_short"
    if max(src_units, tgt_units) > config.max_words:
        return "too_long"
    ratio = src_units / max(tgt_units, 1) / median_ratio
    if config.max_ratio > 0 and max(ratio, 1 / max(ratio, 1e-9)) > config.max_ratio:
        return "length_ratio"
    return None


DEDUP_BLOCK = 4096  # pairs looked up in the duplicate set at once: numpy's per-call cost spreads over the block


def pair_digest(src: str, tgt: str) -> bytes:
    """64 bits of BLAKE2b over the pair; the source's length in bytes comes first, so no two pairs give the same
    text to hash (a separator such as a tab could itself be in a line)."""
    src_bytes = src.encode()
    return hashlib.blake2b(len(src_bytes).to_bytes(8, "little") + src_bytes + tgt.encode(), digest_size=8).digest()


class DigestSet:
    """64-bit digests in sorted numpy runs, 8 bytes each (a Python set of ints takes ~75 bytes an entry: 5M pairs
    were 383 MB). Runs merge as in a log-structured merge tree, where a run is merged with the one before it while
    that one is no larger, so the runs number O(log n) and each lookup is a binary search in each run."""

    def __init__(self):
        self.runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def add(self, digests: list[bytes]) -> np.ndarray:
        """Add a block of 8-byte digests; True for each one seen before, earlier in the block included."""
        block = np.frombuffer(b"".join(digests), dtype=np.uint64)
        unique, first, inverse = np.unique(block, return_index=True, return_inverse=True)
        known = self._contains(unique)
        later = np.ones(len(block), dtype=bool)  # not the first occurrence within the block
        later[first] = False
        self._insert(unique[~known])
        return known[inverse] | later

    def _contains(self, values: np.ndarray) -> np.ndarray:
        found = np.zeros(len(values), dtype=bool)
        for run in self.runs:
            found |= run[np.minimum(np.searchsorted(run, values), len(run) - 1)] == values
        return found

    def _insert(self, values: np.ndarray) -> None:
        if len(values):
            self.runs.append(values)
        while len(self.runs) > 1 and len(self.runs[-2]) <= len(self.runs[-1]):
            merged = np.concatenate(self.runs[-2:])
            merged.sort()  # in place (timsort would merge in linear time but with a buffer of half the array)
            self.runs[-2:] = [merged]


def filter_pairs(pairs: Iterable[tuple[str, str]], config: DataConfig, stats: FilterStats) -> Iterator[tuple[str, str]]:
    """Drop empty, too short/long, badly proportioned (against `stats.median_ratio`) and duplicate pairs, reading
    `DEDUP_BLOCK` pairs at a time; `stats` counts them. The text of a kept pair is not changed. Duplicates are found
    by a 64-bit digest per pair (`pair_digest`, 8 bytes of memory a pair), not by keeping the text."""
    seen, pairs = DigestSet(), iter(pairs)
    while block := list(itertools.islice(pairs, DEDUP_BLOCK)):
        reasons = [_reject_reason(src, tgt, config, stats.median_ratio) for src, tgt in block]
        if config.dedup:
            candidates = [index for index, reason in enumerate(reasons) if reason is None]
            repeated = seen.add([pair_digest(*block[index]) for index in candidates])
            for index in itertools.compress(candidates, repeated):
                reasons[index] = "duplicate"
        for pair, reason in zip(block, reasons):
            stats.read += 1
            if reason:
                stats.removed[reason] += 1
                continue
            stats.kept += 1
            yield pair
