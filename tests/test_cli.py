"""End to end through the real command line on the reverse task, plus bad input for every subcommand."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.rich_utils
from cli_runner import assert_error
from cli_runner import nmtkit as nmtkit_in_process
from training_runs import train_losses, wait_for_step
from typer.testing import CliRunner

from nmtkit.cli import app
from nmtkit.config.sections import DataConfig, DecodeConfig, TrainConfig, help_for
from nmtkit.metrics.options import EvaluateConfig
from nmtkit.serve.config import ServeConfig

ROOT = Path(__file__).resolve().parents[1]
REVERSE_CONFIG = ROOT / "recipes" / "reverse" / "config.yaml"


def nmtkit(*args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, "-m", "nmtkit", *args], input=stdin, capture_output=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"nmtkit {' '.join(args)} failed:\n{result.stderr.decode()}")
    return result


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    stderr = result.stderr.decode()
    assert result.returncode != 0
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.fixture(scope="module")
def reverse_data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reverse")
    subprocess.run([sys.executable, str(ROOT / "recipes" / "reverse" / "make_data.py"), "--out", str(root / "raw")],
                   check=True)
    raw = root / "raw"
    nmtkit("prepare", "--subword", "word", "--vocab-size", "100", "--out", str(root / "data"),
           "--train-src", str(raw / "train.src"), "--train-tgt", str(raw / "train.tgt"),
           "--dev-src", str(raw / "dev.src"), "--dev-tgt", str(raw / "dev.tgt"),
           "--test-src", str(raw / "test.src"), "--test-tgt", str(raw / "test.tgt"))
    return root


@pytest.fixture(scope="module")
def trained(reverse_data: Path) -> Path:
    run = reverse_data / "run"
    # one thread: under `make test` each xdist worker has one core, and a second thread would only contend with it
    result = nmtkit("train", "--data", str(reverse_data / "data"), "--config", str(REVERSE_CONFIG),
                    "--out", str(run), "--quiet", "--threads", "1")
    summary = json.loads(result.stdout)
    assert summary["steps"] == 800
    return run


# Exact match of a model that learned the reverse task: 0.87-0.99 here over seeds, thread counts and the fused or
# for-loop AdamW (the trajectory depends on float rounding, so on the CPU's kernels too); one that has not learned it
# scores about 0. The bound is far from both, so that it holds on every CPU.
LEARNED = 0.5


def exact_match(hypotheses: list[str], references: list[str]) -> float:
    assert len(hypotheses) == len(references)
    return sum(h == r for h, r in zip(hypotheses, references)) / len(references)


def test_prepare_writes_manifest_and_filters(reverse_data: Path):
    manifest = json.loads((reverse_data / "data" / "manifest.json").read_text())
    assert manifest["vocab"]["src"] == manifest["vocab"]["tgt"] == 24  # 20 symbols + pad/unk/bos/eos
    assert manifest["filter"]["read"] == 20000
    assert manifest["filter"]["kept"] + sum(manifest["filter"]["removed"].values()) == 20000
    assert manifest["splits"]["test"]["sentences"] == 200


def test_reverse_task_is_learned_end_to_end(trained: Path, reverse_data: Path):
    references = (reverse_data / "raw" / "test.tgt").read_text().splitlines()
    for search in (["--greedy"], ["--beam", "5"]):
        result = nmtkit("translate", "-m", str(trained / "model.pt"), "--input",
                        str(reverse_data / "raw" / "test.src"), *search)
        assert exact_match(result.stdout.decode().splitlines(), references) >= LEARNED, search
    assert (trained / "config.yaml").exists() and (trained / "last.pt").exists()
    records = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "valid_bleu" in r] == [200, 400, 600, 800]


def test_evaluate_json_and_several_references(trained: Path, reverse_data: Path, tmp_path: Path):
    hyp = tmp_path / "hyp.txt"
    hyp.write_bytes(nmtkit("translate", "-m", str(trained / "model.pt"), "--input",
                           str(reverse_data / "raw" / "test.src")).stdout)
    ref = str(reverse_data / "raw" / "test.tgt")
    scores = json.loads(nmtkit("evaluate", "--hyp", str(hyp), "--ref", ref, "--json").stdout)
    assert scores["bleu"]["score"] > 70 and "nrefs:1" in scores["bleu"]["signature"]
    assert scores["chrf"]["score"] > 70
    two = json.loads(nmtkit("evaluate", "--hyp", "-", "--ref", ref, "--ref", ref, "--json",
                            stdin=hyp.read_bytes()).stdout)
    assert "nrefs:2" in two["bleu"]["signature"]
    assert two["bleu"]["score"] == pytest.approx(scores["bleu"]["score"])
    text = nmtkit("evaluate", "--hyp", str(hyp), "--ref", ref).stdout.decode()
    assert text.startswith("BLEU = ") and "signature: nrefs:1" in text


def test_translate_keeps_one_line_per_input_line(trained: Path):
    lines = b"a b c\n\n  \nd e f g\n\xff\xfe broken\na\r\n"
    result = nmtkit("translate", "-m", str(trained / "model.pt"), "--buffer-size", "2", stdin=lines)
    outputs = result.stdout.decode().split("\n")
    assert outputs[-1] == "" and len(outputs) - 1 == 6
    alone = [nmtkit("translate", "-m", str(trained / "model.pt"), stdin=line).stdout.decode()
             for line in (b"a b c\n", b"d e f g\n", b"a\n")]
    assert outputs[1] == "" and outputs[2] == ""  # empty and blank lines give empty lines
    assert [outputs[0], outputs[3], outputs[5]] == [text.rstrip("\n") for text in alone]  # CRLF reads as LF
    assert "Traceback" not in result.stderr.decode()
    assert "line 5: invalid UTF-8" in result.stderr.decode()


def test_nbest_and_scores_output(trained: Path):
    model = str(trained / "model.pt")
    result = nmtkit("translate", "-m", model, "--beam", "4", "--nbest", "3", stdin=b"a b c\n\nd e\n")
    rows = [line.split(" ||| ") for line in result.stdout.decode().splitlines()]
    assert [int(row[0]) for row in rows] == [0, 0, 0, 1, 2, 2, 2]  # an empty line has one empty hypothesis
    best = nmtkit("translate", "-m", model, "--beam", "4", stdin=b"a b c\n").stdout.decode().splitlines()
    assert rows[0][1] == best[0] and rows[3][1] == ""
    for sentence in (rows[0:3], rows[4:7]):
        scores = [float(row[2]) for row in sentence]
        assert scores == sorted(scores, reverse=True) and len({row[1] for row in sentence}) == 3
    plain = nmtkit("translate", "-m", model, stdin=b"a b c\nd e f\n").stdout.decode().splitlines()
    scored = nmtkit("translate", "-m", model, "--scores", stdin=b"a b c\nd e f\n").stdout.decode().splitlines()
    assert [line.split(" ||| ")[0] for line in scored] == plain
    assert all(float(line.split(" ||| ")[1]) <= 0 for line in scored)
    gnmt = nmtkit("translate", "-m", model, "--scores", "--beam", "4", "--length-penalty", "gnmt", "--alpha", "0.6",
                  stdin=b"a b c\nd e f\n").stdout.decode().splitlines()
    assert len(gnmt) == 2 and all(len(line.split(" ||| ")) == 2 for line in gnmt)
    covered = nmtkit("translate", "-m", model, "--scores", "--beam", "4", "--length-penalty", "gnmt",
                     "--coverage-penalty", "0.2", stdin=b"a b c\nd e f\n").stdout.decode().splitlines()
    assert len(covered) == 2  # the penalty is at most 0: the best covered score is at most the best plain one
    assert all(float(line.split(" ||| ")[1]) <= float(plain.split(" ||| ")[1]) for line, plain in zip(covered, gnmt))
    assert_one_line_error(nmtkit("translate", "-m", model, "--beam", "2", "--nbest", "3", stdin=b"a\n", check=False),
                          "--nbest 3")
    assert_one_line_error(nmtkit("translate", "-m", model, "--greedy", "--coverage-penalty", "0.2", stdin=b"a\n",
                                 check=False), "--coverage-penalty")
    early = nmtkit("translate", "-m", model, "--beam", "4", "--stop-finished", "1", stdin=b"a b c\nd e f\n")
    assert len(early.stdout.decode().splitlines()) == 2  # what it may return: tests/test_search.py
    assert_one_line_error(nmtkit("translate", "-m", model, "--beam", "4", "--nbest", "2", "--stop-finished", "1",
                                 stdin=b"a\n", check=False), "--stop-finished")


def test_ensemble_and_sampling(trained: Path, tmp_path: Path):
    import torch

    model, lines = str(trained / "model.pt"), b"a b c d\ne f g\n"
    single = nmtkit("translate", "-m", model, stdin=lines).stdout
    assert nmtkit("translate", "-m", model, "-m", model, stdin=lines).stdout == single
    payload = torch.load(trained / "model.pt", weights_only=True)
    payload["subword"]["tgt"], payload["subword"]["joint"] = b"another subword model", False
    torch.save(payload, tmp_path / "other.pt")
    assert_one_line_error(nmtkit("translate", "-m", model, "-m", str(tmp_path / "other.pt"), stdin=lines,
                                 check=False), "other.pt", "subword")
    first = nmtkit("translate", "-m", model, "--sample", "--seed", "7", "--temperature", "2", stdin=lines * 20)
    again = nmtkit("translate", "-m", model, "--sample", "--seed", "7", "--temperature", "2", stdin=lines * 20)
    assert first.stdout == again.stdout and first.stdout.count(b"\n") == 40
    assert_one_line_error(nmtkit("translate", "-m", model, "--sample", "--nbest", "2", stdin=lines, check=False),
                          "--nbest")


def test_checkpoint_averaging(trained: Path, reverse_data: Path):
    kept = sorted(path.name for path in trained.glob("checkpoint_*.pt"))
    assert kept == ["checkpoint_400.pt", "checkpoint_600.pt", "checkpoint_800.pt"]  # keep_checkpoints: 3
    references = (reverse_data / "raw" / "test.tgt").read_text().splitlines()
    result = nmtkit("translate", "-m", str(trained / "model.pt"), "--average", "3", "--input",
                    str(reverse_data / "raw" / "test.src"))
    assert exact_match(result.stdout.decode().splitlines(), references) >= LEARNED
    lonely = reverse_data / "lonely"
    lonely.mkdir(exist_ok=True)
    (lonely / "model.pt").write_bytes((trained / "model.pt").read_bytes())
    assert_one_line_error(nmtkit("translate", "-m", str(lonely / "model.pt"), "--average", "2", stdin=b"a\n",
                                 check=False), "keep_checkpoints")


def test_bf16_translation(trained: Path, reverse_data: Path):
    references = (reverse_data / "raw" / "test.tgt").read_text().splitlines()
    result = nmtkit("translate", "-m", str(trained / "model.pt"), "--bf16", "--beam", "2", "--input",
                    str(reverse_data / "raw" / "test.src"))
    assert exact_match(result.stdout.decode().splitlines(), references) >= LEARNED


def test_translate_into_closed_pipe(trained: Path, reverse_data: Path):
    source = str(reverse_data / "raw" / "test.src")
    command = f"{sys.executable} -m nmtkit translate -m {trained / 'model.pt'} --buffer-size 10 -i {source} | head -1"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True)
    assert result.stdout.decode().count("\n") == 1
    assert "Traceback" not in result.stderr.decode() and "BrokenPipe" not in result.stderr.decode()


def test_resume_continues_to_the_new_budget(reverse_data: Path, tmp_path: Path):
    run, data = tmp_path / "run", str(reverse_data / "data")
    common = ["--data", data, "--config", str(REVERSE_CONFIG), "--out", str(run), "--quiet",
              "--set", "train.valid_every=10", "--set", "train.valid_bleu=false"]
    nmtkit("train", *common, "--max-steps", "20")
    assert_one_line_error(nmtkit("train", *common, "--max-steps", "30", check=False), "--resume")
    summary = json.loads(nmtkit("train", *common, "--max-steps", "30", "--resume").stdout)
    assert summary["steps"] == 30
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [10, 20, 30]


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_prepare_rejects_mismatched_line_counts(tmp_path: Path):
    src, tgt = write(tmp_path / "a.src", b"a\nb\n"), write(tmp_path / "a.tgt", b"a\n")
    result = nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--out", str(tmp_path / "d"), check=False)
    assert_one_line_error(result, "a.src", "a.tgt", "2", "1")


def test_prepare_rejects_invalid_utf8_with_line_number(tmp_path: Path):
    src, tgt = write(tmp_path / "b.src", b"ok\nbad \xff byte\n"), write(tmp_path / "b.tgt", b"ok\nfine\n")
    result = nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--out", str(tmp_path / "d"), check=False)
    assert_one_line_error(result, "b.src:2", "UTF-8")


@pytest.mark.parametrize("case", ["missing", "empty"])
def test_prepare_rejects_missing_or_empty_files(tmp_path: Path, case: str):
    src = str(tmp_path / "nope.src") if case == "missing" else write(tmp_path / "e.src", b"")
    tgt = write(tmp_path / "e.tgt", b"")
    result = nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, "--out", str(tmp_path / "d"), check=False)
    assert_one_line_error(result, "nope.src" if case == "missing" else "empty")


@pytest.mark.parametrize(("files", "needle"), [(("--dev-src", "--dev-tsv"), "give either --dev-tsv or"),
                                               (("--test-tgt",), "--test-src and --test-tgt must be given together")])
def test_prepare_rejects_a_split_given_by_halves_or_twice(tmp_path: Path, files: tuple[str, ...], needle: str):
    src, tgt = write(tmp_path / "c.src", b"a b\n"), write(tmp_path / "c.tgt", b"b a\n")
    given = [arg for option in files for arg in (option, src)]
    result = nmtkit("prepare", "--train-src", src, "--train-tgt", tgt, *given, "--out", str(tmp_path / "d"),
                    check=False)
    assert_one_line_error(result, needle)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(("override", "needle"), [("train.lrate=1", "train.lrate"),
                                                  ("train.max_steps=many", "train.max_steps"),
                                                  ("model.norm=middle", "model.norm")])
def test_train_rejects_bad_config(reverse_data: Path, tmp_path: Path, override: str, needle: str):
    result = nmtkit("train", "--data", str(reverse_data / "data"), "--out", str(tmp_path / "r"),
                    "--set", override, check=False)
    assert_one_line_error(result, needle)
    assert not (tmp_path / "r" / "last.pt").exists()


def test_train_rejects_a_directory_that_is_not_prepared(tmp_path: Path):
    result = nmtkit("train", "--data", str(tmp_path), "--out", str(tmp_path / "r"), check=False)
    assert_one_line_error(result, "manifest.json", "nmtkit prepare")


@pytest.mark.parametrize("content", [None, b"not a checkpoint at all", b"PK\x03\x04truncated"])
def test_translate_rejects_bad_checkpoints(tmp_path: Path, content: bytes | None):
    path = tmp_path / "model.pt"
    if content is not None:
        path.write_bytes(content)
    result = nmtkit("translate", "-m", str(path), stdin=b"a b\n", check=False)
    assert_one_line_error(result, "model.pt")
    assert result.stdout == b""


def test_truncated_checkpoint_is_reported(trained: Path, tmp_path: Path):
    data = (trained / "model.pt").read_bytes()
    truncated = write(tmp_path / "cut.pt", data[: len(data) // 2])
    assert_one_line_error(nmtkit("translate", "-m", truncated, stdin=b"a\n", check=False), "cut.pt", "truncated")


def test_evaluate_rejects_length_mismatch(tmp_path: Path):
    hyp, ref = write(tmp_path / "h.txt", b"a\nb\n"), write(tmp_path / "r.txt", b"a\n")
    assert_one_line_error(nmtkit("evaluate", "--hyp", hyp, "--ref", ref, check=False), "r.txt", "h.txt")


def test_help_of_every_subcommand():
    for command in ("prepare", "train", "translate", "evaluate", "align"):
        assert "Usage" in nmtkit(command, "--help").stdout.decode()


@pytest.mark.parametrize(("command", "option", "section", "key"), [
    ("translate", "--beam", DecodeConfig, "beam"), ("translate", "--nbest", DecodeConfig, "nbest"),
    ("translate", "--length-penalty", DecodeConfig, "length_penalty"),
    ("train", "--update-freq", TrainConfig, "update_freq"), ("train", "--max-time", TrainConfig, "max_time"),
    ("prepare", "--subword", DataConfig, "subword")])
def test_option_help_is_the_config_keys_help(monkeypatch, command: str, option: str, section: type, key: str):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option
    rows = [line.lstrip("│ ") for line in nmtkit(command, "--help").stdout.decode().splitlines()]
    lines = [row for row in rows if row.startswith(f"{option} ")]
    assert len(lines) == 1 and help_for(section, key) in lines[0]


def fields_of(config: type, *skip: str) -> list[tuple[type, str]]:
    return [(config, item.name) for item in dataclasses.fields(config) if item.name not in skip]


@pytest.mark.parametrize(("command", "keys"), [
    ("translate", fields_of(DecodeConfig, "dtype")),  # dtype: --fp16, --bf16
    ("serve", [*fields_of(ServeConfig), (DecodeConfig, "beam")]),
    ("evaluate", fields_of(EvaluateConfig))])
def test_each_config_field_is_an_option_with_the_fields_help(monkeypatch, command: str, keys: list[tuple[type, str]]):
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 1000)  # one line per option
    rows = [line.lstrip("│ ") for line in CliRunner().invoke(app, [command, "--help"]).output.splitlines()]
    for section, key in keys:
        flag = "--" + key.replace("_", "-")
        lines = [row for row in rows if row.startswith(f"{flag} ")]
        assert len(lines) == 1 and help_for(section, key) in lines[0], flag


@pytest.mark.parametrize("command", ["translate", "serve"])
def test_set_of_a_section_the_command_has_not_is_an_error(tmp_path: Path, command: str):
    result = nmtkit_in_process(command, "-m", str(tmp_path / "model.pt"), "--set", "model.dropout=0.1")
    assert_error(result, "--set model", "decode")


def test_serve_settings_take_set_as_flags_do(tmp_path: Path):
    model = str(tmp_path / "model.pt")  # the settings are checked before the model is read
    assert_error(nmtkit_in_process("serve", "-m", model, "--set", "serve.port=70000"), "--port 70000")
    assert_error(nmtkit_in_process("serve", "-m", model, "--port", "70000"), "--port 70000")
    assert_error(nmtkit_in_process("serve", "-m", model, "--set", "serve.colour=1"), "serve.colour")


def resumable_training(reverse_data: Path, run: Path) -> list[str]:
    """A short run with dropout (so that resuming must restore the random state), logging every update."""
    return ["train", "--data", str(reverse_data / "data"), "--config", str(REVERSE_CONFIG), "--out", str(run),
            "--quiet", "--device", "cpu", "--threads", "1", "--seed", "3", "--max-steps", "60",
            "--set", "model.dropout=0.1", "--set", "train.valid_every=10", "--set", "train.valid_bleu=false",
            "--set", "train.log_every=1", "--set", "train.keep_checkpoints=0"]


@pytest.fixture(scope="module")
def uninterrupted(reverse_data: Path) -> Path:
    run = reverse_data / "uninterrupted"
    nmtkit(*resumable_training(reverse_data, run))
    return run


def start_training(reverse_data: Path, run: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "nmtkit", *resumable_training(reverse_data, run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def assert_same_run(run: Path, reference: Path) -> None:
    import torch

    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len((reference / "metrics.jsonl").read_text().splitlines())  # nothing logged twice
    assert train_losses(run) == pytest.approx(train_losses(reference), rel=1e-6)
    reference_weights = torch.load(reference / "last.pt", weights_only=True)["model"]
    for name, value in torch.load(run / "last.pt", weights_only=True)["model"].items():
        torch.testing.assert_close(value, reference_weights[name], rtol=1e-6, atol=1e-7)


def test_training_killed_with_sigkill_resumes_exactly(reverse_data: Path, uninterrupted: Path, tmp_path: Path):
    import torch

    run = tmp_path / "run"
    process = start_training(reverse_data, run)
    wait_for_step(run, 15, process)
    process.kill()
    process.communicate()
    assert process.returncode == -9  # killed mid-run, after last.pt of step 10 and before the end
    assert torch.load(run / "last.pt", weights_only=True)["train_state"]["progress"]["step"] >= 10
    nmtkit(*resumable_training(reverse_data, run), "--resume")
    assert_same_run(run, uninterrupted)


def test_sigterm_saves_the_current_step_and_stops(reverse_data: Path, uninterrupted: Path, tmp_path: Path):
    import torch

    run = tmp_path / "run"
    process = start_training(reverse_data, run)
    wait_for_step(run, 5, process)
    process.terminate()
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143 and "Traceback" not in stderr.decode()
    summary = json.loads(stdout)
    assert summary["interrupted"] == "SIGTERM" and 5 <= summary["steps"] < 60
    assert torch.load(run / "last.pt", weights_only=True)["train_state"]["progress"]["step"] == summary["steps"]
    nmtkit(*resumable_training(reverse_data, run), "--resume")
    assert_same_run(run, uninterrupted)
