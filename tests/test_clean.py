"""Tests for nmtkit/data/clean.py: each filter on the pairs it is for and the pairs it must keep, counts by reason,
the removed pairs written out, kept pairs byte for byte, and the settings from the command line and corpora.yaml."""

from __future__ import annotations

import io
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from cli_runner import assert_error, nmtkit
from hypothesis import given, settings
from hypothesis import strategies as st

import nmtkit.data.clean as clean_module
from nmtkit.config.sections import DataConfig
from nmtkit.data.clean import Cleaner, DigestSet, FilterStats, RemovedPairs, filter_pairs
from nmtkit.data.corpus import median_length_ratio

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


def filtered(pairs, config, median_ratio: float = 1.0,
             langs: tuple[str | None, str | None] = (None, None)) -> tuple[list[str], list[str], FilterStats]:
    stats = FilterStats(median_ratio=median_ratio)
    kept = list(filter_pairs(pairs, Cleaner(config, langs), stats))
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


def test_a_filter_that_removes_more_than_a_few_percent_is_a_warning():
    stats = FilterStats(read=100, kept=90, removed=Counter(length_ratio=8, duplicate=2))
    assert stats.warnings() == ["length_ratio removed 8 of 100 training pairs (8.0%; see data.max_ratio)"]
    assert stats.as_dict()["warnings"] == stats.warnings()


def test_filter_pairs_streams_a_block_at_a_time():
    def pairs():
        yield from [("a b", "c d")] * clean_module.DEDUP_BLOCK
        raise AssertionError("read further than a block")

    assert next(filter_pairs(pairs(), Cleaner(FILTER), FilterStats())) == ("a b", "c d")


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
        monkeypatch.setattr(clean_module, "DEDUP_BLOCK", block)
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


# Every rule filter on, language identification and the script share too when the languages are given.
ALL_ON = DataConfig(max_ratio=0.0, near_dedup=True, numbers=True, links=True, copies=0.8, max_repeat=5,
                    max_word_chars=40, symbols_only=True, langid_min_letters=3)
RULES_ONLY = DataConfig(max_ratio=0.0, dedup=False, langid=False, script_share=0.0, links=False, max_repeat=0,
                        max_word_chars=0)


def reason(src: str, tgt: str, langs=(None, None), **settings) -> str | None:
    """Why the filters of RULES_ONLY with `settings` remove the pair alone (None: kept)."""
    config = DataConfig(**{**{key: getattr(RULES_ONLY, key) for key in RULES_ONLY.__dataclass_fields__}, **settings})
    stats = FilterStats()
    kept = list(filter_pairs([(src, tgt)], Cleaner(config, langs), stats))
    return None if kept else next(iter(stats.removed))


@pytest.mark.parametrize("src, tgt, expected", [
    ("Open the file", "Открыть файл", "script_tgt"),  # the "line in another script"
    ("Открыть файл", "Datei öffnen", "script_src"),
    ("Open the file", "Datei öffnen", None),
    ("Open %s in GTK+ and the X server", "%s mit GTK+ und dem X-Server öffnen", None),
    ("Open the file", "12:00 — 3.5%", None),  # a side without letters has no share to judge
])
def test_script_share_finds_a_side_in_another_script(src, tgt, expected):
    assert reason(src, tgt, ("en", "de"), script_share=0.5) == expected


def test_script_share_counts_words_so_identifiers_do_not_outweigh_chinese():
    """A Chinese word is a character, an identifier a word: by letters this line would be 2 of 9 in Han."""
    assert reason("Gnuplot document", "Gnuplot 文档", ("en", "zh_CN"), script_share=0.5) is None
    assert reason("Gnuplot document", "Gnuplot document", ("en", "zh_CN"), script_share=0.5) == "script_tgt"
    assert reason("文件", "ファイル", ("zh", "ja"), script_share=0.5) is None  # kana and Han are Japanese


@pytest.mark.parametrize("src, tgt, expected", [
    ("Page 12 of 30", "Seite 13 von 30", "numbers"),  # the "pair whose numbers differ"
    ("Page 12 of 30", "Seite 30 von 12", None),  # a multiset: order is free
    ("1,000 files", "1.000 Dateien", None), ("1 000 000 bytes", "1,000,000 Bytes", None),
    ("3.5 MB", "3,5 MB", None), ("Version 2", "Version ٢", None), ("007", "7", None),
    ("%1$s has %2$d items", "%2$d Einträge hat %1$s", None),  # printf's argument numbers are not numbers
    ("2 files", "zwei Dateien", "numbers"), ("files", "Dateien", None),
])
def test_numbers_compare_digit_strings_whatever_their_grouping(src, tgt, expected):
    assert reason(src, tgt, numbers=True) == expected


@pytest.mark.parametrize("src, tgt, expected", [
    ("See https://example.org/a for more.", "Siehe https://example.org/a.", None),
    ("See https://example.org/a", "Siehe https://example.org/b", "links"),
    ("Mail bugs to bugs@example.org", "Fehler an <BUGS@example.org>", None),
    ("Mail bugs to bugs@example.org", "Fehler an help@example.org", "links"),
    ("cannot open /proc/self/cmdline", "/proc/self/cmdline을 열 수 없습니다", None),  # a particle joined to it
    ("cannot open /proc/self/cmdline", "kann /proc/self/status nicht öffnen", "links"),
    ("the port of \"/system/proxy/host\"", "पोर्ट\"/system/proxy/host\"", None),
    ("km/h and/or a/b", "km/h und/oder", None),  # not paths
    ("Visit www.example.org", "Besuchen Sie", "links"),
])
def test_links_are_urls_addresses_and_paths_compared_as_multisets(src, tgt, expected):
    assert reason(src, tgt, links=True) == expected


@pytest.mark.parametrize("src, tgt, expected", [
    ("Open the file now", "Open the file now!", "copy"), ("Open the file now", "OPEN THE FILE NOW", "copy"),
    ("Open the file now", "Öffne die Datei jetzt", None),
    ("Name", "Name", None), ("Open file", "Open file", None),  # fewer than copy_min_words words
    ("12 34 56", "12 34 56", None),  # nothing left once letters alone are kept: no words to compare
])
def test_copies_are_untranslated_pairs(src, tgt, expected):
    assert reason(src, tgt, copies=0.8) == expected


def test_a_line_of_one_repeated_token_is_removed():
    assert reason("ha " * 30, "ha " * 30, max_repeat=20) == "repeat"
    assert reason("Holy, holy, holy is the Lord", "Santo, santo, santo es el Señor", max_repeat=2) is None
    assert reason("the the the the", "der", max_repeat=3) == "repeat"
    assert reason("哈" * 25, "ha", max_repeat=20) == "repeat"  # a character of Chinese is a word


def test_a_long_word_is_removed_but_not_a_sentence_without_spaces():
    assert reason("x" * 101, "y", max_word_chars=100) == "long_word"
    assert reason("这是一个没有空格的很长的中文句子" * 10, "a long sentence", max_word_chars=100) is None


@pytest.mark.parametrize("src, tgt, expected", [
    ("...", "Hallo Welt", "symbols_only"), ("12:45", "12:45", "symbols_only"), ("%d%%", "%d%%", None),
    ("Hello", "Hallo", None),
])
def test_an_empty_side_after_normalisation_is_a_side_of_no_letter(src, tgt, expected):
    """The issue's "empty side after normalisation": a side of digits, punctuation and symbols only."""
    assert reason(src, tgt, symbols_only=True) == expected


def test_an_empty_side_after_normalisation_is_judged_by_no_other_filter():
    """Without symbols_only such a pair stays: no words (no copy, no script share), no letters to identify."""
    pair = ("12:45 — …", "12:45 — …")
    assert reason(*pair, ("en", "de"), copies=0.5, script_share=0.9, langid=True, langid_min_letters=0,
                  links=True, numbers=True) is None


def test_near_duplicates_keep_the_first():
    pairs = [("Open the file", "Datei öffnen"), ("open  the FILE!", "Datei öffnen."), ("Open 2 files", "2 Dateien"),
             ("Open 3 files", "3 Dateien"), ("1.", "1."), ("2.", "2."), ("Close", "Schließen")]
    kept_src, _, stats = filtered(pairs, DataConfig(max_ratio=0.0, near_dedup=True))
    assert kept_src == ["Open the file", "Open 2 files", "1.", "Close"]
    assert stats.removed == Counter(near_duplicate=3)


def test_every_filter_counts_what_it_removed_and_the_removed_pairs_are_written_out():
    pairs = [("Open the file", "Datei öffnen"), ("Open the file", "Открыть файл"), ("Page 2", "Seite 3"),
             ("see http://a.org/x", "siehe"), ("Open the file now", "Open the file now"), ("a " * 9, "b " * 9),
             ("x" * 50, "y"), ("...", "Hallo"), ("Open the file", "Datei öffnen"), ("OPEN the file", "Datei öffnen!")]
    out = io.StringIO()
    stats = FilterStats()
    kept = list(filter_pairs(pairs, Cleaner(ALL_ON, ("en", "de")), stats, RemovedPairs(out)))
    assert kept == pairs[:1]
    assert stats.removed == Counter(script_tgt=1, numbers=1, links=1, copy=1, repeat=1, long_word=1, symbols_only=1,
                                    duplicate=1, near_duplicate=1)
    lines = out.getvalue().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["script_tgt", "numbers", "links", "copy", "repeat",
                                                       "long_word", "symbols_only", "duplicate", "near_duplicate"]
    assert lines[0] == "script_tgt\tOpen the file\tОткрыть файл"
    assert stats.read == len(pairs) and stats.kept == 1


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=40)
WORDS = st.lists(st.sampled_from(["Open", "the", "file", "Datei", "öffnen", "12", "1,000", "http://a.org", "文件",
                                  "файл", "%s", "!", " ", "\t", "ha", "a@b.org"]), max_size=12).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(TEXT, WORDS), st.one_of(TEXT, WORDS)), max_size=12))
def test_kept_pairs_come_out_byte_for_byte_and_every_other_pair_is_written_out(pairs):
    out = io.StringIO()
    stats = FilterStats()
    kept = list(filter_pairs(pairs, Cleaner(ALL_ON, ("en", "de")), stats, RemovedPairs(out)))
    removed = [line.split("\t", 2) for line in out.getvalue().split("\n")[:-1]] if out.getvalue() else []
    assert all(isinstance(src, str) for src, _ in kept)
    iterator = iter(pairs)
    assert all(pair in iterator for pair in kept)  # kept pairs in order, each one exactly as read
    assert len(kept) + len(removed) == len(pairs) == stats.read and stats.kept == len(kept)
    assert Counter(reason for reason, _, _ in removed) == stats.removed
    assert Counter(f"{src}\t{tgt}" for _, src, tgt in removed) == \
        Counter(f"{src}\t{tgt}" for src, tgt in pairs) - Counter(f"{src}\t{tgt}" for src, tgt in kept)


def test_a_language_no_script_is_known_for_is_left_alone_and_said_so():
    cleaner = Cleaner(DataConfig(langid=False), ("en", "xx"))
    assert cleaner.script_words[1] is None and cleaner.script_words[0] is not None
    assert cleaner.notes == ["data.script_share leaves the tgt side alone: it does not know language 'xx' (give its "
                             "code with --tgt-lang, or its scripts with data.scripts)"]
    assert Cleaner(DataConfig(langid=False, scripts={"xx": ["Latin"]}), ("en", "xx")).script_words[1] is not None


def test_without_languages_langid_and_scripts_leave_the_pairs_alone_and_say_so():
    cleaner = Cleaner(DataConfig(), (None, "de"))
    assert cleaner.judges[0] is None and cleaner.script_words[0] is None and cleaner.judges[1] is not None
    assert cleaner.notes == ["no src language given: data.langid and data.script_share leave the src side alone"]


GOOD = [("The file could not be opened.", "Die Datei konnte nicht geöffnet werden."),
        ("The disk is full.", "Der Datenträger ist voll."),
        ("Save the document before closing it.", "Speichern Sie das Dokument, bevor Sie es schließen."),
        ("The printer is out of paper.", "Der Drucker hat kein Papier mehr."),
        ("Copy 3 files to the folder.", "3 Dateien in den Ordner kopieren."),
        ("Delete the selected messages?", "Die ausgewählten Nachrichten löschen?"),
        ("OK", "OK")]
BAD = [("Copy 3 files to the folder now.", "4 Dateien jetzt in den Ordner kopieren."),  # numbers
       ("The network connection was lost.", "La connexion réseau a été perdue."),  # langid_tgt
       ("The window could not be closed.", "Не удалось закрыть окно.")]  # script_tgt


def write_corpus(root: Path, pairs: list[tuple[str, str]], stem: str = "train") -> tuple[Path, Path]:
    paths = root / f"{stem}.en", root / f"{stem}.de"
    for side, path in enumerate(paths):
        path.write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    return paths


def prepare_args(src: Path, tgt: Path, out: Path, *settings: str) -> list[str]:
    args = ["prepare", "--train-src", str(src), "--train-tgt", str(tgt), "--subword", "word", "--vocab-size", "60",
            "--out", str(out)]
    return args + [item for setting in settings for item in ("--set", setting)]


def test_filters_and_thresholds_from_the_command_line_and_the_manifest_counts(tmp_path):
    src, tgt = write_corpus(tmp_path, GOOD + BAD)
    removed = tmp_path / "removed.tsv"
    result = nmtkit(*prepare_args(src, tgt, tmp_path / "d", "data.numbers=true", f"data.removed_file={removed}"))
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["filter"]["removed"] == {"numbers": 1, "langid_tgt": 1, "script_tgt": 1}
    assert manifest["filter"]["unjudged"] == {"langid_src": 1, "langid_tgt": 1}  # OK / OK: too short to judge
    assert manifest["data"]["numbers"] is True and manifest["filter"]["kept"] == len(GOOD)
    assert removed.read_text(encoding="utf-8").splitlines() == [
        f"numbers\t{BAD[0][0]}\t{BAD[0][1]}", f"langid_tgt\t{BAD[1][0]}\t{BAD[1][1]}",
        f"script_tgt\t{BAD[2][0]}\t{BAD[2][1]}"]
    assert (tmp_path / "d" / "train.tgt.txt").read_text(encoding="utf-8") == "".join(t + "\n" for _, t in GOOD)
    off = nmtkit(*prepare_args(src, tgt, tmp_path / "e", "langid=false", "script_share=0"))
    assert off.exit_code == 0, off.stderr
    assert json.loads((tmp_path / "e" / "manifest.json").read_text())["filter"]["removed"] == {}
    lenient = nmtkit(*prepare_args(src, tgt, tmp_path / "f", "data.langid_min_letters=100", "data.script_share=0.9"))
    assert lenient.exit_code == 0, lenient.stderr
    assert json.loads((tmp_path / "f" / "manifest.json").read_text())["filter"]["removed"] == {"script_tgt": 1}
    assert_error(nmtkit(*prepare_args(src, tgt, tmp_path / "g", "data.langid_threshold=2")),
                 "data.langid_threshold", "must be in [0.0, 1.0]")


def test_without_languages_the_language_filters_leave_the_pairs_alone_and_say_so(tmp_path):
    src, tgt = write_corpus(tmp_path, GOOD + BAD)
    src, tgt = src.rename(tmp_path / "train.src"), tgt.rename(tmp_path / "train.tgt")
    result = nmtkit(*prepare_args(src, tgt, tmp_path / "d"))
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["filter"]["removed"] == {} and len(manifest["filter"]["notes"]) == 2


def test_the_removed_pairs_file_is_refused_onto_an_input_or_a_prepared_file(tmp_path):
    src, tgt = write_corpus(tmp_path, GOOD + BAD)
    before = src.read_bytes()
    assert_error(nmtkit(*prepare_args(src, tgt, tmp_path / "d", f"removed_file={src}")), "data.removed_file",
                 "refusing to write onto an input")
    assert src.read_bytes() == before
    out = tmp_path / "d"
    assert_error(nmtkit(*prepare_args(src, tgt, out, f"removed_file={out / 'train.src.txt'}")),
                 "is a file prepare writes in --out")
    assert_error(nmtkit(*prepare_args(src, tgt, out, f"removed_file={tmp_path / 'no' / 'such' / 'dir.tsv'}")),
                 "cannot write", "dir.tsv")
    assert not out.exists()


def test_the_removed_pairs_file_may_be_in_a_new_data_directory(tmp_path):
    src, tgt = write_corpus(tmp_path, GOOD + BAD)
    out = tmp_path / "new" / "data"
    result = nmtkit(*prepare_args(src, tgt, out, f"removed_file={out / 'removed.tsv'}"))
    assert result.exit_code == 0, result.stderr
    assert len((out / "removed.tsv").read_text(encoding="utf-8").splitlines()) == 2  # langid_tgt, script_tgt


def test_a_failed_prepare_leaves_the_removed_pairs_file_as_it_was(tmp_path):
    src, tgt = write_corpus(tmp_path, BAD)
    removed = tmp_path / "removed.tsv"
    removed.write_text("from an earlier run\n", encoding="utf-8")
    result = nmtkit(*prepare_args(src, tgt, tmp_path / "d", "numbers=true", f"removed_file={removed}"))
    assert_error(result, "no training pairs are left after filtering")
    assert removed.read_text(encoding="utf-8") == "from an earlier run\n"
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".removed")] == []
