"""nmtkit score-pairs end to end (nmtkit/scoring/command.py): scores, the kept and removed pairs and their counts, and
every hostile input a one-line error or a counted pair, never a traceback, a NaN or a pair dropped silently."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from cli_runner import assert_error, nmtkit
from pair_models import MAX_POSITIONS, SOURCES, TARGETS, make_files, save_model, subword, write_corpus
from scaling import assert_linear

from nmtkit.decoding.ensemble import load_models
from nmtkit.scoring import command
from nmtkit.scoring.command import PairFiles, check_languages, load_directions
from nmtkit.scoring.config import PairScoreConfig
from nmtkit.scoring.entropy import score_chunk, token_entropies
from nmtkit.symbols.placeholders import load_patterns, reserved_symbols

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return make_files(tmp_path_factory.mktemp("score"))


def score(files: dict[str, Path], *args: str, src: Path | None = None, tgt: Path | None = None,
          model: str = "fwd", reverse: str = "bwd"):
    return nmtkit("score-pairs", "--src", str(src or files["src"]), "--tgt", str(tgt or files["tgt"]), "-m",
                  str(files[model]), "--reverse-model", str(files[reverse]), "--threads", "1", *args)


def entropy_lines(result) -> list[list[str]]:
    assert result.exit_code == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def test_scores_go_to_stdout_a_line_a_pair_and_are_the_dual_score_of_the_entropies(files):
    plain = score(files)
    assert plain.exit_code == 0, plain.stderr
    scores = [float(line) for line in plain.stdout.splitlines()]
    assert len(scores) == len(SOURCES) and all(0 < value <= 1 for value in scores)
    rows = entropy_lines(score(files, "--entropies"))
    for value, (shown, h_fwd, h_bwd, status) in zip(scores, rows):
        h_fwd, h_bwd = float(h_fwd), float(h_bwd)
        assert status == "scored" and float(shown) == value
        assert value == pytest.approx(math.exp(-(abs(h_fwd - h_bwd) + (h_fwd + h_bwd) / 2)), rel=1e-5)


def test_filtering_writes_the_best_share_and_lists_the_rest(files, tmp_path):
    rows = entropy_lines(score(files, "--entropies"))
    result = score(files, "--keep", "0.6", "--out-src", str(tmp_path / "kept.es"), "--out-tgt",
                   str(tmp_path / "kept.en"), "--out-removed", str(tmp_path / "removed.jsonl"), "--output",
                   str(tmp_path / "scores.tsv"), "--entropies")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["read"] == summary["scored"] == 5 and summary["kept"] == 3  # ceil(0.6 x 5)
    assert summary["removed"] == {"empty": 0, "too_long": 0, "min_score": 0, "keep_share": 2}
    best = sorted(range(5), key=lambda index: -float(rows[index][0]))[:3]
    kept = (tmp_path / "kept.es").read_text(encoding="utf-8").splitlines()
    assert kept == [SOURCES[index] for index in sorted(best)]
    assert (tmp_path / "kept.en").read_text(encoding="utf-8").splitlines() == [TARGETS[i] for i in sorted(best)]
    removed = [json.loads(line) for line in (tmp_path / "removed.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(record["line"] for record in removed) == sorted(set(range(1, 6)) - {i + 1 for i in best})
    assert all(record["reason"] == "keep_share" and record["src"] == SOURCES[record["line"] - 1] for record in removed)
    assert all(record["score"] == float(rows[record["line"] - 1][0]) for record in removed)
    assert (tmp_path / "scores.tsv").read_text(encoding="utf-8").splitlines() == ["\t".join(row) for row in rows]
    assert summary["kept_score_range"][0] >= max(record["score"] for record in removed)


def test_a_threshold_keeps_the_pairs_at_or_above_it(files, tmp_path):
    scores = sorted(float(line) for line in score(files).stdout.splitlines())
    result = score(files, "--min-score", str(scores[2]), "--out-src", str(tmp_path / "a"), "--out-tgt",
                   str(tmp_path / "b"))
    summary = json.loads(result.stdout)
    assert summary["kept"] == 3 and summary["removed"]["min_score"] == 2


def test_empty_and_too_long_pairs_are_scored_0_counted_and_never_kept(files, tmp_path):
    long_line = " ".join(["uno"] * MAX_POSITIONS)
    src, tgt = write_corpus(tmp_path, ["uno", "", "  ", long_line, "dos"], ["UNO", "DOS", "", "UNO", "DOS"])
    rows = entropy_lines(score(files, "--entropies", src=src, tgt=tgt))
    assert [row[3] for row in rows] == ["scored", "empty", "empty", "too_long", "scored"]
    assert [row[:3] for row in rows[1:4]] == [["0.0", "", ""]] * 3
    result = score(files, "--out-src", str(tmp_path / "a"), "--out-tgt", str(tmp_path / "b"), src=src, tgt=tgt)
    summary = json.loads(result.stdout)
    assert summary["unscored"] == {"empty": 2, "too_long": 1} and summary["kept"] == 2
    assert summary["removed"] == {"empty": 2, "too_long": 1, "min_score": 0, "keep_share": 0}
    assert (tmp_path / "a").read_text(encoding="utf-8") == "uno\ndos\n"


def test_models_of_different_vocabularies_each_read_their_own_way(files):
    """A word-vocabulary forward model and a character-vocabulary reverse one: each side is encoded by the model
    that reads or writes it, and each entropy is that model's alone."""
    rows = entropy_lines(score(files, "--entropies", reverse="bwd_char"))
    cpu = torch.device("cpu")
    reverse = load_models([files["bwd_char"]], cpu)
    sources = reverse.src_subword.encode(TARGETS)
    expected = token_entropies(reverse.model, sources, reverse.tgt_subword.encode(SOURCES), cpu)
    assert max(len(ids) for ids in sources) > max(len(line.split()) for line in TARGETS)  # characters, not words
    np.testing.assert_allclose([float(row[2]) for row in rows], expected, rtol=1e-5)


def test_a_multilingual_model_reads_the_tag_of_the_language_it_writes(files):
    assert_error(score(files, model="multi"), "-m model is multilingual", "give --tgt-lang")
    assert_error(score(files, "--tgt-lang", "de", model="multi"), "--tgt-lang de is not one of them", "en, es")
    rows = entropy_lines(score(files, "--entropies", "--tgt-lang", "en", model="multi"))
    loaded, cpu = load_models([files["multi"]], torch.device("cpu")), torch.device("cpu")
    tagged = [[loaded.tags["en"], *ids] for ids in loaded.src_subword.encode(SOURCES)]
    expected = token_entropies(loaded.model, tagged, loaded.tgt_subword.encode(TARGETS), cpu)
    np.testing.assert_allclose([float(row[1]) for row in rows], expected, rtol=1e-5)


def test_languages_that_contradict_the_models(files):
    assert_error(score(files, "--tgt-lang", "fr"), "--tgt-lang fr: the -m model writes en only")
    result = score(files, reverse="fwd")  # es -> en twice
    assert result.exit_code == 0 and "the reverse model should translate en -> es" in result.stderr


@pytest.mark.parametrize("forward, reverse, warns", [
    (("es", "en"), ("en", "es"), False), (("es", "en"), ("es", "en"), True), (("es", "en"), ("en", "fr"), True),
    (("src", "tgt"), ("en", "es"), False), ((None, "en"), ("es", "en"), False)])
def test_languages_that_do_not_chain_are_a_warning(caplog, forward, reverse, warns):
    caplog.set_level("WARNING", logger="nmtkit")
    check_languages(SimpleNamespace(langs=forward, tags={}), SimpleNamespace(langs=reverse, tags={}))
    assert ("the reverse model should translate" in caplog.text) == warns


def test_a_model_trained_on_masked_placeholders_reads_pairs_masked(files, tmp_path):
    """The checkpoint's placeholder rule masks each pair as prepare masked its training data (`mask_pair`)."""
    patterns = load_patterns("auto")
    vocab = subword(user_symbols=tuple(reserved_symbols()))
    path = save_model(tmp_path / "masked.pt", vocab, 4, placeholders={"families": patterns.as_dict()})
    paths = PairFiles(files["src"], files["tgt"], path, files["bwd"])
    forward, reverse = load_directions(paths, PairScoreConfig(), torch.device("cpu"))
    assert forward.patterns.as_dict() == patterns.as_dict() and reverse.patterns is None
    sources, targets = forward.encode([("%s uno", "%s UNO")])
    symbol = reserved_symbols()[0]
    assert sources == vocab.encode([f"{symbol} uno"]) != vocab.encode(["%s uno"])
    assert targets == vocab.encode([f"{symbol} UNO"])


@pytest.mark.parametrize("case, needles", [
    ("uneven", ["has 2 lines but", "has 1"]),
    ("empty", ["are empty"]),
    ("long", [":2: line longer than 64 bytes", "--max-line-bytes"]),
    ("utf8", [":2: invalid UTF-8 at byte 1"]),
    ("gzip", ["cannot read", "Not a gzipped file"]),
])
def test_bad_corpora_are_one_line_errors(files, tmp_path, case, needles):
    src, tgt = tmp_path / "in.es", tmp_path / "in.en"
    contents = {"uneven": (b"uno\ndos\n", b"UNO\n"), "empty": (b"", b""),
                "long": (b"uno\n" + b"x" * 65 + b"\n", b"UNO\nDOS\n"), "utf8": (b"uno\nd\xffs\n", b"UNO\nDOS\n"),
                "gzip": (b"not gzip\n", b"UNO\n")}[case]
    if case == "gzip":
        src = tmp_path / "in.es.gz"
    src.write_bytes(contents[0])
    tgt.write_bytes(contents[1])
    assert_error(score(files, "--max-line-bytes", "64", src=src, tgt=tgt), *needles)


@pytest.mark.parametrize("args, needles", [
    (["--keep", "80", "--out-src", "a", "--out-tgt", "b"], ["keep", "in [0.0, 1.0]", "80"]),
    (["--keep", "1e400", "--out-src", "a", "--out-tgt", "b"], ["keep", "finite"]),
    (["--keep", "nan", "--out-src", "a", "--out-tgt", "b"], ["keep", "finite"]),
    (["--keep", "0", "--out-src", "a", "--out-tgt", "b"], ["keep is the share", "got 0"]),
    (["--min-score", "-1", "--out-src", "a", "--out-tgt", "b"], ["min_score", "in [0.0, 1.0]"]),
    (["--batch-tokens", str(1 << 40)], ["batch_tokens", "in [1, 1048576]"]),
    (["--keep", "0.5"], ["--keep, --min-score and --out-removed choose the pairs", "--out-src"]),
    (["--out-removed", "r.jsonl"], ["--out-removed choose the pairs"]),
    (["--out-src", "a"], ["--out-src and --out-tgt go together"]),
    (["--out-src", "a", "--out-tgt", "a"], ["--out-src and --out-tgt name the same file"]),
    (["--output", "no/such/dir/scores"], ["is not a directory"]),
    (["--device", "tpu"], ["unknown device 'tpu'"]),
])
def test_bad_options_are_one_line_errors(files, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    assert_error(score(files, *args), *needles)


@pytest.mark.parametrize("model, needles", [("text", ["checkpoint", "corrupted or truncated"]),
                                            ("missing", ["does not exist"]),
                                            ("nan", ["line 1: the forward model gives a cross-entropy of nan"])])
def test_a_model_that_is_no_usable_checkpoint_is_refused(files, tmp_path, model, needles):
    (tmp_path / "text").write_text("not a model\n")
    paths = {**files, "text": tmp_path / "text", "missing": tmp_path / "missing.pt"}
    assert_error(score(paths, "--output", str(tmp_path / "scores"), model=model), *needles)
    assert not (tmp_path / "scores").exists() and [p.name for p in tmp_path.iterdir()] == ["text"]


def test_kept_lines_keep_their_bytes_and_gzip_goes_both_ways(files, tmp_path):
    src, tgt = tmp_path / "in.es.gz", tmp_path / "in.en"
    with gzip.open(src, "wb") as file:
        file.write("uno dos\r\n\ufeffcuatro\tcinco\r\nseis".encode())
    tgt.write_bytes("UNO DOS\nCUATRO\u2028CINCO\nSEIS".encode())
    result = score(files, "--out-src", str(tmp_path / "kept.es.gz"), "--out-tgt", str(tmp_path / "kept.en"),
                   src=src, tgt=tgt)
    assert json.loads(result.stdout)["kept"] == 3
    assert gzip.decompress((tmp_path / "kept.es.gz").read_bytes()) == \
        "uno dos\r\n\ufeffcuatro\tcinco\r\nseis\n".encode()
    assert (tmp_path / "kept.en").read_bytes() == "UNO DOS\nCUATRO\u2028CINCO\nSEIS\n".encode()


def test_a_failure_late_leaves_no_output_behind(files, tmp_path, monkeypatch):
    (tmp_path / "kept.es").write_text("from before\n")

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(command, "copy_pairs", fail)
    assert_error(score(files, "--out-src", str(tmp_path / "kept.es"), "--out-tgt", str(tmp_path / "kept.en")),
                 "No space left on device", "kept as they were")
    assert [path.name for path in tmp_path.iterdir()] == ["kept.es"]
    assert (tmp_path / "kept.es").read_text() == "from before\n"


def test_stdout_onto_an_input_is_refused(files, tmp_path):
    src, tgt = write_corpus(tmp_path)
    before = src.read_bytes()
    with open(src, "ab") as stdout:
        result = subprocess.run([sys.executable, "-m", "nmtkit", "score-pairs", "--src", str(src), "--tgt", str(tgt),
                                 "-m", str(files["fwd"]), "--reverse-model", str(files["bwd"]), "--threads", "1"],
                                stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 1 and "standard output is the file --src" in result.stderr
    assert src.read_bytes() == before


def test_chunks_hold_a_bounded_number_of_characters(monkeypatch):
    monkeypatch.setattr(command, "CHUNK_CHARS", 10)
    pairs = [("abcd", "ef"), ("g", "h"), ("ijklmnop", "qr"), ("s", "t")]
    assert list(command.chunks(pairs)) == [pairs[:1] + pairs[1:2] + pairs[2:3], pairs[3:]]
    monkeypatch.setattr(command, "CHUNK_PAIRS", 2)
    assert [len(chunk) for chunk in command.chunks(pairs * 2)] == [2, 1, 2, 2, 1]


@pytest.mark.parametrize("family", [
    lambda n: "a" * n,  # one word of one character repeated
    lambda n: "uno " * n,  # words the vocabulary knows
    lambda n: "\u4e00" * n,  # a script without spaces
    lambda n: " " * n + "x",  # white space before the text
    lambda n: "%s " * n,  # placeholder-like text (masked only for a model trained on placeholders)
], ids=["repeated-char", "known-words", "unspaced", "spaces", "printf"])
def test_a_long_line_costs_linear_time_before_it_is_refused_as_too_long(files, family):
    cpu = torch.device("cpu")
    directions = load_directions(PairFiles(files["src"], files["tgt"], files["fwd"], files["bwd_char"]),
                                 PairScoreConfig(), cpu)
    assert_linear(lambda line: score_chunk(directions, [(line, line)], 4000, cpu, 1), family)
