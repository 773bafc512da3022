"""Readers cap what they hold (nmtkit/data/lines.py, STYLE rule 17): a line longer than the limit is a one-line error
naming the file and the line, found with at most the limit (and a buffer) of it in memory, in prepare (plain and
gzipped files, parallel files, TSV, --corpora), translate's input (`open_lines`) and filter-distilled."""

from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path

import pytest
from cli_runner import assert_error, nmtkit
from hypothesis import given, settings
from hypothesis import strategies as st
from scaling import assert_linear

from nmtkit.config.sections import MAX_LINE_BYTES, DataConfig
from nmtkit.data.corpus import iter_lines
from nmtkit.data.lines import SMALL_FILE_BYTES, bounded_lines
from nmtkit.data.prepare import load_subwords, read_manifest
from nmtkit.decoding.inputs import open_lines
from nmtkit.errors import NmtkitError

HUGE = 32 << 20  # one line of 32 MiB, 32 KB of gzip
CAP = 64 << 10


def huge_gz(path: Path, size: int = HUGE, before: bytes = b"a b\n") -> Path:
    """A gzip file whose second line is `size` bytes of one letter, written a block at a time (fast, and never held
    whole here either)."""
    with gzip.open(path, "wb", compresslevel=1) as file:
        file.write(before)
        for _ in range(size >> 20):
            file.write(b"a" * (1 << 20))
        file.write(b"\nc d\n")
    return path


def lines_of(data: bytes, max_bytes: int | None) -> list[bytes]:
    return list(bounded_lines(io.BytesIO(data), max_bytes, "in.txt"))


def test_a_line_of_exactly_the_limit_is_read_and_one_byte_more_is_an_error():
    assert lines_of(b"abc\nabcd\nabc", 4) == [b"abc\n", b"abcd\n", b"abc"]
    assert lines_of(b"abcd", 4) == [b"abcd"]
    with pytest.raises(NmtkitError, match=r"^in\.txt:2: line longer than 4 bytes"):
        lines_of(b"abc\nabcde\nabc\n", 4)
    with pytest.raises(NmtkitError, match=r"^in\.txt:1: line longer than 4 bytes"):
        lines_of(b"abcde", 4)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=1, max_value=40))
def test_lines_come_back_byte_for_byte_or_the_first_long_one_is_named(data, max_bytes):
    lengths = [len(line) for line in data.split(b"\n")]
    too_long = [number for number, length in enumerate(lengths, 1) if length > max_bytes]
    if too_long and not (too_long == [len(lengths)] and lengths[-1] == 0):
        with pytest.raises(NmtkitError, match=rf"^in\.txt:{too_long[0]}: "):
            lines_of(data, max_bytes)
    else:
        assert b"".join(lines_of(data, max_bytes)) == data == b"".join(lines_of(data, None))


def peak_bytes(function) -> int:
    """The most memory Python held at once while `function` ran (it is expected to raise NmtkitError)."""
    tracemalloc.start()
    try:
        with pytest.raises(NmtkitError):
            function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_gzipped_line_is_refused_holding_no_more_than_the_limit(tmp_path):
    """The issue's file, smaller: one line of 32 MiB in 32 KB of gzip. Before the cap the reader held the whole line
    (a 200 MB line took prepare 11 GB)."""
    path = huge_gz(tmp_path / "train.src.gz")
    with pytest.raises(NmtkitError, match=r"train\.src\.gz:2: line longer than 65536 bytes"):
        list(iter_lines(path, CAP))
    assert peak_bytes(lambda: list(iter_lines(path, CAP))) < 2 * CAP + (1 << 20)


def test_translate_input_is_read_in_bounded_pieces(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\n" + b"x" * HUGE + b"\nb\n")
    with pytest.raises(NmtkitError, match=r"in\.txt:2: line longer than 65536 bytes; split it, or leave it out"):
        list(open_lines(path, CAP))
    assert peak_bytes(lambda: list(open_lines(path, CAP))) < 2 * CAP + (1 << 20)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_translate_input_decodes_as_before(tmp_path_factory, data):
    """Line by line, with invalid UTF-8 replaced, as the text stream it replaces read it."""
    path = tmp_path_factory.mktemp("in") / "in.txt"
    path.write_bytes(data)
    expected = list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="\n"))
    assert list(open_lines(path)) == expected


def test_the_default_limit_has_one_home():
    assert DataConfig().max_line_bytes == MAX_LINE_BYTES == 1 << 20
    assert "--max-line-bytes" in nmtkit("filter-distilled", "--help").stdout


def words(size: int) -> str:
    return "\n".join(f"w{index} x" for index in range(size)) + "\n"


@pytest.mark.parametrize("where", ["src", "tgt.gz", "tsv", "tsv.gz", "dev", "corpora"])
def test_prepare_names_the_file_and_line_of_a_long_line(tmp_path, where):
    long_line = "y" * 101
    lines = words(8).splitlines()
    lines[4] = long_line
    good, bad = "\n".join(words(8).splitlines()) + "\n", "\n".join(lines) + "\n"
    files = {"src": tmp_path / "c.src", "tgt": tmp_path / "c.tgt.gz", "tsv": tmp_path / "c.tsv"}
    files["src"].write_text(bad if where == "src" else good)
    files["tgt"].write_bytes(gzip.compress((bad if where == "tgt.gz" else good).encode()))
    rows = [f"{line}\t{line}" for line in good.splitlines()]
    if where.startswith("tsv"):
        rows[4] = "y" * 50 + "\t" + "y" * 50  # the cap counts the whole line
    tsv = "".join(row + "\n" for row in rows)
    files["tsv"].write_text(tsv)
    if where == "tsv.gz":
        files["tsv"] = tmp_path / "c.tsv.gz"
        files["tsv"].write_bytes(gzip.compress(tsv.encode()))
    args = ["prepare", "--out", str(tmp_path / "data"), "--subword", "word", "--vocab-size", "30"]
    if where.startswith("tsv"):
        args += ["--train-tsv", str(files["tsv"])]
    elif where == "corpora":
        (tmp_path / "corpora.yaml").write_text("- {name: web, src: c.src, tgt: c.tgt.gz}\n"
                                               "- {name: long, train: [c.src, long.txt]}\n")
        (tmp_path / "long.txt").write_text(bad)
        args += ["--corpora", str(tmp_path / "corpora.yaml")]
    else:
        args += ["--train-src", str(files["src"]), "--train-tgt", str(files["tgt"])]
        if where == "dev":
            (tmp_path / "dev.src").write_text(bad)
            args += ["--dev-src", str(tmp_path / "dev.src"), "--dev-tgt", str(files["src"])]
    name = {"src": "c.src", "tgt.gz": "c.tgt.gz", "tsv": "c.tsv", "tsv.gz": "c.tsv.gz", "dev": "dev.src",
            "corpora": "long.txt"}[where]
    assert_error(nmtkit(*args, "--set", "data.max_line_bytes=100"), f"{name}:5: line longer than 100 bytes",
                 "data.max_line_bytes")
    assert not (tmp_path / "data").exists()
    assert nmtkit(*args, "--set", "data.max_line_bytes=101").exit_code == 0


def test_filter_distilled_refuses_a_long_line(tmp_path):
    (tmp_path / "src").write_text("a b\n" + "c" * 50 + "\n")
    (tmp_path / "hyp").write_text("a b ||| -0.1\nc ||| -0.2\n")
    args = ["filter-distilled", "--src", str(tmp_path / "src"), "--hyp", str(tmp_path / "hyp"),
            "--out-src", str(tmp_path / "a"), "--out-tgt", str(tmp_path / "b")]
    assert_error(nmtkit(*args, "--max-line-bytes", "49"), "src:2: line longer than 49 bytes", "--max-line-bytes")
    assert nmtkit(*args, "--max-line-bytes", "50").exit_code == 0


def one_huge_line(size: int) -> bytes:
    return b"ab " * size + b"\n"


def many_short_lines(size: int) -> bytes:
    return b"a\n" * size


def long_run_of_returns(size: int) -> bytes:
    return b"\r" * size + b"\n" + b"\r\n" * size


@pytest.mark.parametrize("family", [one_huge_line, many_short_lines, long_run_of_returns])
def test_reading_is_linear(family):
    assert_linear(lambda data: lines_of(data, 1 << 40), family)



def test_files_small_by_nature_are_read_no_further_than_their_bound(tmp_path, monkeypatch):
    """A corpora list, a data directory's manifest and subword models, a SentencePiece model given to prepare: read
    whole, so each has a bound (far above any real one) beyond which nothing is read."""
    (tmp_path / "corpora.yaml").write_text("- {name: a, src: a.src, tgt: a.tgt}\n")
    monkeypatch.setitem(SMALL_FILE_BYTES, "yaml", 10)
    assert_error(nmtkit("prepare", "--corpora", str(tmp_path / "corpora.yaml"), "--out", str(tmp_path / "d")),
                 "corpora.yaml is over 10 bytes, too large for a yaml")
    (tmp_path / "spm.model").write_bytes(b"x" * 11)
    monkeypatch.setitem(SMALL_FILE_BYTES, "subword model", 10)
    assert_error(nmtkit("prepare", "--train-src", str(tmp_path / "a.src"), "--train-tgt", str(tmp_path / "a.tgt"),
                        "--subword-model", str(tmp_path / "spm.model"), "--out", str(tmp_path / "d")),
                 "spm.model is over 10 bytes")
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text('{"format": 1, "cut sho')
    with pytest.raises(NmtkitError, match="manifest.json is damaged"):
        read_manifest(data)
    (data / "spm.model").write_bytes(b"not model")
    with pytest.raises(NmtkitError, match="spm.model is not a SentencePiece model"):
        load_subwords(data)
