"""The files `nmtkit score-pairs` writes and its second reading of the corpus: every output is written whole or not at
all (temporary files beside the outputs, renamed over them once every one is complete and synced), gzip for a name
ending in `.gz`; a kept line is copied byte for byte as it was read."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import os
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from nmtkit.data.lines import bounded_lines
from nmtkit.errors import NmtkitError

RAISE_LIMIT = "raise --max-line-bytes if such lines are meant to be there"


@contextlib.contextmanager
def replacing(paths: list[Path]) -> Iterator[list[BinaryIO]]:
    """Binary files to write in place of `paths` (gzip-compressed for a name ending in `.gz`); once the block
    succeeds they replace `paths`, and when anything fails (a full disk, a bad line found late, an interrupt) they
    are deleted and the files there are kept as they were."""
    made: list[tuple[str, BinaryIO, BinaryIO]] = []  # (temporary name, its file, what the block writes to)
    try:
        for path in paths:
            handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            file = os.fdopen(handle, "wb")
            made.append((tmp_name, file, gzip.GzipFile(fileobj=file, mode="wb", mtime=0)
                         if path.name.endswith(".gz") else file))
        yield [writer for _, _, writer in made]
        for _, file, writer in made:
            if writer is not file:
                writer.close()  # the gzip trailer; the file stays open
            file.flush()
            os.fsync(file.fileno())
            file.close()
        for (tmp_name, _, _), path in zip(made, paths):
            os.replace(tmp_name, path)
    except BaseException as error:
        _discard(made)
        if isinstance(error, OSError) and paths and not isinstance(error, BrokenPipeError):
            raise NmtkitError(f"cannot write {error.filename or ' and '.join(map(str, paths))}: "
                              f"{error.strerror or error}; the files there are kept as they were") from error
        raise  # without files of its own, an OSError is standard output's (a closed pipe: the command line's)


def _discard(made: list[tuple[str, BinaryIO, BinaryIO]]) -> None:
    for tmp_name, file, _ in made:
        with contextlib.suppress(OSError):
            file.close()
        Path(tmp_name).unlink(missing_ok=True)


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
