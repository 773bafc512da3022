"""Resumable downloads checked against known sizes and checksums, from the official hosts or a mirror; .tgz extraction.

A `RemoteFile` is an official URL with its size and checksum where known. Each file is fetched into
`<dest>/<URL path>.part`, continued where it stopped on the next run (an HTTP Range request, or a seek for a local
mirror), checked, then renamed to `<dest>/<URL path>`; a file under its final name has passed its checks.

A mirror (`NMTKIT_MIRROR`: a local directory, a file:// URL or an http(s):// base URL) replaces the official hosts
and holds each file under its official URL's path: http://statmt.org/wmt13/x.tgz is `$NMTKIT_MIRROR/wmt13/x.tgz`
(so a download directory is itself a mirror). Files from a mirror are checked against the same official sizes and
checksums, except those listed in a `SHA256SUMS` file at the mirror's root (`sha256sum` output, paths relative to
the root): a mirror that serves other bytes (a test mirror, a re-compressed archive) must say so there, and its
files are then checked against its own SHA-256 sums.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import logging
import os
import sys
import tarfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import urlsplit

from tqdm import tqdm

from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)

MIRROR_ENV = "NMTKIT_MIRROR"
MIRROR_CHECKSUMS = "SHA256SUMS"
TIMEOUT = 15.0  # seconds to connect or to wait for the next bytes: an offline machine fails at once, not after minutes
CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """An official URL with what its bytes must match: size in bytes and checksum `sha256:<hex>` or `md5:<hex>`."""

    url: str
    size: int | None = None
    checksum: str | None = None

    @property
    def path(self) -> str:
        """The URL's path without the host: where a mirror and a download directory keep the file."""
        return urlsplit(self.url).path.lstrip("/")


class Unreachable(NmtkitError):
    """The source could not be connected to at all (as opposed to an HTTP error or a transfer cut short)."""


def human_size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size} bytes"


def _local_mirror(mirror: str) -> Path | None:
    """The directory of a local mirror (a path or a file:// URL); None for an http(s) mirror."""
    scheme = urlsplit(mirror).scheme
    if scheme in ("http", "https"):
        return None
    if scheme == "file":
        return Path(urllib.request.url2pathname(urlsplit(mirror).path))
    return Path(mirror)


def source_of(file: RemoteFile, mirror: str | None) -> str | Path:
    """Where to fetch `file` from: its official URL, a mirror URL, or a path in a local mirror."""
    if not mirror:
        return file.url
    local = _local_mirror(mirror)
    return local / file.path if local is not None else f"{mirror.rstrip('/')}/{file.path}"


def parse_checksums(text: str, where: str) -> dict[str, str]:
    """`sha256sum` output (`<hex>  <path>` or `<hex> *<path>`) -> {path: 'sha256:<hex>'}."""
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.strip().partition(" ")
        name = name.strip().lstrip("*").removeprefix("./")
        if len(digest) != 64 or not name or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise NmtkitError(f"{where}:{number}: expected '<sha256 hex>  <path>', got {line.strip()!r}")
        sums[name] = f"sha256:{digest.lower()}"
    return sums


def mirror_checksums(mirror: str | None) -> dict[str, str]:
    """The SHA-256 sums a mirror declares for its own files ({} without a mirror or a SHA256SUMS file)."""
    if not mirror:
        return {}
    local = _local_mirror(mirror)
    if local is not None:
        if not local.is_dir():
            raise NmtkitError(f"{MIRROR_ENV}={mirror} is not a directory")
        path = local / MIRROR_CHECKSUMS
        return parse_checksums(path.read_text(encoding="utf-8"), str(path)) if path.exists() else {}
    url = f"{mirror.rstrip('/')}/{MIRROR_CHECKSUMS}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return parse_checksums(response.read().decode("utf-8"), url)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return {}
        raise NmtkitError(f"cannot read {url}: HTTP {error.code} {error.reason}") from error
    except (urllib.error.URLError, OSError) as error:
        raise Unreachable(f"cannot reach mirror {mirror} ({_reason(error)})") from error


def expected(file: RemoteFile, sums: dict[str, str]) -> RemoteFile:
    """What the fetched bytes must match: the mirror's own SHA-256 where it lists the file, else the official values."""
    if file.path not in sums:
        return file
    return dataclasses.replace(file, size=None, checksum=sums[file.path])


def file_digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def mismatch(path: Path, file: RemoteFile) -> str | None:
    """How the bytes at `path` differ from the size and checksum `file` expects; None when they match."""
    size = path.stat().st_size
    if file.size is not None and size != file.size:
        return f"size {size} bytes, expected {file.size}"
    if file.checksum:
        algorithm, _, want = file.checksum.partition(":")
        got = file_digest(path, algorithm)
        if got != want.lower():
            return f"{algorithm} {got}, expected {want}"
    return None


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or error
    return str(reason)


def _progress(total: int | None, initial: int, name: str) -> tqdm:
    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, desc=name, file=sys.stderr,
                disable=not sys.stderr.isatty(), dynamic_ncols=True)


def _copy(stream: BinaryIO, part: Path, append: bool, total: int | None, source: str) -> None:
    """Append (or write) `stream` to `part`; a transfer cut short keeps what arrived, for the next run to resume."""
    with open(part, "ab" if append else "wb") as out, _progress(total, out.tell(), part.name) as bar:
        try:
            while chunk := stream.read(CHUNK):
                out.write(chunk)
                bar.update(len(chunk))
        except (OSError, http.client.HTTPException) as error:
            raise NmtkitError(f"download from {source} stopped after {out.tell()} bytes ({_reason(error)}); "
                              "run again to resume") from error
        if total is not None and out.tell() < total:
            raise NmtkitError(f"download from {source} stopped after {out.tell()} of {total} bytes; "
                              "run again to resume")


def _fetch_local(source: Path, part: Path) -> None:
    if not source.is_file():
        raise Unreachable(f"{source} does not exist")
    total = source.stat().st_size
    offset = part.stat().st_size if part.exists() else 0
    with open(source, "rb") as stream:
        stream.seek(offset if offset <= total else 0)
        _copy(stream, part, 0 < offset <= total, total, str(source))


def _fetch_url(url: str, part: Path, size: int | None) -> None:
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset >= size:
        return  # complete already (or too long): the checks decide
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # nothing left after the offset: the .part file is whole
            return
        raise NmtkitError(f"cannot download {url}: HTTP {error.code} {error.reason}") from error
    except (urllib.error.URLError, OSError) as error:
        raise Unreachable(f"cannot reach {url} ({_reason(error)})") from error
    with response:
        resumed = offset > 0 and response.status == 206
        content_range = response.headers.get("Content-Range", "")
        if resumed and not content_range.startswith(f"bytes {offset}-"):
            raise NmtkitError(f"{url} answered a request for the bytes from {offset} with {content_range!r}")
        if offset and not resumed:
            log.info("%s does not resume downloads; starting %s over", urlsplit(url).netloc, part.name)
        length = response.headers.get("Content-Length")
        total = ((offset if resumed else 0) + int(length)) if length and length.isdigit() else size
        _copy(response, part, resumed, total, url)


def download(file: RemoteFile, dest_dir: Path, mirror: str | None = None, sums: dict[str, str] | None = None) -> Path:
    """Fetch `file` to `dest_dir/<URL path>` unless it is there; resumes a `.part` file; checks size and checksum."""
    dest = dest_dir / file.path
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    source = source_of(file, mirror)
    want = expected(file, sums or {})
    log.info("downloading %s (%s) to %s%s", source, human_size(want.size), dest,
             f" (resuming at {part.stat().st_size} bytes)" if part.exists() else "")
    if isinstance(source, Path):
        _fetch_local(source, part)
    else:
        _fetch_url(source, part, want.size)
    if want is not file:
        log.warning("checking %s against the SHA-256 in the mirror's %s, not the official checksum",
                    file.path, MIRROR_CHECKSUMS)
    problem = mismatch(part, want)
    if problem:
        part.unlink()  # the next run fetches it anew instead of resuming bad bytes
        raise NmtkitError(f"{source} is damaged or not the expected file ({problem}); "
                          "it was deleted, run again to download it anew")
    os.replace(part, dest)
    return dest


def download_all(files: Iterable[RemoteFile], dest_dir: Path, mirror: str | None = None) -> list[Path]:
    """Fetch every file not yet in `dest_dir`. A source that cannot be reached stops at once with one line that
    names the files still needed and how to supply them."""
    files = list(files)
    pending = [file for file in files if not (dest_dir / file.path).exists()]
    try:
        sums = mirror_checksums(mirror) if pending else {}
        while pending:
            download(pending[0], dest_dir, mirror, sums)
            pending.pop(0)
    except Unreachable as error:
        needed = ", ".join(f"{file.url} ({human_size(file.size)})" for file in pending)
        hint = (f"check {MIRROR_ENV}={mirror}" if mirror else
                f"without internet access, set {MIRROR_ENV} to a directory or URL holding them under the same paths")
        raise NmtkitError(f"{error}; still needed: {needed}; {hint}") from error
    return [dest_dir / file.path for file in files]


def _member_target(dest_dir: Path, name: str) -> Path:
    """Where archive member `name` goes; absolute paths and '..' are refused (a tarball must not write elsewhere)."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise NmtkitError(f"refusing archive member {name!r}: its path leaves the extraction directory")
    return dest_dir.joinpath(*parts)


def _extract(archive: Path, target_of: Callable[[str], Path | None], done: Callable[[], bool]) -> None:
    """One streaming pass over the regular files of a .tgz: each member that `target_of` maps to a path is written
    there (under a temporary name, renamed when complete); stops early once `done()`."""
    try:
        with tarfile.open(archive, "r|*") as tar:
            for member in tar:
                target = target_of(member.name.removeprefix("./")) if member.isfile() else None
                if target is not None:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    partial = target.with_name(target.name + ".extracting")
                    with tar.extractfile(member) as stream, open(partial, "wb") as out:
                        while chunk := stream.read(CHUNK):
                            out.write(chunk)
                    os.replace(partial, target)
                if done():
                    break
    except (tarfile.TarError, EOFError, OSError) as error:
        raise NmtkitError(f"cannot extract {archive}: {error}") from error


def extract_all(archive: Path, dest_dir: Path) -> None:
    """Extract every regular file of a .tgz under `dest_dir`."""
    _extract(archive, lambda name: _member_target(dest_dir, name), lambda: False)


def extract_members(archive: Path, members: dict[str, Path]) -> None:
    """Extract the given {member name: destination path} of a .tgz, stopping once all are out."""
    wanted = dict(members)
    _extract(archive, lambda name: wanted.pop(name, None), lambda: not wanted)
    if wanted:
        raise NmtkitError(f"{archive} lacks {', '.join(sorted(wanted))}")
