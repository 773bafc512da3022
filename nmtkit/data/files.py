"""Files a user names, the rules every command that writes one follows (STYLE rule 17): an output never resolves to
one of the command's inputs (the same path, a symbolic link to it, a hard link of it); a file is written whole or
not at all (a temporary file beside it, synced, then renamed over it); and a file a command appends to over several
runs carries a record that proves it is the command's own before anything in it is cut (`translate --resume`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from nmtkit.errors import NmtkitError

BLOCK = 1 << 20


def overlaps(output: Path, source: Path) -> bool:
    """Whether writing `output` would write onto `source`: the same file once links are followed (symbolic links
    resolved, hard links by inode), or a path inside directory `source`."""
    resolved, source_resolved = output.resolve(), source.resolve()
    if resolved == source_resolved or source_resolved in resolved.parents:
        return True
    try:
        return os.path.samefile(output, source)
    except OSError:  # a path that does not exist (yet) is no other file
        return False


def refuse_onto_inputs(outputs: Iterable[tuple[str, Path | None]], inputs: Iterable[tuple[str, Path | None]]) -> None:
    """A one-line error when an output (flag, path) is one of the inputs (flag, path), or inside an input
    directory: the command would destroy or change what it reads. Paths None (stdin, stdout, an option not given)
    are skipped."""
    inputs = [(flag, path) for flag, path in inputs if path is not None]
    for out_flag, output in outputs:
        for in_flag, source in inputs if output is not None else ():
            if overlaps(output, source):
                raise NmtkitError(f"{out_flag} {output} is {in_flag} {source} or inside it: refusing to write onto "
                                  "an input (give another output path)")


def refuse_stdout_onto(inputs: Iterable[tuple[str, Path | None]]) -> None:
    """A one-line error when standard output is a regular file that is one of the inputs (`translate -i in.txt
    >> in.txt` would read its own output forever)."""
    try:
        stat = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's captured stdout)
        return
    for flag, source in inputs:
        try:
            if source is not None and os.path.samestat(stat, os.stat(source)):
                raise NmtkitError(f"standard output is the file {flag} {source} names: refusing to write onto an "
                                  "input (redirect to another file)")
        except OSError:
            continue


def sha256_of(paths: Iterable[Path]) -> str:
    """The SHA-256 of the files `paths` (a directory: every file under it, by relative name), in order."""
    digest = hashlib.sha256()
    for path in paths:
        files = sorted(item for item in path.rglob("*") if item.is_file()) if path.is_dir() else [path]
        for item in files:
            digest.update(str(item.relative_to(path) if path.is_dir() else item.name).encode() + b"\0")
            with open(item, "rb") as handle:
                while block := handle.read(BLOCK):
                    digest.update(block)
    return digest.hexdigest()


def digest_prefix(digest, path: Path, size: int) -> bool:
    """Feed the first `size` bytes of `path` to `digest` (a hashlib object), a block at a time; False if the file is
    shorter."""
    left = size
    with open(path, "rb") as handle:
        while left and (block := handle.read(min(left, BLOCK))):
            digest.update(block)
            left -= len(block)
    return not left


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all: a temporary file beside it, synced, renamed over it."""
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, record: dict) -> None:
    write_atomic(path, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))


@contextlib.contextmanager
def open_atomic(path: Path) -> Iterator[TextIO]:
    """A text file (UTF-8) written as `write_atomic` writes bytes, for output too large to hold: a temporary file
    beside `path`, synced and renamed over it when the block exits without an error, removed when it raises. A path
    that cannot be written (no such directory, a directory itself) is a one-line error before the block runs."""
    if path.is_dir():
        raise NmtkitError(f"cannot write {path}: it is a directory")
    try:
        handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise NmtkitError(f"cannot write {path}: {error.strerror}") from error
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            yield tmp
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
