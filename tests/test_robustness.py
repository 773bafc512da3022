"""nmtkit/data/robustness.py and `nmtkit robustness`: what each set changes and keeps (every other byte), the same
sets for the same seed, linear time, and the directory written: never onto an input, never over a file it did not
write, a size cap before reading, one-line errors; recipes/robustness/run.sh end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_runner import assert_error, nmtkit
from hypothesis import given, settings
from hypothesis import strategies as st
from scaling import assert_linear

from nmtkit.data.augment import noise, title_words
from nmtkit.data.robustness import BUILDERS, make_sets, write_sets
from nmtkit.data.robustness_config import SET_NAMES, RobustnessConfig
from nmtkit.errors import NmtkitError

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["Hola, ¿cómo estás?", "EL PERRO DUERME.", "Tres palabras aquí", "¡Qué día!", "Uno. Dos.", "sin nada",
           "¿Dónde está la estación?"]
REFERENCES = ["Hello, how are you?", "THE DOG SLEEPS.", "Three words here", "What a day!", "One. Two.", "with nothing",
              "Where is the station?"]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def test_set(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "test.es", SOURCES), write(tmp_path / "test.en", REFERENCES)


def test_each_set_means_what_its_name_says():
    sets = make_sets(SOURCES, REFERENCES, RobustnessConfig())
    assert list(sets) == ["clean", *SET_NAMES]
    assert sets["clean"] == (SOURCES, REFERENCES)
    assert sets["upper"] == ([line.upper() for line in SOURCES], [line.upper() for line in REFERENCES])
    assert sets["title"] == ([title_words(line) for line in SOURCES], [title_words(line) for line in REFERENCES])
    assert sets["title"][0][0] == "Hola, ¿cómo Estás?"  # a word starts after a space, not after "¿"
    assert sets["punct"][0] == ["Hola, ¿cómo estás", "EL PERRO DUERME", "Tres palabras aquí", "¡Qué día", "Uno. Dos",
                                "sin nada", "¿Dónde está la estación"]
    assert sets["punct"][1][4] == "One. Two" and sets["punct"][1][2] == "Three words here"
    typos, typo_refs = sets["typos"]
    assert typo_refs == REFERENCES and all(typo != line for typo, line in zip(typos, SOURCES, strict=True))
    merged_src, merged_ref = sets["merge"]
    assert len(merged_src) == 3  # 7 lines in runs of 2 or 3
    for (start, size), line in zip(runs(merged_src, SOURCES), merged_ref, strict=True):
        assert size in (2, 3) and line == " ".join(REFERENCES[start:start + size])  # the same lines on both sides
    for src, ref, (noisy_src, noisy_ref) in zip(SOURCES, REFERENCES, zip(*sets["inline-noise"]), strict=True):
        added = " ".join(word for word in noisy_src.split(" ") if word not in src.split(" "))
        assert added and added in noisy_ref and noisy_ref.replace(added, "").split() == ref.split()
        assert not any(char in src + ref for char in added.replace(" ", ""))  # another script's letters, or emoji


def runs(merged: list[str], lines: list[str]) -> list[tuple[int, int]]:
    """(start, size) of the clean lines each merged line joins."""
    found, start = [], 0
    for line in merged:
        size = next(size for size in (1, 2, 3) if " ".join(lines[start:start + size]) == line)
        found.append((start, size))
        start += size
    return found


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 50])
def test_every_merged_line_holds_two_or_three_once_there_are_two(count: int):
    lines = [f"l{number}" for number in range(count)]
    for seed in range(20):
        merged, _ = BUILDERS["merge"](lines, lines, np.random.default_rng(seed))
        sizes = [size for _, size in runs(merged, lines)]
        assert sum(sizes) == count and (set(sizes) <= {2, 3} if count > 1 else sizes == [1])


def test_the_same_seed_gives_the_same_sets_and_a_set_left_out_changes_no_other():
    every = make_sets(SOURCES * 5, REFERENCES * 5, RobustnessConfig(seed=3))
    assert make_sets(SOURCES * 5, REFERENCES * 5, RobustnessConfig(seed=3)) == every
    other = make_sets(SOURCES * 5, REFERENCES * 5, RobustnessConfig(seed=4))
    assert all(other[name] != every[name] for name in ("typos", "merge", "inline-noise"))
    fewer = make_sets(SOURCES * 5, REFERENCES * 5, RobustnessConfig(seed=3, sets=["inline-noise"]))
    assert list(fewer) == ["clean", "inline-noise"] and fewer["inline-noise"] == every["inline-noise"]


LINE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\n\r"), max_size=40)


@given(st.lists(st.tuples(LINE, LINE), min_size=1, max_size=12), st.integers(0, 1000))
@settings(max_examples=200, deadline=None)
def test_what_a_set_does_not_change_comes_out_byte_for_byte(pairs: list[tuple[str, str]], seed: int):
    sources, references = [src for src, _ in pairs], [ref for _, ref in pairs]
    sets = make_sets(sources, references, RobustnessConfig(seed=seed))
    assert sets["clean"] == (sources, references)
    assert " ".join(sets["merge"][0]) == " ".join(sources) and " ".join(sets["merge"][1]) == " ".join(references)
    assert sets["typos"][1] == references
    for src, ref, (cut_src, cut_ref) in zip(sources, references, zip(*sets["punct"]), strict=True):
        assert src.startswith(cut_src) and ref.startswith(cut_ref)  # at most the final mark and spaces go
    rng = np.random.default_rng([seed, SET_NAMES.index("inline-noise")])  # the set's draws, in its order
    for pair, noisy in zip(pairs, zip(*sets["inline-noise"]), strict=True):
        token, where = noise(rng), float(rng.random())
        for line, noisy_line in zip(pair, noisy, strict=True):
            words, noisy_words, size = line.split(" "), noisy_line.split(" "), len(token.split(" "))
            at = round(where * len(words))  # the same place in both sides
            assert noisy_words[at:at + size] == token.split(" ") and noisy_words[:at] + noisy_words[at + size:] == words


FAMILIES = {"one long line": lambda size: "Una palabra " * size + ".", "marks": lambda size: "." * size,
            "spaces": lambda size: " " * size + "!", "one word": lambda size: "a" * size + "?"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_making_the_sets_is_linear_in_a_line(family: str):
    config = RobustnessConfig()
    assert_linear(lambda line: make_sets([line], [line], config), FAMILIES[family], name=family)


def test_making_the_sets_is_linear_in_the_lines():
    config = RobustnessConfig()
    assert_linear(lambda lines: make_sets(lines, lines, config), lambda size: ["Uno dos tres."] * size)


def test_the_command_writes_the_sets_and_their_record(test_set, tmp_path: Path):
    src, ref = test_set
    out = tmp_path / "sets"
    result = nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out), "--seed", "2")
    assert result.exit_code == 0, result.stderr
    summary = {entry.pop("name"): entry for entry in json.loads(result.stdout)["sets"]}
    assert list(summary) == ["clean", *SET_NAMES]
    assert summary["clean"] == {"lines": 7, "changed": 0}
    assert summary["punct"] == {"lines": 7, "changed": 5}  # two lines end in no mark
    assert summary["upper"]["changed"] == 6 and summary["merge"] == {"lines": 3, "changed": 3}  # one is upper case
    assert (out / "clean.src").read_bytes() == src.read_bytes() and (out / "clean.ref").read_bytes() == ref.read_bytes()
    expected = make_sets(SOURCES, REFERENCES, RobustnessConfig(seed=2))
    for name, (sources, references) in expected.items():
        assert (out / f"{name}.src").read_text(encoding="utf-8").splitlines() == sources
        assert (out / f"{name}.ref").read_text(encoding="utf-8").splitlines() == references
    record = json.loads((out / "sets.json").read_text())
    assert record["seed"] == 2 and len(record["files"]) == 2 * (1 + len(SET_NAMES))
    again = nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out), "--sets", "upper")
    assert again.exit_code == 0, again.stderr  # its own files, proven by the record: replaced
    assert [entry["name"] for entry in json.loads((out / "sets.json").read_text())["sets"]] == ["clean", "upper"]


def test_a_file_the_record_does_not_prove_is_never_overwritten(test_set, tmp_path: Path):
    src, ref = test_set
    out = tmp_path / "sets"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out)).exit_code == 0
    (out / "upper.src").write_text("edited by hand\n")
    result = nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out))
    assert_error(result, "upper.src exists", "does not show that nmtkit robustness wrote it")
    assert (out / "upper.src").read_text() == "edited by hand\n" and (out / "notes.txt").read_text() == "mine"
    (out / "sets.json").unlink()
    assert_error(nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out)), "clean.src exists")


def test_a_run_stopped_midway_leaves_files_the_next_run_replaces(test_set, tmp_path: Path, monkeypatch):
    from nmtkit.data import robustness

    src, ref = test_set
    out = tmp_path / "sets"
    write_sets(src, ref, out, RobustnessConfig(seed=1))
    real_write, calls = robustness.write_atomic, []

    def full_disk_at_the_fifth(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(robustness, "write_atomic", full_disk_at_the_fifth)
    with pytest.raises(OSError):
        write_sets(src, ref, out, RobustnessConfig(seed=2))  # four files of seed 2, the rest of seed 1
    monkeypatch.setattr(robustness, "write_atomic", real_write)
    write_sets(src, ref, out, RobustnessConfig(seed=3))  # every file proven: the old ones or the new ones
    expected = make_sets(SOURCES, REFERENCES, RobustnessConfig(seed=3))
    assert all((out / f"{name}.src").read_text(encoding="utf-8").splitlines() == lines[0]
               for name, lines in expected.items())


@pytest.mark.parametrize("record", ["[1, 2]", '{"sets": [{"name": "../up"}]}', "{" + " " * (1 << 20) + "}"])
def test_a_sets_json_of_another_kind_is_left_alone(test_set, tmp_path: Path, record: str):
    src, ref = test_set
    out = tmp_path / "sets"
    out.mkdir()
    (out / "sets.json").write_text(record)
    result = nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out))
    assert_error(result, "is not a sets record written by nmtkit robustness")
    assert (out / "sets.json").read_text() == record and sorted(path.name for path in out.iterdir()) == ["sets.json"]


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_an_input_among_the_sets_is_never_written_onto(tmp_path: Path, link: str):
    out = tmp_path / "sets"
    out.mkdir()
    ref = write(tmp_path / "test.en", REFERENCES)
    src = write(out / "clean.src", SOURCES) if link == "same" else write(tmp_path / "test.es", SOURCES)
    if link == "symlink":
        (out / "upper.src").symlink_to(src)
    elif link == "hardlink":
        os.link(src, out / "typos.src")
    before = src.read_bytes()
    result = nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(out))
    assert_error(result, "refusing to write onto an input")
    assert src.read_bytes() == before and not (out / "sets.json").exists()


def test_bad_input_is_a_one_line_error_before_anything_is_written(test_set, tmp_path: Path):
    src, ref = test_set
    out = tmp_path / "sets"
    short = write(tmp_path / "short.en", REFERENCES[:3])
    cases = [(["--ref", str(short)], "has 7 lines but --ref"),
             (["--ref", str(ref), "--max-bytes", "20"], "more than max_bytes (20)"),
             (["--ref", str(ref), "--sets", "upper,shouting"], "unknown set 'shouting'; the sets are title"),
             (["--ref", str(ref), "--sets", "upper,upper"], "a set named twice"),
             (["--ref", str(tmp_path / "missing.en")], "cannot read --ref")]
    for arguments, message in cases:
        assert_error(nmtkit("robustness", "--src", str(src), *arguments, "--out", str(out)), message)
        assert not out.exists()
    empty = write(tmp_path / "empty.es", [])
    assert_error(nmtkit("robustness", "--src", str(empty), "--ref", str(empty), "--out", str(out)), "are empty")
    assert_error(nmtkit("robustness", "--src", str(src), "--ref", str(ref), "--out", str(ref)), "is a file")
    (tmp_path / "bad.es").write_bytes(b"ok\n\xff\xfe\n" + b"x\n" * 5)
    assert_error(nmtkit("robustness", "--src", str(tmp_path / "bad.es"), "--ref", str(ref), "--out", str(out)),
                 "invalid UTF-8")
    with pytest.raises(NmtkitError, match="more than max_bytes"):
        write_sets(src, ref, out, RobustnessConfig(max_bytes=10))


FAKE_TRANSLATE = """#!/usr/bin/env bash
# nmtkit, but translate copies its input (an identity model): what run.sh does, without a model
if [ "$1" = translate ]; then
  while [ $# -gt 0 ]; do case $1 in --input) input=$2; shift ;; --output) output=$2; shift ;; esac; shift; done
  cp "$input" "$output"; exit 0
fi
exec "{python}" -m nmtkit "$@"
"""


def test_the_recipe_writes_translates_and_scores_every_set(test_set, tmp_path: Path):
    src, ref = test_set
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nmtkit").write_text(FAKE_TRANSLATE.replace("{python}", sys.executable))
    (bin_dir / "nmtkit").chmod(0o755)
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SETS": "upper,merge"}
    result = subprocess.run(["bash", str(ROOT / "recipes" / "robustness" / "run.sh"), str(tmp_path / "model.pt"),
                             str(src), str(src)], env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()
    assert rows[0].split() == ["set", "lines", "BLEU", "chrF"]
    assert [row.split()[:3] for row in rows[1:4]] == [["clean", "7", "100.00"], ["upper", "7", "100.00"],
                                                       ["merge", "3", "100.00"]]
    scores = json.loads((tmp_path / "robustness" / "scores.json").read_text())
    assert list(scores) == ["clean", "upper", "merge"] and scores["merge"]["lines"] == 3
    assert (tmp_path / "robustness" / "scores.txt").read_text().splitlines() == rows
