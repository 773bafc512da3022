"""Resumable, checked downloads (recipes/wmt/download.py) against a local HTTP server and local mirrors."""

from __future__ import annotations

import hashlib
import io
import socket
import tarfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scripts import load_script

from nmtkit.errors import NmtkitError

_download = load_script("recipes/wmt/download.py", "download")
RemoteFile = _download.RemoteFile
download = _download.download
download_all = _download.download_all
extract_all = _download.extract_all
extract_members = _download.extract_members
mirror_checksums = _download.mirror_checksums
parse_checksums = _download.parse_checksums
source_of = _download.source_of

PAYLOAD = bytes(range(256)) * 400  # 102,400 bytes
URL = "http://example.org/wmt13/corpus.tgz"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


OFFICIAL = RemoteFile(URL, len(PAYLOAD), sha256(PAYLOAD))


class RangeHandler(SimpleHTTPRequestHandler):
    """Serves files with optional support for `Range: bytes=N-`, optionally cutting each response short."""

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        self.server.requests.append((self.path, self.headers.get("Range")))
        if not path.is_file():
            self.send_error(404)
            return
        data, start = path.read_bytes(), 0
        requested = self.headers.get("Range")
        if requested and self.server.ranges:
            start = int(requested.removeprefix("bytes=").rstrip("-"))
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body if self.server.cut_after is None else body[: self.server.cut_after])

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    """An HTTP server over tmp_path/site; set .ranges (Range support) and .cut_after (bytes sent) per test."""
    root = tmp_path / "site"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: RangeHandler(*a, directory=str(root)))
    httpd.root, httpd.ranges, httpd.cut_after, httpd.requests = root, True, None, []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def put(root: Path, relative: str, data: bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_source_of_maps_the_url_path_under_the_mirror(tmp_path):
    assert OFFICIAL.path == "wmt13/corpus.tgz"
    assert source_of(OFFICIAL, None) == URL
    assert source_of(OFFICIAL, "https://mirror.example/wmt/") == "https://mirror.example/wmt/wmt13/corpus.tgz"
    assert source_of(OFFICIAL, str(tmp_path)) == tmp_path / "wmt13/corpus.tgz"
    assert source_of(OFFICIAL, tmp_path.as_uri()) == tmp_path / "wmt13/corpus.tgz"


def test_local_mirror_is_checked_against_the_official_checksum(tmp_path):
    put(tmp_path / "mirror", OFFICIAL.path, PAYLOAD)
    dest = download(OFFICIAL, tmp_path / "dl", str(tmp_path / "mirror"))
    assert dest == tmp_path / "dl/wmt13/corpus.tgz" and dest.read_bytes() == PAYLOAD
    assert not dest.with_name("corpus.tgz.part").exists()


def test_local_mirror_resumes_a_part_file(tmp_path):
    put(tmp_path / "mirror", OFFICIAL.path, PAYLOAD)
    put(tmp_path / "dl", OFFICIAL.path + ".part", PAYLOAD[:5000])
    assert download(OFFICIAL, tmp_path / "dl", str(tmp_path / "mirror")).read_bytes() == PAYLOAD


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "longer"])
def test_a_damaged_file_is_rejected_and_deleted(tmp_path, damage):
    data = {"flipped byte": PAYLOAD[:-1] + b"\x00", "truncated": PAYLOAD[:-10], "longer": PAYLOAD + b"x"}[damage]
    put(tmp_path / "mirror", OFFICIAL.path, data)
    with pytest.raises(NmtkitError, match="damaged or not the expected file") as error:
        download(OFFICIAL, tmp_path / "dl", str(tmp_path / "mirror"))
    assert "\n" not in str(error.value)
    assert ("sha256" if damage == "flipped byte" else "size") in str(error.value)
    assert not list((tmp_path / "dl").rglob("corpus.tgz*"))


def test_md5_checksums_are_checked(tmp_path):
    put(tmp_path / "mirror", OFFICIAL.path, PAYLOAD)
    good = RemoteFile(URL, None, "md5:" + hashlib.md5(PAYLOAD).hexdigest())
    assert download(good, tmp_path / "dl", str(tmp_path / "mirror")).exists()
    bad = RemoteFile("http://example.org/other/corpus.tgz", None, "md5:" + "0" * 32)
    put(tmp_path / "mirror", bad.path, PAYLOAD)
    with pytest.raises(NmtkitError, match="md5"):
        download(bad, tmp_path / "dl", str(tmp_path / "mirror"))


def test_mirror_sha256sums_replace_the_official_checksums(tmp_path):
    other = b"a test mirror's own bytes\n"
    mirror = tmp_path / "mirror"
    put(mirror, OFFICIAL.path, other)
    put(mirror, "SHA256SUMS", f"{hashlib.sha256(other).hexdigest()}  ./{OFFICIAL.path}\n".encode())
    sums = mirror_checksums(str(mirror))
    assert sums == {OFFICIAL.path: sha256(other)}
    assert download(OFFICIAL, tmp_path / "dl", str(mirror), sums).read_bytes() == other
    put(mirror, "SHA256SUMS", f"{'0' * 64} *{OFFICIAL.path}\n".encode())
    with pytest.raises(NmtkitError, match="damaged"):
        download_all([OFFICIAL], tmp_path / "dl2", str(mirror))


def test_parse_checksums_names_a_bad_line():
    with pytest.raises(NmtkitError, match=r"SUMS:2: expected"):
        parse_checksums(f"{'a' * 64}  x.tgz\nnot a checksum line\n", "SUMS")


def test_http_download_resumes_after_an_interrupted_transfer(server, tmp_path):
    put(server.root, OFFICIAL.path, PAYLOAD)
    server.cut_after = 30_000
    with pytest.raises(NmtkitError, match="stopped after 30000 .*run again to resume"):
        download_all([OFFICIAL], tmp_path / "dl", server.url)
    part = tmp_path / "dl/wmt13/corpus.tgz.part"
    assert part.read_bytes() == PAYLOAD[:30_000]
    server.cut_after = None
    assert download_all([OFFICIAL], tmp_path / "dl", server.url)[0].read_bytes() == PAYLOAD
    assert server.requests[-1] == ("/wmt13/corpus.tgz", "bytes=30000-")
    assert not part.exists()


def test_http_download_starts_over_when_the_server_ignores_ranges(server, tmp_path):
    put(server.root, OFFICIAL.path, PAYLOAD)
    put(tmp_path / "dl", OFFICIAL.path + ".part", b"stale bytes that are not the file's start")
    server.ranges = False
    assert download_all([OFFICIAL], tmp_path / "dl", server.url)[0].read_bytes() == PAYLOAD


def test_a_complete_part_file_is_checked_without_refetching(server, tmp_path):
    put(server.root, OFFICIAL.path, PAYLOAD)
    put(tmp_path / "dl", OFFICIAL.path + ".part", PAYLOAD)
    unsized = RemoteFile(URL, None, OFFICIAL.checksum)
    assert download_all([unsized], tmp_path / "dl", server.url)[0].read_bytes() == PAYLOAD
    assert server.requests[-1][1] == f"bytes={len(PAYLOAD)}-"  # answered 416: nothing left


def test_http_mirror_missing_file_and_sha256sums(server, tmp_path):
    assert mirror_checksums(server.url) == {}
    with pytest.raises(NmtkitError, match="HTTP 404"):
        download_all([OFFICIAL], tmp_path / "dl", server.url)
    other = b"other bytes"
    put(server.root, OFFICIAL.path, other)
    put(server.root, "SHA256SUMS", f"{hashlib.sha256(other).hexdigest()}  {OFFICIAL.path}\n".encode())
    assert download_all([OFFICIAL], tmp_path / "dl", server.url + "/")[0].read_bytes() == other


def test_unreachable_host_stops_at_once_naming_what_is_needed(tmp_path):
    base = f"http://127.0.0.1:{closed_port()}"
    files = [RemoteFile(f"{base}/wmt13/a.tgz", 2_500_000_000), RemoteFile(f"{base}/wmt14/b.tgz")]
    start = time.monotonic()
    with pytest.raises(NmtkitError) as error:
        download_all(files, tmp_path / "dl")
    message = str(error.value)
    assert time.monotonic() - start < 5
    assert "\n" not in message and message.startswith(f"cannot reach {base}/wmt13/a.tgz")
    assert f"{base}/wmt13/a.tgz (2.50 GB)" in message and f"{base}/wmt14/b.tgz (size unknown)" in message
    assert "NMTKIT_MIRROR" in message


def test_missing_file_in_a_local_mirror(tmp_path):
    (tmp_path / "mirror").mkdir()
    with pytest.raises(NmtkitError, match=r"corpus.tgz does not exist; still needed: .*check NMTKIT_MIRROR="):
        download_all([OFFICIAL], tmp_path / "dl", str(tmp_path / "mirror"))
    with pytest.raises(NmtkitError, match="is not a directory"):
        download_all([OFFICIAL], tmp_path / "dl", str(tmp_path / "nowhere"))


def make_tgz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_extract_all_or_chosen_members(tmp_path):
    archive = make_tgz(tmp_path / "a.tgz", {"training/x.en": b"a\n", "./training/x.de": b"b\n", "y.fr": b"c\n"})
    extract_all(archive, tmp_path / "all")
    assert sorted(p.relative_to(tmp_path / "all").as_posix() for p in (tmp_path / "all").rglob("*.*")) == [
        "training/x.de", "training/x.en", "y.fr"]
    extract_members(archive, {"training/x.de": tmp_path / "picked.de"})
    assert (tmp_path / "picked.de").read_bytes() == b"b\n"
    with pytest.raises(NmtkitError, match="lacks training/z.en"):
        extract_members(archive, {"training/z.en": tmp_path / "z.en"})


def test_extract_refuses_paths_outside_the_directory(tmp_path):
    archive = make_tgz(tmp_path / "evil.tgz", {"../escaped.txt": b"x"})
    with pytest.raises(NmtkitError, match="refusing archive member"):
        extract_all(archive, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()
