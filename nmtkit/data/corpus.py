"""Read and validate parallel text, and measure its lengths (cleaning it: `nmtkit.data.clean`).

Validation errors name the file and the line, so a user can fix the input without reading a traceback.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from nmtkit.config.sections import MAX_LINE_BYTES
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
