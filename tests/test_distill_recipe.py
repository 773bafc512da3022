"""recipes/distill: its student configs train, export (int8 + shortlist) and translate end to end on the reverse
task, and report.py's table says what it measured. (The whole recipe runs for minutes: `SMOKE=1 make
recipe-distill`; this tests its parts, and run.sh's options with a stand-in for nmtkit.)"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from cli_runner import nmtkit
from scripts import ROOT, load_script, recipe_path

from nmtkit.config.files import load_yaml
from nmtkit.config.run import build_config

make_data = load_script("recipes/reverse/make_data.py", "reverse_make_data")
report = load_script("recipes/distill/report.py", "distill_report")
STUDENTS = sorted((ROOT / "recipes" / "distill").glob("student-*.yaml"))


@pytest.mark.parametrize("path", STUDENTS, ids=lambda path: path.stem)
def test_students_have_a_deep_encoder_and_a_shallow_decoder(path):
    model = build_config(load_yaml(path)).model
    assert model.decoder_layers <= 2 < model.encoder_layers
    assert model.d_model % model.heads == 0


@pytest.fixture(scope="module")
def reverse_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("distill-reverse")
    rng = random.Random(0)
    for name, count in (("train", 400), ("dev", 30), ("test", 20)):
        pairs = make_data.make_pairs(count, rng, 3, 8)
        for side, index in (("src", 0), ("tgt", 1)):
            (root / f"{name}.{side}").write_text("".join(pair[index] + "\n" for pair in pairs), encoding="utf-8")
    result = nmtkit("prepare", "--out", str(root / "data"), "--subword", "word", "--vocab-size", "40",
                    *(f"--{name}-{side}={root / f'{name}.{side}'}" for name in ("train", "dev")
                      for side in ("src", "tgt")))
    assert result.exit_code == 0, result.stderr
    return root


def test_a_student_trains_exports_and_translates_on_the_reverse_task(reverse_data, tmp_path):
    run = tmp_path / "student"
    trained = nmtkit("train", "--data", str(reverse_data / "data"), "--config", str(ROOT / "recipes" / "distill" /
                     "student-tiny.yaml"), "--out", str(run), "--max-steps", "8", "--threads", "1",
                     "--set", "train.valid_bleu=false", "--set", "train.amp=none", "--set", "train.warmup=2",
                     "--set", "model.d_model=32", "--set", "model.ffn=64")
    assert trained.exit_code == 0, trained.stderr
    exported = nmtkit("export", "-m", str(run / "model.pt"), "--out", str(tmp_path / "int8"), "--quantization",
                      "int8", "--shortlist", str(reverse_data / "data"))
    assert exported.exit_code == 0, exported.stderr
    lines = (reverse_data / "test.src").read_text(encoding="utf-8").splitlines()
    translated = nmtkit("translate", "-m", str(tmp_path / "int8"), "--input", str(reverse_data / "test.src"),
                        "--greedy", "--threads", "1")
    assert translated.exit_code == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == len(lines)


def test_the_table_shows_every_model_and_the_filter_counts():
    rows = {name: {"size_mb": size, "beam 5": {"bleu": 30.1, "chrf": 50.2, "sentences_per_s": speed},
                   "greedy": {"bleu": 29.0, "chrf": 49.0, "sentences_per_s": 2 * speed}}
            for name, size, speed in (("teacher int8", 12.5, 60.0), ("student-tiny int8 + shortlist", 3.1, 240.0))}
    filtered = json.loads('{"read": 100, "kept": 97, "removed": {"empty": 1, "length_ratio": 2, "score": 0}}')
    text = report.table(rows, 2, 1002, filtered)
    lines = text.splitlines()
    assert lines[2].startswith("| teacher int8 | 12.5 | 30.1 | 50.2 | 29.0 | 60.0 | 120.0 |")
    assert lines[3].startswith("| student-tiny int8 + shortlist | 3.1 |")
    assert "1002 test sentences (Acts, KJV reference)" in text and "2 threads" in text
    assert report.cpu_name() in text and "97 of 100 kept" in text and "2 length_ratio" in text
    assert "1000 test sentences (software messages en-de)," in report.table(rows, 2, 1000, None,
                                                                            "software messages en-de")


STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
"""


def run_recipe(root: Path, script: str = "run.sh", **settings: str) -> list[list[str]]:
    """`script` with stand-ins for nmtkit and python that only record their arguments; the calls of this run."""
    (root / "bin").mkdir(exist_ok=True)
    for name in ("nmtkit", "python"):
        (root / "bin" / name).write_text(STAND_IN)
        (root / "bin" / name).chmod(0o755)
    (root / "bible" / "raw").mkdir(parents=True, exist_ok=True)
    for name in ("train", "dev", "test"):
        for side in ("es", "en"):
            (root / "bible" / "raw" / f"{name}.{side}").write_text("uno\n")
    (root / "teacher.pt").write_bytes(b"")
    calls = root / "calls.log"
    calls.unlink(missing_ok=True)
    environment = {**os.environ, "PATH": f"{root / 'bin'}{os.pathsep}" + recipe_path(os.environ["PATH"]),
                   "CALLS": str(calls), "BIBLE": str(root / "bible"), "DATA": str(root / "data"),
                   "OUT": str(root / "runs"), "TEACHER": str(root / "teacher.pt"), "STUDENTS": "student-tiny",
                   **settings}
    result = subprocess.run(["bash", str(ROOT / "recipes" / "distill" / script)], env=environment,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [line.split() for line in calls.read_text().splitlines()]


def option(call: list[str], name: str) -> str | None:
    return call[call.index(name) + 1] if name in call else None


def test_shared_vocab_prepares_the_students_data_with_the_teachers_vocabulary(tmp_path):
    for shared, suffix in (("0", ""), ("1", "-teacher-vocab")):
        calls = run_recipe(tmp_path, SHARED_VOCAB=shared)
        prepare = next(call for call in calls if call[:2] == ["nmtkit", "prepare"])
        assert option(prepare, "--subword-model") == (str(tmp_path / "teacher.pt") if shared == "1" else None)
        assert (option(prepare, "--vocab-size") is None) == (shared == "1")
        assert option(prepare, "--out") == str(tmp_path / "data" / f"prepared{suffix}")
        trains = [call for call in calls if call[:2] == ["nmtkit", "train"]]
        assert {option(call, "--data") for call in trains} == {option(prepare, "--out")}
        assert [Path(option(call, "--out")).name for call in trains] == \
            [f"student-tiny{suffix}", f"student-tiny{suffix}-original"]  # beside, not over, the other's students
        report = next(call for call in calls if call[0] == "python")
        assert option(report, "--out") == str(tmp_path / "runs" / ("teacher-vocab" if suffix else ""))


def test_another_corpus_is_distilled_in_its_own_languages(tmp_path):
    raw = tmp_path / "messages"
    raw.mkdir()
    for name in ("train", "dev", "test"):
        for side in ("en", "de"):
            (raw / f"{name}.{side}").write_text("eins\n")
    calls = run_recipe(tmp_path, RAW=str(raw), SRC_LANG="en", TGT_LANG="de", TEST_NAME="messages")
    translate = next(call for call in calls if call[:2] == ["nmtkit", "translate"])
    assert option(translate, "--input") == str(tmp_path / "data" / "train.en")
    assert (tmp_path / "data" / "train.de").read_text() == "eins\n"
    prepare = next(call for call in calls if call[:2] == ["nmtkit", "prepare"])
    assert (option(prepare, "--src-lang"), option(prepare, "--tgt-lang")) == ("en", "de")
    assert "distilled.de" in (tmp_path / "data" / "corpora.yaml").read_text()
    report = next(call for call in calls if call[0] == "python")
    assert (option(report, "--src"), option(report, "--ref")) == (str(raw / "test.en"), str(raw / "test.de"))
    assert option(report, "--lang") == "de"


def test_another_corpus_needs_its_own_teacher(tmp_path):
    environment = {**os.environ, "RAW": str(tmp_path), "SRC_LANG": "en", "TGT_LANG": "de", "TEACHER": "",
                   "DATA": str(tmp_path / "data"), "OUT": str(tmp_path / "runs")}
    (tmp_path / "train.en").write_text("eins\n")
    result = subprocess.run(["bash", str(ROOT / "recipes" / "distill" / "run.sh")], env=environment,
                            capture_output=True, text=True)
    assert result.returncode == 1 and result.stderr.strip() == "error: RAW needs TEACHER (the Bible teacher is for " \
        "the Bible data)"


def test_a_student_that_starts_from_the_teacher_gets_its_weights_and_needs_its_vocabulary(tmp_path):
    calls = run_recipe(tmp_path, SHARED_VOCAB="1", STUDENTS="student-3-1 student-tiny")
    trains = {Path(option(call, "--out")).name: call for call in calls if call[:2] == ["nmtkit", "train"]}
    assert option(trains["student-3-1-teacher-vocab"], "--init-from") == str(tmp_path / "teacher.pt")
    assert option(trains["student-3-1-teacher-vocab-original"], "--init-from") == str(tmp_path / "teacher.pt")
    assert option(trains["student-tiny-teacher-vocab"], "--init-from") is None
    with pytest.raises(AssertionError, match="student-3-1 starts from the teacher's weights .* SHARED_VOCAB=1"):
        run_recipe(tmp_path, SHARED_VOCAB="0", STUDENTS="student-3-1")


def test_a_pruned_student_starts_from_the_student_its_init_from_line_names(tmp_path):
    calls = run_recipe(tmp_path, SHARED_VOCAB="1", STUDENTS="student-3-1 student-3-1-d128")
    trains = {Path(option(call, "--out")).name: call for call in calls if call[:2] == ["nmtkit", "train"]}
    assert list(trains) == ["student-3-1-teacher-vocab", "student-3-1-d128-teacher-vocab",
                            "student-3-1-teacher-vocab-original"]
    assert option(trains["student-3-1-d128-teacher-vocab"], "--init-from") == \
        str(tmp_path / "runs" / "student-3-1-teacher-vocab" / "model.pt")
    with pytest.raises(AssertionError, match="student-3-1-d128 starts from student-3-1 .* put student-3-1 before it"):
        (tmp_path / "alone").mkdir()
        run_recipe(tmp_path / "alone", SHARED_VOCAB="1", STUDENTS="student-3-1-d128")


def test_students_export_with_the_shortlist_setting_and_the_teacher_is_timed_with_it_in_its_vocabulary(tmp_path):
    calls = run_recipe(tmp_path, SHARED_VOCAB="1", SHORTLIST="7 70")
    exports = {Path(option(call, "--out")).name: call for call in calls if call[:2] == ["nmtkit", "export"]}
    assert list(exports) == ["teacher-int8", "teacher-int8-shortlist", "student-tiny-teacher-vocab-int8",
                             "student-tiny-teacher-vocab-original-int8"]
    assert option(exports["teacher-int8"], "--shortlist") is None
    for name in list(exports)[1:]:
        assert option(exports[name], "--shortlist") == str(tmp_path / "data" / "prepared-teacher-vocab")
        assert (option(exports[name], "--shortlist-size"), option(exports[name], "--shortlist-frequent")) == \
            ("7", "70")
    report = next(call for call in calls if call[0] == "python")
    assert f"shortlist={tmp_path / 'runs' / 'teacher-int8-shortlist'}" in report
    (tmp_path / "own").mkdir()
    calls = run_recipe(tmp_path / "own", SHARED_VOCAB="0")
    exports = [call for call in calls if call[:2] == ["nmtkit", "export"]]
    assert [Path(option(call, "--out")).name for call in exports] == \
        ["teacher-int8", "student-tiny-int8", "student-tiny-original-int8"]  # no teacher shortlist: not its vocabulary
    assert {(option(call, "--shortlist-size"), option(call, "--shortlist-frequent")) for call in exports[1:]} == \
        {("10", "100")}


def test_original_0_skips_the_student_on_the_original_pairs_alone_and_its_row(tmp_path):
    calls = run_recipe(tmp_path, ORIGINAL="0")
    trains = [call for call in calls if call[:2] == ["nmtkit", "train"]]
    assert [Path(option(call, "--out")).name for call in trains] == ["student-tiny"]
    report = next(call for call in calls if call[0] == "python")
    assert not any("original data only" in argument for argument in report)


@pytest.mark.parametrize("value", ["2", "yes", "-1"])
def test_original_other_than_0_or_1_is_a_one_line_error_before_anything_runs(tmp_path, value):
    with pytest.raises(AssertionError, match=r"error: ORIGINAL is 0 or 1"):
        run_recipe(tmp_path, ORIGINAL=value)
    assert not (tmp_path / "calls.log").exists()


def test_a_shortlist_setting_of_one_number_is_a_one_line_error(tmp_path):
    with pytest.raises(AssertionError, match=r"error: SHORTLIST takes two numbers, .* \(got '20'\)"):
        run_recipe(tmp_path, SHORTLIST="20")


@pytest.mark.parametrize("setting, expected", [(None, ("50", "500")), ("10 100", ("10", "100"))])
def test_the_messages_recipe_exports_its_students_with_a_wider_shortlist(tmp_path, setting, expected):
    raw = tmp_path / "messages"
    raw.mkdir()
    for name in ("train", "dev", "test"):
        for side in ("en", "de"):
            (raw / f"{name}.{side}").write_text("eins\n")
    (tmp_path / "runs" / "teacher").mkdir(parents=True)
    for name in ("test.json", "model.pt"):  # a teacher already trained and scored: the messages run is skipped
        (tmp_path / "runs" / "teacher" / name).write_text("{}")
    calls = run_recipe(tmp_path, "messages.sh", RAW=str(raw), **({"SHORTLIST": setting} if setting else {}))
    exports = [call for call in calls if call[:2] == ["nmtkit", "export"]]
    assert [Path(option(call, "--out")).name for call in exports] == \
        ["teacher-int8", "student-tiny-int8", "student-tiny-original-int8"]
    assert {(option(call, "--shortlist-size"), option(call, "--shortlist-frequent")) for call in exports[1:]} == \
        {expected}
