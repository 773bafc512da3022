"""Files a user names, the rules every command that writes one follows (STYLE rule 17): an output never resolves to
one of the command's inputs (the same path, a symbolic link to it, a hard link of it); a file is written whole or
not at all (a temporary file beside it, synced, then renamed over it); and a file a command appends to over several
runs carries a record that proves it is the command's own before anything in it is cut (`translate --resume`)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

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


def new_file_mode() -> int:
    """The permissions a file created now gets (0o666 less the umask): a temporary file is made 0o600."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def replacing(paths: list[Path], gzip_by_name: bool = False) -> Iterator[list[BinaryIO]]:
    """Binary files to write in place of `paths` (gzip-compressed for a name ending in `.gz` with `gzip_by_name`):
    temporary files beside them, which, once the block succeeds and every one is synced, replace `paths` together,
    with a new file's permissions; when anything fails (a full disk, a bad line found late, an interrupt) they are
    deleted and the files there are kept as they were. A write error is a one-line error naming the file."""
    made: list[tuple[str, BinaryIO, BinaryIO]] = []  # (temporary name, its file, what the block writes to)
    try:
        for path in paths:
            if path.is_dir():
                raise NmtkitError(f"cannot write {path}: it is a directory")
            handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            file = os.fdopen(handle, "wb")
            made.append((tmp_name, file, gzip.GzipFile(fileobj=file, mode="wb", mtime=0)
                         if gzip_by_name and path.name.endswith(".gz") else file))
        yield [writer for _, _, writer in made]
        mode = new_file_mode()
        for _, file, writer in made:
            if writer is not file:
                writer.close()  # the gzip trailer; the file stays open
            file.flush()
            os.fchmod(file.fileno(), mode)
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


@contextlib.contextmanager
def replacing_text(paths: list[Path]) -> Iterator[list[TextIO]]:
    """`replacing` for UTF-8 text, lines ending in `\n` as written."""
    with replacing(paths) as files:
        texts = [io.TextIOWrapper(file, encoding="utf-8", newline="\n") for file in files]
        yield texts
        for text in texts:
            text.flush()
            text.detach()  # the binary file stays open for `replacing` to sync and rename


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (`replacing`)."""
    with replacing([path]) as (file,):
        file.write(data)


def write_json_atomic(path: Path, record: dict) -> None:
    write_atomic(path, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))


@contextlib.contextmanager
def open_atomic(path: Path) -> Iterator[TextIO]:
    """One UTF-8 text file written whole or not at all (`replacing_text`), for output too large to hold."""
    with replacing_text([path]) as (file,):
        yield file
