"""Tests for nmtkit/data/corpus.py: reading and validating parallel text, measuring its lengths."""

from __future__ import annotations

import pytest

from nmtkit.data.corpus import (
    iter_lines,
    iter_parallel,
    iter_tsv,
    length_units,
    median_length_ratio,
    read_lines,
)
from nmtkit.errors import NmtkitError


def test_read_lines_strips_crlf_and_lf(tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes("a b\r\nc\r\n\r\nd \u00e9\n".encode())
    assert read_lines(path) == ["a b", "c", "", "d \u00e9"]


def test_read_lines_without_final_newline_and_empty_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes(b"one\ntwo")
    assert read_lines(path) == ["one", "two"]
    path.write_bytes(b"")
    assert read_lines(path) == []


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("fine\nna\u00efve\n".encode("latin-1"))
    with pytest.raises(NmtkitError, match="UTF-8") as error:
        read_lines(path)
    assert f"{path}:2" in str(error.value)


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(NmtkitError, match="cannot read"):
        read_lines(tmp_path / "missing.txt")
    with pytest.raises(NmtkitError, match="cannot read"):
        list(iter_lines(tmp_path))


@pytest.mark.parametrize("data", [b"", b"\n", b"a", b"a\n", b"a\n\n", b"a\r\nb", b"\r\n\r\n", b"x\ry\n"])
def test_iter_lines_reads_what_read_lines_reads(tmp_path, data):
    path = tmp_path / "text.txt"
    path.write_bytes(data)
    assert list(iter_lines(path)) == read_lines(path)


def read_parallel(src, tgt) -> tuple[list[str], list[str]]:
    pairs = list(iter_parallel(src, tgt))
    return [src for src, _ in pairs], [tgt for _, tgt in pairs]


def read_tsv(path) -> tuple[list[str], list[str]]:
    pairs = list(iter_tsv(path))
    return [src for src, _ in pairs], [tgt for _, tgt in pairs]


@pytest.mark.parametrize(("src_lines", "tgt_lines"), [(3, 2), (2, 3), (0, 1)])
def test_read_parallel_with_different_line_counts_names_both_files_and_counts(tmp_path, src_lines, tgt_lines):
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("a\n" * src_lines, encoding="utf-8")
    tgt.write_text("x\n" * tgt_lines, encoding="utf-8")
    with pytest.raises(NmtkitError) as error:
        read_parallel(src, tgt)
    assert str(error.value).startswith(f"{src} has {src_lines} lines but {tgt} has {tgt_lines}")


def test_read_parallel(tmp_path):
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("a\nb\n", encoding="utf-8")
    tgt.write_text("x\r\ny\r\n", encoding="utf-8")
    assert read_parallel(src, tgt) == (["a", "b"], ["x", "y"])


def test_read_parallel_empty_is_an_error(tmp_path):
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("", encoding="utf-8")
    tgt.write_text("", encoding="utf-8")
    with pytest.raises(NmtkitError, match="empty"):
        read_parallel(src, tgt)


def test_read_tsv(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("guten Tag\tgood day\r\nja\tyes\n", encoding="utf-8")
    assert read_tsv(path) == (["guten Tag", "ja"], ["good day", "yes"])


@pytest.mark.parametrize("line, fields", [("no tab here", 1), ("a\tb\tc", 3)])
def test_read_tsv_wrong_field_count_names_the_line(tmp_path, line, fields):
    path = tmp_path / "pairs.tsv"
    path.write_text(f"a\tb\n{line}\n", encoding="utf-8")
    with pytest.raises(NmtkitError, match=f"found {fields}") as error:
        read_tsv(path)
    assert f"{path}:2" in str(error.value)


@pytest.mark.parametrize("line, units", [
    ("Hello, world", 2), ("日本語のテキスト。", 9), ("Open ファイル", 5), ("中文 test", 3), ("สวัสดี", 6),
    ("한국어 문장", 2), ("مرحبا بالعالم", 2), ("", 0), ("   ", 0),
])
def test_length_units_count_characters_of_scripts_without_spaces(line, units):
    assert length_units(line) == units


def test_median_length_ratio_without_pairs_is_one():
    assert median_length_ratio([]) == 1.0 and median_length_ratio([("", "x")]) == 1.0
