"""Tests for nmtkit/data/corpus.py: reading, validating and filtering parallel text."""

from __future__ import annotations

import random
from collections import Counter

import pytest

import nmtkit.data.corpus as corpus_module
from nmtkit.config import DataConfig
from nmtkit.data.corpus import (
    DigestSet,
    FilterStats,
    filter_pairs,
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


FILTER = DataConfig(min_words=2, max_words=5, max_ratio=2.0, dedup=True)

PAIRS = [
    ("  hello   world ", "hallo\tWelt"),  # kept, as it is
    ("", "x y"),  # empty
    ("   ", "x y"),  # empty: only spaces
    ("a b c d e f", "a b c d e f"),  # too_long: 6 > 5
    ("a", "b c"),  # too_short: 1 < 2
    ("a b", "c d e f g"),  # length_ratio: 5 > 2 * 2
    ("  hello   world ", "hallo\tWelt"),  # duplicate of the first pair
    ("hello world", "hallo  Welt"),  # not a duplicate: the text differs
    ("one two three", "eins zwei drei"),  # kept
]


def filtered(pairs, config, median_ratio: float = 1.0) -> tuple[list[str], list[str], FilterStats]:
    stats = FilterStats(median_ratio=median_ratio)
    kept = list(filter_pairs(pairs, config, stats))
    return [src for src, _ in kept], [tgt for _, tgt in kept], stats


def test_filter_pairs_counts_each_reason_and_keeps_the_text_as_it_is():
    kept_src, kept_tgt, stats = filtered(PAIRS, FILTER)
    assert kept_src == ["  hello   world ", "hello world", "one two three"]
    assert kept_tgt == ["hallo\tWelt", "hallo  Welt", "eins zwei drei"]
    assert stats.removed == Counter(empty=2, too_long=1, too_short=1, length_ratio=1, duplicate=1)
    assert stats.read == len(PAIRS)
    assert stats.kept == 3
    assert stats.as_dict()["removed"]["empty"] == 2


def test_filter_pairs_keeps_duplicates_without_dedup_and_ratio_off():
    config = DataConfig(min_words=2, max_words=5, max_ratio=0.0, dedup=False)
    kept_src, _, stats = filtered(PAIRS, config)
    assert kept_src == ["  hello   world ", "a b", "  hello   world ", "hello world", "one two three"]
    assert "duplicate" not in stats.removed and "length_ratio" not in stats.removed


@pytest.mark.parametrize("line, units", [
    ("Hello, world", 2), ("日本語のテキスト。", 9), ("Open ファイル", 5), ("中文 test", 3), ("สวัสดี", 6),
    ("한국어 문장", 2), ("مرحبا بالعالم", 2), ("", 0), ("   ", 0),
])
def test_length_units_count_characters_of_scripts_without_spaces(line, units):
    assert length_units(line) == units


def test_ratio_filter_compares_with_the_corpus_median():
    """English words against Chinese characters: 0.75 per character in the median pair here; only the pair out of
    proportion with the rest of the corpus goes."""
    pairs = [("Open the file", "打开文件"), ("Save the file as", "文件另存为"), ("Close", "关闭"),
             ("Print the document", "打印文档"), ("Quit", "退出程序啊啊啊啊啊啊啊啊啊")]
    median = median_length_ratio(pairs)
    assert median == pytest.approx(0.75, rel=0.02)
    kept_src, _, stats = filtered(pairs, DataConfig(max_ratio=2.0), median)
    assert kept_src == [src for src, _ in pairs[:4]] and stats.removed == Counter(length_ratio=1)
    _, _, thai_like = filtered(pairs, DataConfig(max_ratio=2.0), 0.25)  # a median far from these pairs'
    assert thai_like.removed["length_ratio"] == 4


def test_median_length_ratio_without_pairs_is_one():
    assert median_length_ratio([]) == 1.0 and median_length_ratio([("", "x")]) == 1.0


def test_a_filter_that_removes_more_than_a_few_percent_is_a_warning():
    stats = FilterStats(read=100, kept=90, removed=Counter(length_ratio=8, duplicate=2))
    assert stats.warnings() == ["length_ratio removed 8 of 100 training pairs (8.0%)"]
    assert stats.as_dict()["warnings"] == stats.warnings()


def test_filter_pairs_streams_a_block_at_a_time():
    def pairs():
        yield from [("a b", "c d")] * corpus_module.DEDUP_BLOCK
        raise AssertionError("read further than a block")

    assert next(filter_pairs(pairs(), FILTER, FilterStats())) == ("a b", "c d")


def test_pairs_that_differ_only_in_where_a_tab_falls_are_not_duplicates():
    """Issue 47.2: a digest of f"{src}\\t{tgt}" made these two pairs one."""
    pairs = [("Hola\tmundo amigo", "Hello friend"), ("Hola", "mundo amigo\tHello friend")]
    kept_src, _, stats = filtered(pairs, DataConfig(max_ratio=0.0))
    assert kept_src == ["Hola\tmundo amigo", "Hola"] and not stats.removed


def test_duplicates_are_found_across_blocks_and_within_one(monkeypatch):
    rng = random.Random(0)
    pairs = [(f"a{rng.randrange(40)} b", f"c d{rng.randrange(3)}") for _ in range(500)]
    expected = list(dict.fromkeys(pairs))
    for block in (1, 7, 1024):
        monkeypatch.setattr(corpus_module, "DEDUP_BLOCK", block)
        kept_src, kept_tgt, stats = filtered(pairs, DataConfig(max_ratio=0.0))
        assert list(zip(kept_src, kept_tgt)) == expected
        assert stats.removed == Counter(duplicate=len(pairs) - len(expected)) and stats.read == len(pairs)


def test_digest_set_answers_as_a_python_set_in_8_bytes_a_digest():
    rng = random.Random(1)
    values = [rng.randrange(1 << 14) << 50 | rng.randrange(3) for _ in range(6000)]  # the top bit set too
    seen, reference = DigestSet(), set()
    for start in range(0, len(values), 37):
        block = values[start : start + 37]
        expected = []
        for value in block:
            expected.append(value in reference)
            reference.add(value)
        assert seen.add([value.to_bytes(8, "little") for value in block]).tolist() == expected
    assert len(seen) == len(reference) and seen.nbytes == 8 * len(reference)
    assert len(seen.runs) <= 2 * len(reference).bit_length()
    assert seen.add([]).tolist() == []
