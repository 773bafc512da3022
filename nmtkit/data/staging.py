"""Write a data directory so that no prepare, failed, interrupted or killed, loses what was there (issue 47).

Everything is written into a staging directory inside `--out` (`.prepare-new-<pid>`) while the inputs, wherever
they are (in `--out` itself, or linked to its files), are only read. Only a complete staging directory is committed:
the prepared files of `--out` move aside into `.prepare-old-<pid>` (manifest.json first), the new ones move in
(manifest.json last), and the old ones are deleted; every step is a rename. The staging directory is inside `--out`
rather than beside it because `--out` may hold the user's own files (raw text, configs, runs) and may be a shell's
working directory: those stay where they are, and `--out` stays the same directory.

A killed prepare leaves its staging directory behind, or, if killed during the commit (milliseconds), both. The
next prepare into the same directory clears them first: an incomplete staging directory is deleted, an interrupted
commit is completed; while the process that left them is still running, that is an error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)

# Every name prepare writes (`.part<n>`, `.tok.raw` and `.off.raw`: what earlier versions left when they failed);
# nothing else in --out is ever moved or deleted.
PREPARED = re.compile(r"manifest\.json|spm(\.src|\.tgt)?\.model|(train|dev|test)\.corpus\.npy"
                      r"|(train|dev|test)(\.part\d+)?\.(src|tgt)\.(txt|tok\.npy|off\.npy|tok\.raw|off\.raw)")
STAGING, OLD = ".prepare-new-", ".prepare-old-"
LEFT_BY = re.compile(r"\.prepare-(new|old)-(\d+)")
MOVED = "moved"  # in the old directory: every old file is in it, the new files may now move in


@contextlib.contextmanager
def staged_output(out: Path, overwrite: bool) -> Iterator[Path]:
    """A fresh directory to write the data directory `out` into; when the block succeeds its files replace the
    prepared files of `out`, and when it fails it is deleted and `out` is as it was (or gone, if made for it)."""
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise NmtkitError(f"cannot create output directory {out}: {error.strerror}") from error
    finish_interrupted(out)
    check_destination(out, overwrite)
    staging = out / f"{STAGING}{os.getpid()}"
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    commit(staging, out / f"{OLD}{os.getpid()}")


def check_destination(out: Path, overwrite: bool) -> None:
    """Prepared data (manifest.json) is replaced only with `overwrite`; files named as prepare's output in a
    directory without a manifest may be the user's own (raw text called train.src.txt), so they are never."""
    if (out / "manifest.json").exists():
        if not overwrite:
            raise NmtkitError(f"{out} already holds prepared data (manifest.json); pass --overwrite to replace it "
                              "(runs trained on it will no longer resume), or choose another --out")
        return
    in_the_way = sorted(path.name for path in out.iterdir() if PREPARED.fullmatch(path.name))
    if in_the_way:
        more = f" (and {len(in_the_way) - 1} more)" if len(in_the_way) > 1 else ""
        raise NmtkitError(f"{out / in_the_way[0]}{more} would be overwritten: {out} has no manifest.json, so this is "
                          "not prepared data that --overwrite replaces; move the file(s) away or choose another --out")


def commit(staging: Path, old: Path) -> None:
    """Move the prepared files of `staging`'s parent into `old` (manifest.json first: from then on the directory is
    not prepared data), the files of `staging` in (manifest.json last), then delete both. Run again on what an
    interrupted commit left, it carries on where that one stopped."""
    out = staging.parent
    old.mkdir(exist_ok=True)
    if not (old / MOVED).exists():
        for path in sorted(out.iterdir(), key=lambda path: path.name != "manifest.json"):
            if PREPARED.fullmatch(path.name):
                path.rename(old / path.name)
        (old / MOVED).touch()
    for path in sorted(staging.iterdir(), key=lambda path: path.name == "manifest.json"):
        path.rename(out / path.name)
    staging.rmdir()
    shutil.rmtree(old)


def finish_interrupted(out: Path) -> None:
    """Clear what killed prepares left in `out`: delete incomplete staging directories and complete interrupted
    commits (a commit begins by making the old directory). A process that is still running is an error."""
    left = {path: int(match.group(2)) for path in out.iterdir() if (match := LEFT_BY.fullmatch(path.name))}
    for path, pid in sorted(left.items()):
        if _running(pid):
            raise NmtkitError(f"another nmtkit prepare (process {pid}) is writing {out} (in {path.name}); wait for "
                              f"it, or choose another --out (if process {pid} is not a prepare, delete {path})")
    for path, pid in sorted(left.items()):
        old = out / f"{OLD}{pid}"
        if path.name.startswith(STAGING) and old.exists():
            log.warning("%s: completing the replacement of the prepared data that process %d began", out, pid)
            commit(path, old)
        elif path.exists():
            log.info("%s: removing %s, left by a prepare that did not finish", out, path.name)
            shutil.rmtree(path)


def _running(pid: int) -> bool:
    """Whether process `pid` (not this one: a process prepares one directory at a time) is alive."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
