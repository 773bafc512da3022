"""The second reading of the corpus `nmtkit score-pairs` filters: a kept line is copied byte for byte as it was read
(its outputs are written whole or not at all by `nmtkit.data.files.replacing`, gzip for a name ending in `.gz`)."""

from __future__ import annotations

import gzip
import itertools
import zlib
from collections.abc import Iterator
from pathlib import Path

from nmtkit.data.lines import bounded_lines
from nmtkit.errors import NmtkitError

RAISE_LIMIT = "raise --max-line-bytes if such lines are meant to be there"


def raw_lines(path: Path, max_bytes: int) -> Iterator[bytes]:
    """The lines of `path` (plain, or gzip for a name ending in `.gz`) as bytes, without their newline (a CR before
    it kept), each at most `max_bytes` bytes (`bounded_lines`)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as file:
            for raw in bounded_lines(file, max_bytes, path, RAISE_LIMIT):
                yield raw[:-1] if raw.endswith(b"\n") else raw
    except (OSError, EOFError, zlib.error) as error:
        raise NmtkitError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from error


def raw_pairs(src: Path, tgt: Path, max_bytes: int, count: int) -> Iterator[tuple[bytes, bytes]]:
    """The `count` line pairs of two files read once before; a file that no longer has `count` lines (changed
    since) is an error."""
    read = 0
    for source, target in itertools.zip_longest(raw_lines(src, max_bytes), raw_lines(tgt, max_bytes)):
        if source is None or target is None or read == count:
            read = -1
            break
        read += 1
        yield source, target
    if read != count:
        raise NmtkitError(f"{src} or {tgt} changed while it was read: it no longer has {count} lines")
