"""nmtkit translate --output/--resume (nmtkit/translate/output.py): a run killed mid-corpus and continued with the
same command ends with the file an uninterrupted run writes, one line per input line.

The model is a tiny Transformer of fixed (seeded, untrained) weights: its translations are nonsense that often runs
to the length limit, which is what a slow search looks like; only their equality between runs is asserted.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_runner import assert_error, nmtkit

import nmtkit.translate.output as output_module
from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import train_subword
from nmtkit.registry import build_model
from nmtkit.translate.output import count_lines, record_of

WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez".split()
CHUNK = 10  # --buffer-size of the runs: the input is several chunks
KILL_AFTER = 25  # lines fed to the run that is killed: two whole chunks are written, then it waits for more
WAIT_SECONDS = 300  # each run takes seconds; a loaded machine's start (torch's import) can take a minute


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, input of 57 lines, a few of them empty)."""
    root = tmp_path_factory.mktemp("distill-output")
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(0, 9))) for _ in range(57)]
    subword = train_subword(lines, DataConfig(subword="word", vocab_size=20), 20)
    config = build_config({"model": {"encoder_layers": 2, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 40}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    save_atomic(make_payload(config, model, (subword, subword)), root / "model.pt")
    (root / "input.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root / "model.pt", root / "input.txt"


def command(checkpoint: Path, output: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "nmtkit", "translate", "-m", str(checkpoint), "--output", str(output),
            "--buffer-size", str(CHUNK), "--beam", "3", "--threads", "1", "--device", "cpu", *options]


def run(args: list[str]) -> dict:
    done = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_SECONDS,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def recorded_lines(output: Path) -> int:
    """The input lines the record of `output` says its whole chunks hold (the record follows the synced chunk)."""
    try:
        return json.loads(record_of(output).read_bytes())["lines"]
    except (OSError, ValueError):  # not yet written (or being renamed over)
        return 0


def kill_after_two_chunks(args: list[str], lines: list[str], output: Path) -> None:
    """Run `args` on the first KILL_AFTER `lines` through a pipe that stays open, so that it translates two whole
    chunks and waits for the third; SIGKILL it there."""
    process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        process.stdin.write("".join(lines[:KILL_AFTER]).encode("utf-8"))
        process.stdin.flush()
        deadline = time.monotonic() + WAIT_SECONDS
        while not recorded_lines(output) >= 2 * CHUNK and time.monotonic() < deadline:
            assert process.poll() is None, "the run ended before it was killed"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(WAIT_SECONDS)
    assert count_lines(output) == 2 * CHUNK


def test_a_killed_run_resumed_ends_as_an_uninterrupted_run(corpus, tmp_path):
    checkpoint, source = corpus
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    whole = run(command(checkpoint, tmp_path / "whole.txt", "--input", str(source)))
    assert whole == {"output": str(tmp_path / "whole.txt"), "lines": len(lines), "translated": len(lines)}

    resumed = tmp_path / "resumed.txt"
    kill_after_two_chunks(command(checkpoint, resumed), lines, resumed)
    with open(resumed, "ab") as handle:  # as if killed in the middle of writing the third chunk
        handle.write(b"a complete line\npart of a li")
    summary = run(command(checkpoint, resumed, "--input", str(source), "--resume"))

    assert summary["lines"] == len(lines) and summary["translated"] == len(lines) - 2 * CHUNK
    assert resumed.read_bytes() == (tmp_path / "whole.txt").read_bytes()
    assert count_lines(resumed) == len(lines)


def test_count_lines_counts_a_last_line_without_newline(tmp_path):
    for text, count in ((b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"\n\n", 2)):
        (tmp_path / "f").write_bytes(text)
        assert count_lines(tmp_path / "f") == count


def test_output_file_holds_what_stdout_shows(corpus, tmp_path):
    checkpoint, source = corpus
    options = ["translate", "-m", str(checkpoint), "--input", str(source), "--beam", "2", "--threads", "1"]
    printed = nmtkit(*options)
    written = nmtkit(*options, "--output", str(tmp_path / "out.txt"))
    assert printed.exit_code == 0 and written.exit_code == 0, written.stderr
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == printed.stdout
    assert json.loads(written.stdout)["lines"] == count_lines(source)


def test_output_errors(corpus, tmp_path):
    checkpoint, source = corpus
    base = ["translate", "-m", str(checkpoint), "--input", str(source)]
    assert_error(nmtkit(*base, "--resume"), "--resume", "--output")
    (tmp_path / "out.txt").write_text("earlier work\n", encoding="utf-8")
    assert_error(nmtkit(*base, "--output", str(tmp_path / "out.txt")), "exists", "--resume")
    assert_error(nmtkit(*base, "--output", str(tmp_path / "out.txt"), "--resume", "--nbest", "2"), "--nbest")
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "earlier work\n"


def translate_into(checkpoint: Path, output: Path, source: Path, *options: str):
    return nmtkit("translate", "-m", str(checkpoint), "--input", str(source), "--output", str(output),
                  "--buffer-size", str(CHUNK), "--beam", "2", "--threads", "1", *options)


@pytest.fixture
def written(corpus, tmp_path) -> tuple[Path, Path, Path, bytes]:
    """(checkpoint, input, output, output's bytes): the whole input translated into an --output file."""
    checkpoint, source = corpus
    output = tmp_path / "out.txt"
    result = translate_into(checkpoint, output, source)
    assert result.exit_code == 0, result.stderr
    return checkpoint, source, output, output.read_bytes()


def test_an_output_onto_an_input_is_refused_and_the_input_kept(corpus, tmp_path):
    """Issue 63, finding 1: `-i in.txt -o in.txt --resume` cut the input to 0 bytes and exited 0."""
    checkpoint, source = corpus
    own = tmp_path / "in.txt"
    own.write_bytes(source.read_bytes())
    (tmp_path / "link.txt").symlink_to(own)
    os.link(own, tmp_path / "hard.txt")
    for output in (own, tmp_path / "link.txt", tmp_path / "hard.txt", checkpoint):
        for resume in ((), ("--resume",)):
            assert_error(translate_into(checkpoint, output, own, *resume), "refusing to write onto an input")
    record_of(tmp_path / "out.txt").write_bytes(source.read_bytes())
    assert_error(translate_into(checkpoint, tmp_path / "out.txt", record_of(tmp_path / "out.txt")),
                 "--output's record", "refusing to write onto an input")
    assert_error(translate_into(checkpoint, tmp_path / "missing" / "out.txt", tmp_path / "missing.txt"),
                 "cannot read", "missing.txt")
    assert own.read_bytes() == source.read_bytes() and checkpoint.stat().st_size > 0


def test_stdout_onto_the_input_is_refused(corpus, tmp_path):
    """`nmtkit translate -i in.txt >> in.txt` would read its own output forever."""
    checkpoint, source = corpus
    own = tmp_path / "in.txt"
    own.write_bytes(source.read_bytes())
    with open(own, "ab") as stdout:
        done = subprocess.run([sys.executable, "-m", "nmtkit", "translate", "-m", str(checkpoint), "-i", str(own)],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=WAIT_SECONDS)
    assert done.returncode == 1 and done.stderr.startswith("error: standard output is the file --input")
    assert own.read_bytes() == source.read_bytes()


def test_resume_refuses_another_input(written, tmp_path):
    """Issue 63, finding 2: resumed with another input, a 20-line output stood for a 10-line input."""
    checkpoint, source, output, before = written
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    other = tmp_path / "other.txt"
    for text in ("".join(lines[:10]), "".join(reversed(lines)), "".join(lines[:CHUNK]) + "changed\n" + "".join(
            lines[CHUNK + 1:])):
        other.write_text(text, encoding="utf-8")
        assert_error(translate_into(checkpoint, output, other, "--resume"), "the input is not the one", str(output))
        assert output.read_bytes() == before


def test_resume_refuses_other_settings_or_another_model(written, tmp_path, corpus):
    checkpoint, source, output, before = written
    payload = torch.load(checkpoint, weights_only=False)
    payload["model"] = {name: value + 1 for name, value in payload["model"].items()}
    torch.save(payload, tmp_path / "other.pt")
    for options, needle in ((("--buffer-size", "7"), "decode.buffer_size 10"), (("--beam", "3"), "decode.beam 2"),
                            (("--scores",), "scores false"), (("--max-len-b", "3"), "decode.max_len_b")):
        assert_error(translate_into(checkpoint, output, source, "--resume", *options), needle)
    assert_error(translate_into(tmp_path / "other.pt", output, source, "--resume"), "model files")
    assert output.read_bytes() == before


def test_resume_refuses_a_file_it_cannot_prove_it_wrote(written):
    checkpoint, source, output, before = written
    record = record_of(output)
    saved = record.read_bytes()
    record.unlink()
    assert_error(translate_into(checkpoint, output, source, "--resume"), "no record", "refusing to cut it")
    assert output.read_bytes() == before
    for damaged in (b"{", b"[]", b'{"settings": {}}', b"[" * 100_000, saved.replace(b'"bytes": ', b'"bytes": -')):
        record.write_bytes(damaged)
        assert_error(translate_into(checkpoint, output, source, "--resume"), "is not a record nmtkit wrote")
    record.write_bytes(saved)
    output.write_bytes(b"X" + before[1:])  # edited after nmtkit wrote it
    assert_error(translate_into(checkpoint, output, source, "--resume"), "changed since", "refusing to cut it")
    assert output.read_bytes() == b"X" + before[1:]
    output.write_bytes(before[:CHUNK])  # cut short by someone else
    assert_error(translate_into(checkpoint, output, source, "--resume"), "changed since")


def test_resume_of_a_finished_file_redoes_only_its_last_partial_chunk(written):
    checkpoint, source, output, before = written
    result = translate_into(checkpoint, output, source, "--resume")
    assert result.exit_code == 0, result.stderr
    lines = count_lines(source)
    assert json.loads(result.stdout) == {"output": str(output), "lines": lines, "translated": lines % CHUNK}
    assert output.read_bytes() == before
    assert json.loads(record_of(output).read_text())["lines"] == lines - lines % CHUNK


def test_translate_refuses_a_line_over_max_line_bytes(corpus, tmp_path):
    checkpoint, _ = corpus
    source = tmp_path / "in.txt"
    source.write_text("uno dos\n" + "tres " * 10 + "\n", encoding="utf-8")
    args = ["translate", "-m", str(checkpoint), "-i", str(source), "--beam", "1", "--threads", "1"]
    assert_error(nmtkit(*args, "--max-line-bytes", "49"), f"{source}:2: line longer than 49 bytes",
                 "--max-line-bytes")
    result = nmtkit(*args, "--max-line-bytes", "50")
    assert result.exit_code == 0 and result.stdout.count("\n") == 2


def test_a_full_disk_under_output_is_one_line_and_keeps_what_was_recorded(written, monkeypatch):
    checkpoint, source, output, before = written
    assert_error(translate_into(checkpoint, Path("/dev/full"), source), "No space left on device")
    calls, real_write = [], output_module.write_json_atomic

    def full_after_two(path, record):  # the fresh record and the first chunk's are written, then the disk is full
        calls.append(record["lines"])
        if len(calls) > 2:
            raise OSError(28, "No space left on device", str(path))
        real_write(path, record)

    monkeypatch.setattr(output_module, "write_json_atomic", full_after_two)
    output.unlink()
    assert_error(translate_into(checkpoint, output, source), "No space left on device")
    assert calls == [0, CHUNK, 2 * CHUNK] and json.loads(record_of(output).read_bytes())["lines"] == CHUNK
    monkeypatch.undo()
    result = translate_into(checkpoint, output, source, "--resume")
    assert result.exit_code == 0 and json.loads(result.stdout)["translated"] == count_lines(source) - CHUNK
    assert output.read_bytes() == before


def test_resume_continues_a_record_written_before_a_setting_existed(written, tmp_path):
    """A setting nmtkit gained since (here: MBR's, epsilon, --confidence), at its default, leaves the lines as they
    were: a record without it is continued; one that set it otherwise is refused."""
    checkpoint, source, output, before = written
    record = record_of(output)
    saved = json.loads(record.read_text(encoding="utf-8"))
    for key in ("decode.mbr", "decode.epsilon", "confidence"):
        del saved["settings"][key]
    record.write_text(json.dumps(saved), encoding="utf-8")
    assert_error(translate_into(checkpoint, output, source, "--resume", "--mbr", "2"), "decode.mbr null")
    assert output.read_bytes() == before
    result = translate_into(checkpoint, output, source, "--resume")
    assert result.exit_code == 0, result.stderr
    assert output.read_bytes().startswith(before)
