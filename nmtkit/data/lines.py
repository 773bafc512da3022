"""Reading lines with a cap on what is held (STYLE rule 17): a line longer than the limit is an error naming the file
and the line, found while at most the limit (and one buffer) of it is in memory, never a whole unbounded line or
file. A line of 200 MB, 900 KB of gzip, took prepare 11 GB of memory before it had one.

This module imports nothing heavy: `nmtkit.decoding.inputs` (translate's input) reads through it as the corpus readers
do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from nmtkit.errors import NmtkitError


def bounded_lines(file: BinaryIO, max_bytes: int | None, path: str | Path,
                  remedy: str = "raise data.max_line_bytes if such lines are meant to be there") -> Iterator[bytes]:
    """The lines of binary `file` with their newlines, as `for line in file` gives them, each read with at most
    `max_bytes` + 1 bytes held: a line of more than `max_bytes` bytes (its newline not counted) is an error naming
    `path`, the line and `remedy`, raised before the rest of it is read. None: no limit (files nmtkit wrote)."""
    if max_bytes is None:
        yield from file
        return
    number = 0
    while raw := file.readline(max_bytes + 1):
        number += 1
        if len(raw) > max_bytes and not raw.endswith(b"\n"):  # the newline may be byte max_bytes + 1
            raise NmtkitError(f"{path}:{number}: line longer than {max_bytes} bytes; split it, or {remedy}")
        yield raw


SMALL_FILE_BYTES = {"yaml": 1 << 24, "manifest": 1 << 24, "subword model": 1 << 28}  # far above any real one


def read_small(path: str | Path, what: str) -> bytes:
    """The bytes of a file that is small by nature (a YAML list, a manifest, a subword model; `what` it is, a key of
    SMALL_FILE_BYTES), read no further than its bound: a larger one is an error, a missing one `cannot read`."""
    limit = SMALL_FILE_BYTES[what]
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise NmtkitError(f"cannot read {path}: {error.strerror}") from error
    if len(data) > limit:
        raise NmtkitError(f"{path} is over {limit} bytes, too large for a {what}")
    return data
