"""prepare_data: joint and separate subwords, TSV input, filters recorded in the manifest, binarized splits; which
files a split comes from."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from cli_runner import assert_error, nmtkit

import nmtkit.data.prepare as prepare_module
from nmtkit.config.sections import DataConfig
from nmtkit.data.corpus import read_lines
from nmtkit.data.dataset import TokenArray
from nmtkit.data.prepare import SplitFiles, load_subwords, prepare_data, subword_sample
from nmtkit.data.staging import PREPARED, finish_interrupted
from nmtkit.data.subword import run_trainer, train_subword
from nmtkit.errors import NmtkitError
from nmtkit.metrics.command import EvaluateConfig, evaluate_files

WORDS_A = ["casa", "perro", "gato", "libro", "mesa", "agua", "sol", "luna"]
WORDS_B = ["house", "dog", "cat", "book", "table", "water", "sun", "moon", "the"]


def corpus(count: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(" ".join(rng.choices(WORDS_A, k=rng.randint(2, 6))), " ".join(rng.choices(WORDS_B, k=rng.randint(2, 6))))
            for _ in range(count)]


def write_pair(folder: Path, name: str, pairs: list[tuple[str, str]]) -> SplitFiles:
    (folder / f"{name}.src").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / f"{name}.tgt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return SplitFiles(src=folder / f"{name}.src", tgt=folder / f"{name}.tgt")


@pytest.mark.parametrize(("files", "needle"), [
    (dict(src=Path("a"), tsv=Path("t")), "give either --dev-tsv or --dev-src/--dev-tgt, not both"),
    (dict(src=Path("a")), "--dev-src and --dev-tgt must be given together"),
    (dict(tgt=Path("b")), "--dev-src and --dev-tgt must be given together"),
])
def test_a_split_is_two_files_or_one_tsv(files, needle):
    with pytest.raises(NmtkitError, match=needle):
        SplitFiles(**files, name="dev")
    assert SplitFiles(Path("a"), Path("b")).given and SplitFiles(tsv=Path("t")).given
    assert not SplitFiles(name="test").given


def test_separate_vocabularies_and_round_trip(tmp_path: Path):
    train = corpus(300)
    splits = {"train": write_pair(tmp_path, "train", train), "dev": write_pair(tmp_path, "dev", corpus(20, 1))}
    manifest = prepare_data(splits, tmp_path / "out", DataConfig(subword="word", vocab_size=30, joint=False))
    src_model, tgt_model = load_subwords(tmp_path / "out")
    assert src_model is not tgt_model
    assert manifest["vocab"] == {"src": len(WORDS_A) + 4, "tgt": len(WORDS_B) + 4}
    ids = TokenArray.load(tmp_path / "out" / "dev.tgt")
    dev_targets = (tmp_path / "dev.tgt").read_text().splitlines()
    assert [tgt_model.decode([list(map(int, ids[i]))])[0] for i in range(len(ids))] == dev_targets
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["splits"]["dev"]["sentences"] == 20


def test_tsv_input_filters_and_counts(tmp_path: Path):
    rows = ["a b\tx y", "a b\tx y", "\tonly target", "one\tw w w w w w w w", "c  d\te\tf"]
    (tmp_path / "train.tsv").write_text("\n".join(rows[:4]) + "\n", encoding="utf-8")
    config = DataConfig(subword="word", vocab_size=20, max_ratio=3.0)
    with pytest.raises(NmtkitError, match="no training pairs"):
        prepare_data({"train": SplitFiles(tsv=tmp_path / "train.tsv")}, tmp_path / "o", DataConfig(max_words=1))
    manifest = prepare_data({"train": SplitFiles(tsv=tmp_path / "train.tsv")}, tmp_path / "out", config)
    assert {key: manifest["filter"][key] for key in ("read", "kept", "removed")} == \
        {"read": 4, "kept": 1, "removed": {"duplicate": 1, "empty": 1, "length_ratio": 1}}
    assert len(manifest["filter"]["warnings"]) == 3  # each filter removed a quarter
    (tmp_path / "bad.tsv").write_text(rows[4] + "\n", encoding="utf-8")
    with pytest.raises(NmtkitError, match="bad.tsv:1"):
        prepare_data({"train": SplitFiles(tsv=tmp_path / "bad.tsv")}, tmp_path / "out2", config)


def test_dev_and_test_are_not_filtered(tmp_path: Path):
    dev = [("a", "x"), ("a", "x"), ("b c d e f g h i", "y")]
    splits = {"train": write_pair(tmp_path, "train", corpus(100)), "test": write_pair(tmp_path, "test", dev)}
    manifest = prepare_data(splits, tmp_path / "out", DataConfig(subword="word", vocab_size=40))
    assert manifest["splits"]["test"]["sentences"] == 3


def test_chunked_encoding_and_sampled_subword_training_give_consistent_data(tmp_path: Path, monkeypatch):
    train = corpus(250, seed=3)
    splits = {"train": write_pair(tmp_path, "train", train), "dev": write_pair(tmp_path, "dev", [("", "")] * 3)}
    config = DataConfig(subword="bpe", vocab_size=40, dedup=False)
    whole = prepare_data(splits, tmp_path / "whole", config)
    monkeypatch.setattr(prepare_module, "CHUNK", 7)  # 250 lines in 36 chunks
    assert prepare_data(splits, tmp_path / "chunks", config) == whole
    for name in ("train.src", "train.tgt", "dev.src"):
        for part in ("tok", "off"):
            assert (tmp_path / "whole" / f"{name}.{part}.npy").read_bytes() == \
                (tmp_path / "chunks" / f"{name}.{part}.npy").read_bytes()
    assert whole["splits"]["dev"] == {"sentences": 3, "src_tokens": 0, "tgt_tokens": 0}
    src_model, _ = load_subwords(tmp_path / "whole")
    ids = TokenArray.load(tmp_path / "whole" / "train.src")
    assert src_model.encode([train[5][0]])[0] == ids[5].tolist()
    sampled = prepare_data(splits, tmp_path / "sampled", DataConfig(subword="bpe", vocab_size=40, max_sentences=50))
    assert sampled["splits"]["train"]["sentences"] == 250 and sampled["vocab"]["src"] <= 40


def test_subword_sample_draws_the_configured_number_of_lines_from_disk(tmp_path: Path):
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    paths[0].write_text("".join(f"a{i}\n" for i in range(30)))
    paths[1].write_text("".join(f"b{i}\n" for i in range(30)))
    everything = list(subword_sample(paths, 60, DataConfig(max_sentences=0)))
    assert len(everything) == 60 and everything[0] == "a0" and everything[-1] == "b29"
    sample = list(subword_sample(paths, 60, DataConfig(max_sentences=25, seed=4)))
    assert len(sample) == 25 and set(sample) < set(everything)
    assert sample == list(subword_sample(paths, 60, DataConfig(max_sentences=25, seed=4)))
    assert sample != list(subword_sample(paths, 60, DataConfig(max_sentences=25, seed=5)))


SCRIPTS = {
    "latin, decomposed accents": unicodedata.normalize("NFD", "Café naïve, résumé à l'école"),
    "full-width punctuation": "你好，世界！（测试）：是吗？",
    "chinese": "打开文件时出错。",
    "japanese": "ファイルを開けませんでした。",
    "korean": "파일을 열 수 없습니다.",
    "arabic": "تعذّر فتح الملف «%s».",
    "hebrew": "לא ניתן לפתוח את הקובץ.",
    "devanagari": "फ़ाइल खोली नहीं जा सकी।",
    "thai": "ไม่สามารถเปิดแฟ้มได้ ทำซ้ำ",
    "cyrillic": "Не удалось открыть файл «%s».",
    "greek": "Δεν ήταν δυνατό το άνοιγμα του αρχείου.",
    "emoji": "Saved ✅ 😀👍🏽 👨‍👩‍👧",
    "compatibility characters": "ﬁle … x² ½ Ⅳ ｶﾀｶﾅ",
    "spaces": "Error:  two spaces, a trailing one \t tab and 100\u00a0% ",
}


def test_every_script_comes_back_byte_identical(tmp_path: Path):
    """References in many scripts and forms go through prepare, encode and decode unchanged (no normalization,
    spaces kept), characters never seen in training included (byte fallback), and score 100 against themselves."""
    lines = list(SCRIPTS.values())
    unseen = ["純粋な 𝄞 ♞ ǅ", "ⓐⓑⓒ 〄 ꙮ"]  # characters only in the test set
    train = [(line, line) for line in lines * 20] + corpus(300)
    splits = {"train": write_pair(tmp_path, "train", train),
              "test": write_pair(tmp_path, "test", [(line, line) for line in lines + unseen])}
    manifest = prepare_data(splits, tmp_path / "out", DataConfig(subword="bpe", vocab_size=1100, dedup=False))
    assert manifest["subword"]["tgt"] == {"normalization": "identity", "byte_fallback": True, "exact_spaces": True}
    assert (tmp_path / "out" / "test.tgt.txt").read_bytes() == (tmp_path / "test.tgt").read_bytes()
    _, tgt_model = load_subwords(tmp_path / "out")
    ids = TokenArray.load(tmp_path / "out" / "test.tgt")
    decoded = tgt_model.decode([ids[index].tolist() for index in range(len(ids))])
    assert decoded == lines + unseen
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("".join(line + "\n" for line in decoded), encoding="utf-8")
    scores = evaluate_files(read_lines(hyp), "hyp", [tmp_path / "test.tgt"], EvaluateConfig(metrics=["bleu", "chrf"]))
    assert scores["bleu"]["score"] == pytest.approx(100.0) and scores["chrf"]["score"] == pytest.approx(100.0)


def test_nfkc_normalization_is_still_available_and_recorded(tmp_path: Path):
    splits = {"train": write_pair(tmp_path, "train", [(SCRIPTS["compatibility characters"], "x y")] * 5 + corpus(50))}
    manifest = prepare_data(splits, tmp_path / "out", DataConfig(vocab_size=60, normalization="nmt_nfkc"))
    assert manifest["subword"]["src"]["normalization"] == "nmt_nfkc"
    src_model, _ = load_subwords(tmp_path / "out")
    assert src_model.decode(src_model.encode(["ﬁle …"])) == ["file ..."]


def test_subword_samples_write_copies_of_train_that_decode_to_the_same_text(tmp_path: Path):
    train = corpus(200, seed=4)
    splits = {"train": write_pair(tmp_path, "train", train), "dev": write_pair(tmp_path, "dev", corpus(10, 5))}
    config = DataConfig(subword="bpe", vocab_size=60, dedup=False, subword_samples=3, subword_alpha=0.3)
    manifest = prepare_data(splits, tmp_path / "out", config)
    assert manifest["splits"]["train"]["sentences"] == 600 and manifest["splits"]["train"]["subword_samples"] == 3
    assert manifest["splits"]["dev"]["sentences"] == 10 and "subword_samples" not in manifest["splits"]["dev"]
    assert manifest["data"]["subword_samples"] == 3
    model, _ = load_subwords(tmp_path / "out")
    for side, index in (("src", 0), ("tgt", 1)):
        ids = TokenArray.load(tmp_path / "out" / f"train.{side}")
        copies = [[ids[copy * 200 + i].tolist() for i in range(200)] for copy in range(3)]
        assert copies[0] == model.encode([pair[index] for pair in train])  # the first copy: as translation segments
        for copy in copies:
            assert model.decode(copy) == [pair[index] for pair in train]
        assert copies[1] != copies[0] and copies[2] != copies[1]  # segmented anew, every copy
        assert sum(map(len, copies[1])) > sum(map(len, copies[0]))  # BPE-dropout leaves merges out: more pieces


@pytest.mark.parametrize(("settings", "needle"), [
    (dict(subword_samples=0), "at least 1"),
    (dict(subword_samples=2, subword="word"), "bpe or unigram"),
    (dict(subword_samples=2, subword_alpha=0.0), "0 < data.subword_alpha < 1"),
])
def test_subword_sampling_settings_are_checked(settings, needle):
    with pytest.raises(NmtkitError, match=needle):
        DataConfig(**settings)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes), links followed."""
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file()}


@pytest.mark.parametrize("link", ["same file", "symlink", "hard link"])
def test_prepare_from_its_own_text_into_the_same_directory_loses_nothing(tmp_path: Path, link: str):
    """Issue 47.1: re-preparing a data directory from its own cleaned text with a new vocabulary; the inputs are
    the directory's files, a symlink to them or a hard link to them."""
    data = tmp_path / "d"
    prepare_data({"train": write_pair(tmp_path, "train", corpus(200))}, data, DataConfig(subword="word"))
    text = {side: (data / f"train.{side}.txt").read_bytes() for side in ("src", "tgt")}
    inputs = {side: data / f"train.{side}.txt" for side in text}
    for side, path in inputs.items():
        if link != "same file":
            inputs[side] = tmp_path / f"input.{side}"
            inputs[side].symlink_to(path) if link == "symlink" else os.link(path, inputs[side])
    manifest = prepare_data({"train": SplitFiles(inputs["src"], inputs["tgt"])}, data, DataConfig(subword="char"),
                            overwrite=True)
    assert json.loads((data / "manifest.json").read_text())["data"]["subword"] == "char"
    assert manifest["filter"]["read"] == manifest["filter"]["kept"] == len(text["src"].splitlines())
    for side in text:
        assert (data / f"train.{side}.txt").read_bytes() == inputs[side].read_bytes() == text[side]
    assert sorted(path.name for path in data.iterdir() if path.name.startswith(".")) == []


def test_a_failed_prepare_leaves_the_previous_directory_as_it_was(tmp_path: Path, monkeypatch):
    data = tmp_path / "d"
    splits = {"train": write_pair(tmp_path, "train", corpus(100))}
    prepare_data(splits, data, DataConfig(subword="word"))
    before = snapshot(data)

    def disk_full(*args, **kwargs):
        raise NmtkitError("no space left on device")

    monkeypatch.setattr(prepare_module, "binarize", disk_full)
    with pytest.raises(NmtkitError, match="no space left"):
        prepare_data({"train": SplitFiles(data / "train.src.txt", data / "train.tgt.txt")}, data,
                     DataConfig(subword="char"), overwrite=True)
    assert snapshot(data) == before and sorted(path.name for path in data.iterdir()) == sorted(before)
    with pytest.raises(NmtkitError, match="no space left"):
        prepare_data(splits, tmp_path / "new" / "e", DataConfig(subword="word"))
    assert not (tmp_path / "new" / "e").exists()  # created for the prepare, so removed with it


# `nmtkit prepare` whose binarize step says so (touches argv[1]) and stalls: the moment to kill it
STALLED_PREPARE = """
import sys, time
from pathlib import Path
import nmtkit.data.prepare
from nmtkit.cli import app

def stall(*args, **kwargs):
    Path(sys.argv[1]).touch()
    time.sleep(120)

nmtkit.data.prepare.binarize = stall
app(sys.argv[2:], prog_name="nmtkit")
"""


def test_a_killed_prepare_leaves_the_previous_directory_and_the_inputs_as_they_were(tmp_path: Path):
    data = tmp_path / "d"
    prepare_data({"train": write_pair(tmp_path, "train", corpus(100))}, data, DataConfig(subword="word"))
    before, marker = snapshot(data), tmp_path / "stalled"
    args = ["--quiet", "prepare", "--train-src", str(data / "train.src.txt"), "--train-tgt",
            str(data / "train.tgt.txt"), "--subword", "char", "--out", str(data), "--overwrite"]
    process = subprocess.Popen([sys.executable, "-c", STALLED_PREPARE, str(marker), *args])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "prepare did not reach binarize"
    finally:
        process.kill()
        process.wait()
    after = snapshot(data)
    assert {name: after[name] for name in before} == before
    assert all(name.startswith(".prepare-") for name in set(after) - set(before))  # at most its staging leftovers
    prepare_data({"train": SplitFiles(data / "train.src.txt", data / "train.tgt.txt")}, data,
                 DataConfig(subword="char"), overwrite=True)  # the next prepare clears the leftovers
    assert set(snapshot(data)) == set(before) and (data / "train.src.txt").read_bytes() == before["train.src.txt"]


def test_files_of_the_user_in_out_are_kept_and_files_in_the_way_refused(tmp_path: Path):
    data = tmp_path / "d"
    (data / "raw").mkdir(parents=True)
    (data / "notes.txt").write_text("mine\n")
    splits = {"train": write_pair(data / "raw", "train", corpus(100))}
    prepare_data(splits, data, DataConfig(subword="word"))
    prepare_data(splits, data, DataConfig(subword="char", joint=False), overwrite=True)
    assert (data / "notes.txt").read_text() == "mine\n" and (data / "raw" / "train.src").exists()
    assert (data / "spm.src.model").exists() and not (data / "spm.model").exists()  # the old model is gone
    other = tmp_path / "e"
    other.mkdir()
    (other / "train.src.txt").write_text("my own text\n")
    for overwrite in (False, True):
        with pytest.raises(NmtkitError, match="train.src.txt"):
            prepare_data(splits, other, DataConfig(subword="word"), overwrite=overwrite)
    assert snapshot(other) == {"train.src.txt": b"my own text\n"}


@pytest.mark.parametrize("renames", [0, 1, 4, 7, 8, 9, 12, 15])
def test_an_interrupted_commit_loses_nothing_and_the_next_prepare_completes_it(tmp_path: Path, monkeypatch,
                                                                               renames: int):
    """Killed after `renames` of the commit's 16 renames (8 files aside, 8 in): every old file is in --out or in
    the old directory, every new one in --out or in the staging directory, and the next prepare finishes."""
    splits = {"train": write_pair(tmp_path, "train", corpus(100))}
    data, expected = tmp_path / "d", tmp_path / "expected"
    prepare_data(splits, data, DataConfig(subword="word"))
    prepare_data(splits, expected, DataConfig(subword="char"))
    before, after = snapshot(data), snapshot(expected)
    assert all(PREPARED.fullmatch(name) for name in [*before, *after])  # the commit moves all that prepare writes
    rename, done = Path.rename, []

    def killed_midway(path: Path, target: Path) -> Path:
        if len(done) == renames:
            raise KeyboardInterrupt
        done.append(path)
        return rename(path, target)

    monkeypatch.setattr(Path, "rename", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        prepare_data(splits, data, DataConfig(subword="char"), overwrite=True)
    monkeypatch.undo()
    left = snapshot(data)
    for name, content in before.items():
        assert content in (left.get(name), left.get(f".prepare-old-{os.getpid()}/{name}"))
    for name, content in after.items():
        assert content in (left.get(name), left.get(f".prepare-new-{os.getpid()}/{name}"))
    finish_interrupted(data)
    assert snapshot(data) == after and sorted(path.name for path in data.iterdir()) == sorted(after)


def test_leftovers_of_a_running_prepare_are_an_error_and_of_a_finished_commit_are_removed(tmp_path: Path):
    data = tmp_path / "d"
    prepare_data({"train": write_pair(tmp_path, "train", corpus(50))}, data, DataConfig(subword="word"))
    before = snapshot(data)
    (data / f".prepare-old-{os.getpid()}").mkdir()  # a commit killed before it deleted the old files
    (data / f".prepare-old-{os.getpid()}" / "train.src.txt").write_text("old\n")
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (data / f".prepare-new-{running.pid}").mkdir()
        with pytest.raises(NmtkitError, match=f"another nmtkit prepare \\(process {running.pid}\\) is writing"):
            finish_interrupted(data)
    finally:
        running.kill()
        running.wait()
    finish_interrupted(data)
    assert snapshot(data) == before and sorted(path.name for path in data.iterdir()) == sorted(before)


@pytest.mark.parametrize(("subword", "vocab_size", "reserved"), [
    ("word", 100, 132), ("word", 132, 132), ("bpe", 68, 68), ("unigram", 60, 68), ("char", 68, 68)])
def test_a_vocabulary_the_reserved_symbols_fill_is_refused_before_reading(tmp_path: Path, subword, vocab_size,
                                                                          reserved):
    """Finding 6 of issue 63: `--subword word --vocab-size 100 --set data.placeholders=auto` was a 57-line
    traceback from SentencePiece (`word_model_trainer.cc ... vocab_size >= 0`); its word trainer counts each of the
    64 placeholder symbols twice."""
    args = ["prepare", "--train-src", str(tmp_path / "missing.src"), "--train-tgt", str(tmp_path / "missing.tgt"),
            "--out", str(tmp_path / "d"), "--subword", subword, "--vocab-size", str(vocab_size),
            "--set", "data.placeholders=auto"]
    assert_error(nmtkit(*args), f"data.vocab_size {vocab_size} leaves no piece for text", f"take {reserved}")
    splits = {"train": write_pair(tmp_path, "train", corpus(100))}
    if subword in ("word", "char"):  # one piece more is enough for these (bpe and unigram need the characters too)
        prepare_data(splits, tmp_path / "ok", DataConfig(subword=subword, vocab_size=reserved + 1, placeholders="auto"))


def test_a_vocabulary_too_small_for_the_characters_says_how_large_it_must_be(tmp_path: Path):
    files = write_pair(tmp_path, "train", corpus(100))
    args = ["prepare", "--train-src", str(files.src), "--train-tgt", str(files.tgt), "--out", str(tmp_path / "d"),
            "--subword", "bpe", "--vocab-size", "10"]
    needed = len(set("".join(WORDS_A + WORDS_B))) + 1 + 4  # the characters, the word boundary, the special pieces
    assert_error(nmtkit(*args), "data.vocab_size 10 is too small", f"raise data.vocab_size to {needed} or more")
    assert nmtkit(*args[:-1], str(needed)).exit_code == 0


def test_no_line_sentencepiece_can_learn_from_is_an_error(tmp_path: Path):
    """Every kept line longer than SentencePiece's 4192 bytes (one word each, so the length filter keeps them, and
    the longest-word filter is off) was a traceback (`trainer_interface.cc ... !sentences_.empty()`)."""
    files = write_pair(tmp_path, "train", [("x" * 5000 + str(index), "y" * 5000 + str(index)) for index in range(3)])
    args = ["prepare", "--train-src", str(files.src), "--train-tgt", str(files.tgt), "--set", "max_word_chars=0",
            "--out", str(tmp_path / "d")]
    assert_error(nmtkit(*args), "no line to learn subwords from", "the 6 training line(s)", "4192 bytes")
    assert not (tmp_path / "d").exists()


def test_dropping_the_lines_sentencepiece_skips_changes_no_model():
    lines = [" ".join(pair) for pair in corpus(200)]
    hostile = []
    for index, line in enumerate(lines):
        hostile += [line, "", "z" * 4193] if index % 7 == 0 else [line]
    config = DataConfig(subword="bpe", vocab_size=60)
    model = io.BytesIO()
    run_trainer(iter(hostile), model, config, 60, False, (), ())  # SentencePiece skipping them itself
    assert train_subword(hostile, config, 60).proto == model.getvalue()


@pytest.mark.parametrize(("setting", "needle"), [
    ("vocab_size=0", "data.vocab_size: must be in [1, 2147483647]"),
    ("vocab_size=2147483648", "data.vocab_size: must be in"), ("character_coverage=0.5", "in [0.98, 1.0]"),
    ("max_sentences=-1", "data.max_sentences: must be at least 0"), ("max_line_bytes=0", "data.max_line_bytes")])
def test_sentencepiece_settings_out_of_range_are_refused(tmp_path: Path, setting, needle):
    files = write_pair(tmp_path, "train", corpus(10))
    assert_error(nmtkit("prepare", "--train-src", str(files.src), "--train-tgt", str(files.tgt),
                        "--out", str(tmp_path / "d"), "--set", f"data.{setting}"), needle)


# `nmtkit prepare` on a disk that fills up: the kernel refuses writes beyond argv[1] bytes (RLIMIT_FSIZE, which
# needs no privileges, as a full disk refuses them: the same OSError path, EFBIG instead of ENOSPC)
FULL_DISK = """
import resource, signal, sys
from nmtkit.cli import app

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
app(sys.argv[2:], prog_name="nmtkit")
"""


def test_a_disk_that_fills_up_is_one_line_and_the_previous_data_stays(tmp_path: Path):
    data = tmp_path / "d"
    prepare_data({"train": write_pair(tmp_path, "train", corpus(100))}, data, DataConfig(subword="word"))
    before = snapshot(data)
    big = write_pair(tmp_path, "big", corpus(5000, seed=3))
    result = subprocess.run([sys.executable, "-c", FULL_DISK, "20000", "prepare", "--train-src", str(big.src),
                             "--train-tgt", str(big.tgt), "--out", str(data), "--overwrite", "--subword", "word"],
                            capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "File too large" in errors[0]
    assert snapshot(data) == before and sorted(path.name for path in data.iterdir()) == sorted(before)
