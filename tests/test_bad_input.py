"""The rows of the "Bad input" table (docs/bad-input.md), each through the command line: a one-line `error:` and a
non-zero exit, or the documented recovery (a warning, and one output line per input line). The model is an untrained
tiny Transformer written in-process: these tests are about the edges of the commands, not about translation."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_runner import assert_error, nmtkit

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import MAX_LINE_BYTES
from nmtkit.data.prepare import load_subwords
from nmtkit.registry import build_model

WORDS = "a b c d e f g h".split()
LONG_LINE = " ".join(WORDS[i % 8] for i in range(50_000)) + "a"  # 100,000 characters, 50,000 words
TINY = {"name": "transformer", "encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32,
        "max_positions": 64}


def write(path: Path, text: str | bytes) -> str:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def corpus(root: Path, lines: int = 40) -> tuple[str, str]:
    rows = [" ".join(WORDS[(i + j) % 8] for j in range(2 + i % 5)) for i in range(lines)]
    return write(root / "c.src", "\n".join(rows) + "\n"), write(root / "c.tgt", "\n".join(reversed(rows)) + "\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A prepared data directory (data/), and model.pt: an untrained Transformer on its vocabulary."""
    root = tmp_path_factory.mktemp("bad")
    src, tgt = corpus(root)
    result = nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--dev-src", src, "--dev-tgt", tgt,
                    "--subword", "word", "--vocab-size", "20", "--out", str(root / "data"))
    assert result.exit_code == 0, result.stderr
    subwords = load_subwords(root / "data")
    config = build_config({"model": TINY})
    torch.manual_seed(0)
    model = build_model(config.model, subwords[0].vocab_size, subwords[1].vocab_size, True).eval()
    save_atomic(make_payload(config, model, subwords), root / "model.pt")
    return root


def train_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["train", "--data", str(data), "--out", str(out), "--model", "transformer",
            *[f"--set=model.{key}={value}" for key, value in TINY.items() if key != "name"],
            "--set", "train.valid_bleu=false", "--set", "train.threads=1", *extra]


def test_line_counts_that_differ(run: Path, tmp_path: Path):
    one, two = write(tmp_path / "one.txt", "a\n"), write(tmp_path / "two.txt", "a\nb\n")
    assert_error(nmtkit("align", "-m", str(run / "model.pt"), "--src", two, "--tgt", one), "two.txt", "2", "1")
    assert_error(nmtkit("evaluate", "--hyp", two, "--ref", one), "one.txt", "two.txt")


def test_empty_files(tmp_path: Path):
    empty = write(tmp_path / "empty.txt", b"")
    assert_error(nmtkit("evaluate", "--hyp", empty, "--ref", empty), "empty.txt", "empty")
    assert_error(nmtkit("prepare", "--train-src", empty, "--train-tgt", empty, "--out", str(tmp_path / "d")),
                 "empty")


def test_invalid_utf8_is_an_error_in_files_and_replaced_in_translation(run: Path, tmp_path: Path):
    bad, good = write(tmp_path / "bad.txt", b"a b\nc \xff d\n"), write(tmp_path / "good.txt", b"a b\nc d\n")
    assert_error(nmtkit("evaluate", "--hyp", bad, "--ref", good), "bad.txt:2", "UTF-8")
    assert_error(nmtkit("prepare", "--train-src", bad, "--train-tgt", good, "--out", str(tmp_path / "d")),
                 "bad.txt:2")
    command = [sys.executable, "-m", "nmtkit", "translate", "-m", str(run / "model.pt")]
    result = subprocess.run(command, input=b"a b\nc \xff d\ne\n", capture_output=True)
    assert result.returncode == 0 and result.stdout.count(b"\n") == 3
    assert "line 2: invalid UTF-8 replaced" in result.stderr.decode()


def test_crlf_line_ends_read_as_lf(run: Path, tmp_path: Path):
    src = write(tmp_path / "w.src", "a b c\r\nd e\r\n")
    tgt = write(tmp_path / "w.tgt", "c b a\r\ne d\r\n")
    assert nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--subword", "word", "--vocab-size", "12",
                  "--out", str(tmp_path / "d")).exit_code == 0
    assert (tmp_path / "d" / "train.src.txt").read_bytes() == b"a b c\nd e\n"
    model = str(run / "model.pt")
    assert nmtkit("translate", "-m", model, stdin="a b c\r\nd e\r\n").stdout == \
        nmtkit("translate", "-m", model, stdin="a b c\nd e\n").stdout
    scores = nmtkit("evaluate", "--hyp", src, "--ref", write(tmp_path / "lf.txt", "a b c\nd e\n"), "--metrics", "wer",
                    "--json").stdout
    assert json.loads(scores)["wer"]["score"] == 0.0


def test_a_100000_character_line(run: Path, tmp_path: Path):
    lines = write(tmp_path / "long.txt", f"a b\n{LONG_LINE}\nc d\n")
    model = str(run / "model.pt")
    result = nmtkit("translate", "-m", model, "--input", lines)
    assert result.exit_code == 0 and result.stdout.count("\n") == 3
    assert "line 2: 50000 subwords, truncated to 63" in result.stderr
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    result = nmtkit("align", "-m", model, "--src", lines, "--tgt", lines)
    assert result.exit_code == 0 and result.stdout.split("\n")[1] == ""  # left unaligned, the line kept
    assert "line 2: 50000 and 50000 subwords" in result.stderr
    # no (target words x source words) zeros for it: they took 10 GB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 1 << 20
    soft = nmtkit("align", "-m", model, "--src", lines, "--tgt", lines, "--format", "soft-json").stdout.splitlines()
    assert json.loads(soft[1])["attention"] == [] and len(json.loads(soft[0])["attention"]) == 2
    scores = json.loads(nmtkit("evaluate", "--hyp", lines, "--ref", lines, "--metrics", "chrf,cer", "--json").stdout)
    assert (scores["chrf"]["score"], scores["cer"]["score"], scores["cer"]["hits"]) == (100.0, 0.0, 100_006)


def test_training_leaves_out_a_pair_longer_than_the_positions(run: Path, tmp_path: Path):
    src, tgt = corpus(tmp_path)
    Path(src).write_text(Path(src).read_text() + LONG_LINE + "\n")
    Path(tgt).write_text(Path(tgt).read_text() + "a b\n")
    data = tmp_path / "data"
    assert nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--subword", "word", "--vocab-size", "20",
                  "--set", "data.max_words=100000", "--set", "data.max_ratio=0", "--out", str(data)).exit_code == 0
    result = nmtkit(*train_args(data, tmp_path / "r", "--max-steps", "2"))
    assert result.exit_code == 0, result.stderr
    assert "train: left out 1 of 41 pairs longer than 64 positions" in result.stderr


def test_missing_files_and_directories(run: Path, tmp_path: Path):
    assert_error(nmtkit("translate", "-m", str(run / "model.pt"), "--input", str(tmp_path)), "cannot read")
    assert_error(nmtkit("evaluate", "--hyp", str(tmp_path), "--ref", str(tmp_path)), "cannot read")
    assert_error(nmtkit("translate", "-m", str(tmp_path / "none.pt")), "none.pt", "does not exist")
    missing = str(tmp_path / "none.yaml")
    assert_error(nmtkit(*train_args(run / "data", tmp_path / "r", "--config", missing)), "none.yaml")


def test_outputs_that_cannot_be_written(run: Path, tmp_path: Path):
    blocker = Path(write(tmp_path / "file", "x"))
    src, tgt = corpus(tmp_path)
    assert_error(nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--out", str(blocker / "d")),
                 "cannot create output directory")
    assert_error(nmtkit(*train_args(run / "data", blocker / "run")), "cannot create run directory")
    align = ["align", "-m", str(run / "model.pt"), "--src", src, "--tgt", src]
    assert_error(nmtkit(*align, "--output", str(blocker / "a.txt")), "cannot write")
    assert_error(nmtkit(*align, "--plot", str(blocker / "plots")), "cannot create plot directory")


@pytest.mark.parametrize("command", ["translate -m {model} --input {src}", "evaluate --hyp {src} --ref {src}",
                                     "align -m {model} --src {src} --tgt {src}"])
def test_a_full_disk_under_stdout(run: Path, tmp_path: Path, command: str):
    src, _ = corpus(tmp_path)
    args = command.format(model=run / "model.pt", src=src).split()
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nmtkit", *args], stdout=full, stderr=subprocess.PIPE)
    stderr = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in stderr and "Exception ignored" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("error:") and "No space left on device" in stderr


def test_damaged_or_foreign_checkpoints(run: Path, tmp_path: Path):
    data = (run / "model.pt").read_bytes()
    cut = write(tmp_path / "cut.pt", data[: len(data) // 2])
    assert_error(nmtkit("translate", "-m", cut, stdin="a\n"), "cut.pt", "truncated")
    payload = torch.load(run / "model.pt", weights_only=True)
    torch.save({**payload, "format": 99}, tmp_path / "new.pt")
    assert_error(nmtkit("translate", "-m", str(tmp_path / "new.pt"), stdin="a\n"), "format 99", "reads format 1")
    out = tmp_path / "run"
    out.mkdir()
    write(out / "last.pt", data[:100])
    assert_error(nmtkit(*train_args(run / "data", out, "--resume")), "corrupted", "last.pt", "cannot resume",
                 "new --out")


def test_resume_with_other_data_or_model(run: Path, tmp_path: Path):
    out = tmp_path / "run"
    assert nmtkit(*train_args(run / "data", out, "--max-steps", "1")).exit_code == 0
    src, tgt = corpus(tmp_path, lines=30)
    Path(src).write_text(Path(src).read_text().replace("a", "z"))
    other = tmp_path / "other"
    assert nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--subword", "word", "--vocab-size", "20",
                  "--out", str(other)).exit_code == 0
    assert_error(nmtkit(*train_args(other, out, "--max-steps", "2", "--resume")), "other subword vocabularies",
                 str(other))
    args = train_args(run / "data", out, "--max-steps", "2", "--resume")
    assert_error(nmtkit(*args, "--set", "model.ffn=48"), "does not fit this model")
    assert_error(nmtkit(*train_args(run / "data", out, "--max-steps", "2")), "already holds a run", "--resume")


def test_config_errors(run: Path, tmp_path: Path):
    bad_yaml = write(tmp_path / "bad.yaml", "train: [\n")
    args = train_args(run / "data", tmp_path / "r")
    assert_error(nmtkit(*args, "--config", bad_yaml), "bad.yaml", "not valid YAML")
    assert_error(nmtkit(*args, "--set", "train.lrate=1"), "train.lrate", "known keys")
    assert_error(nmtkit(*args, "--set", "train.lr=fast"), "train.lr", "float")
    assert_error(nmtkit(*args, "--set", "train.lr=.nan"), "train.lr", "finite")
    assert not (tmp_path / "r" / "last.pt").exists()


@pytest.mark.parametrize("setting, needles", [
    ("decode.max_len_a=1e39", ["decode.max_len_a", "1000"]),
    ("decode.max_len_a=inf", ["decode.max_len_a", "finite"]),
    ("decode.alpha=nan", ["decode.alpha", "finite"]),
    ("decode.min_len=99999999999999999999999", ["decode.min_len", "too large"]),
])
def test_numbers_that_are_not_finite_or_out_of_range(run: Path, setting: str, needles: list[str]):
    """Once an OverflowError traceback (max_len_a 1e39 or infinite) and a translation scored NaN (alpha NaN)."""
    assert_error(nmtkit("translate", "-m", str(run / "model.pt"), "--set", setting, stdin="a b\n"), *needles)
    flag, value = setting.removeprefix("decode.").split("=")
    if flag in ("max_len_a", "alpha"):  # the flag too: typer reads nan and inf as floats
        assert_error(nmtkit("translate", "-m", str(run / "model.pt"), f"--{flag.replace('_', '-')}", value,
                            stdin="a b\n"), *needles)


def test_prepare_keeps_prepared_data_unless_told_to_overwrite(run: Path, tmp_path: Path):
    src, tgt = corpus(tmp_path)
    prepare = ["prepare", "--train-src", src, "--train-tgt", tgt, "--subword", "word", "--vocab-size", "20",
               "--out", str(tmp_path / "d")]
    assert nmtkit(*prepare).exit_code == 0
    before = (tmp_path / "d" / "manifest.json").read_text()
    assert_error(nmtkit(*prepare, "--set", "data.vocab_size=15"), "already holds prepared data", "--overwrite")
    assert (tmp_path / "d" / "manifest.json").read_text() == before
    assert nmtkit(*prepare, "--set", "data.vocab_size=15", "--overwrite").exit_code == 0
    assert (tmp_path / "d" / "manifest.json").read_text() != before


def test_gold_alignments_that_do_not_fit(run: Path, tmp_path: Path):
    src = write(tmp_path / "s.txt", "a b\nc\n")
    align = ["align", "-m", str(run / "model.pt"), "--src", src, "--tgt", src, "--gold"]
    assert_error(nmtkit(*align, write(tmp_path / "g1", "0-0 x\n0-0\n")), "g1:1", "'x'")
    assert_error(nmtkit(*align, write(tmp_path / "g2", "0-0\n")), "2 predicted", "1 gold")
    assert_error(nmtkit(*align, write(tmp_path / "g3", "1-1\n1-1\n")), "g3:2", "1-1", "outside", "0-based")


def test_a_model_flag_that_disagrees_with_the_config(tmp_path: Path):
    config = write(tmp_path / "run.yaml", "model:\n  name: transformer\n  d_model: 32\n")
    assert_error(nmtkit("train", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "run"), "--config", config,
                        "--model", "luong"), "--model luong disagrees with", "run.yaml", "'transformer'")


def test_a_line_longer_than_the_limit_is_an_error_in_translate(run: Path, tmp_path: Path):
    """translate reads a line no longer than 1 MiB (at most that much of it held): a longer one is an error naming
    the input and the line, not a line cut short (one output line per input line would then be a lie)."""
    text = "a b\n" + "c " * (MAX_LINE_BYTES // 2) + "d\nb a\n"
    source = write(tmp_path / "in.txt", text)
    assert_error(nmtkit("translate", "-m", str(run / "model.pt"), "-i", source), "in.txt:2: line longer than 1048576")
    assert_error(nmtkit("translate", "-m", str(run / "model.pt"), stdin=text), "<stdin>:2: line longer than")
    output = tmp_path / "out.txt"
    assert_error(nmtkit("translate", "-m", str(run / "model.pt"), "-i", source, "-o", str(output)), "in.txt:2")
