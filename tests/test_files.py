"""nmtkit/data/files.py: outputs never clobber inputs (by any path), files written whole or not at all, digests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import typer.main
from cli_runner import assert_error, nmtkit

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.cli import app
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.files import digest_prefix, overlaps, refuse_onto_inputs, sha256_of, write_atomic
from nmtkit.data.subword import train_subword
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "in.txt"
    path.write_bytes(b"the input\n")
    return path


def test_an_output_overlaps_its_input_by_any_path(source, tmp_path):
    (tmp_path / "link.txt").symlink_to(source)
    os.link(source, tmp_path / "hard.txt")
    (tmp_path / "sub").mkdir()
    for output in (source, tmp_path / "link.txt", tmp_path / "hard.txt", tmp_path / "sub" / ".." / "in.txt",
                   Path(os.path.relpath(source))):
        assert overlaps(output, source)
    assert overlaps(tmp_path / "sub" / "new.txt", tmp_path / "sub")  # inside an input directory
    assert overlaps(tmp_path / "dangling", tmp_path / "dangling")
    for output in (tmp_path / "out.txt", tmp_path / "sub"):
        assert not overlaps(output, source)


def test_refuse_onto_inputs_names_both_flags(source, tmp_path):
    with pytest.raises(NmtkitError, match=r"--out-src .*in.txt is --src .*in.txt or inside it: refusing"):
        refuse_onto_inputs([("--out-src", source)], [("--src", source)])
    refuse_onto_inputs([("--out", None), ("--out-src", tmp_path / "out.txt")], [("--src", source), ("--hyp", None)])


def test_write_atomic_leaves_the_old_file_when_the_write_fails(source, monkeypatch):
    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(NmtkitError, match="No space"):
        write_atomic(source, b"new\n")
    assert source.read_bytes() == b"the input\n"
    assert [path.name for path in source.parent.iterdir()] == ["in.txt"]  # no temporary file left behind


def test_a_file_written_whole_gets_a_new_files_permissions(tmp_path):
    """A temporary file is made 0o600; what replaces an output is readable as any file the user makes."""
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "out.txt", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644


def test_digests(source, tmp_path):
    digest = hashlib.sha256()
    assert digest_prefix(digest, source, 3) and digest.hexdigest() == hashlib.sha256(b"the").hexdigest()
    assert not digest_prefix(hashlib.sha256(), source, 100)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a").write_bytes(b"x")
    first = sha256_of([tmp_path / "dir"])
    (tmp_path / "dir" / "a").write_bytes(b"y")
    assert sha256_of([tmp_path / "dir"]) != first


def test_train_refuses_checkpoints_onto_its_init_from(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.pt").write_bytes(b"the model to fine-tune")
    result = nmtkit("train", "--data", str(tmp_path / "data"), "--out", str(run), "--init-from", str(run / "model.pt"))
    assert_error(result, "--init-from", "refusing to write onto an input")
    assert (run / "model.pt").read_bytes() == b"the model to fine-tune"


# Every option of the command line that names a file or directory a command writes. A new one fails
# test_every_output_option_is_tried until it is added here with a command line that points it at an input.
OUTPUTS = {("prepare", "--out"), ("train", "--out"), ("translate", "--output"), ("filter-distilled", "--out-src"),
           ("filter-distilled", "--out-tgt"), ("filter-distilled", "--report"), ("export", "--out"),
           ("align", "--output"), ("align", "--plot"), ("score-pairs", "--output"), ("score-pairs", "--out-src"),
           ("score-pairs", "--out-tgt"), ("score-pairs", "--out-removed"), ("robustness", "--out"),
           ("best-of", "--output"), ("import", "--out")}
OUTPUT_NAMES = ("--out", "--output", "--report", "--plot")


def test_every_output_option_is_tried():
    found = {(name, option.opts[0]) for name, command in typer.main.get_command(app).commands.items()
             for option in command.params if option.param_type_name == "option"
             and (option.opts[0] in OUTPUT_NAMES or option.opts[0].startswith("--out-"))}
    assert found == OUTPUTS


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A tiny corpus, its data directory, a checkpoint (untrained) and a teacher's scored output."""
    root = tmp_path_factory.mktemp("outputs")
    lines = ["uno dos tres", "cuatro cinco", "seis siete ocho", "nueve diez"] * 3
    paths = {"src": root / "src.txt", "tgt": root / "tgt.txt", "hyp": root / "hyp.txt", "model": root / "model.pt"}
    paths["src"].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    paths["tgt"].write_text("".join(line.upper() + "\n" for line in lines), encoding="utf-8")
    paths["hyp"].write_text("".join(f"{line.upper()} ||| -0.5\n" for line in lines), encoding="utf-8")
    subword = train_subword(lines + [line.upper() for line in lines], DataConfig(subword="word", vocab_size=30), 30)
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 40}})
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    save_atomic(make_payload(config, model, (subword, subword)), paths["model"])
    paths["data"] = root / "data"
    result = nmtkit("prepare", "--train-src", str(paths["src"]), "--train-tgt", str(paths["tgt"]), "--out",
                    str(paths["data"]), "--subword", "word", "--vocab-size", "30")
    assert result.exit_code == 0, result.stderr
    return paths


def output_cases(paths: dict[str, Path]) -> dict[tuple[str, str], list[list[str]]]:
    """For each output option, command lines that point it at one of the command's inputs."""
    src, tgt, hyp, model, data = (str(paths[key]) for key in ("src", "tgt", "hyp", "model", "data"))
    distill = ["filter-distilled", "--src", src, "--hyp", hyp, "--out-src", "{out-src}", "--out-tgt", "{out-tgt}"]
    align = ["align", "-m", model, "--src", src, "--tgt", tgt, "--threads", "1"]
    scores = ["score-pairs", "-m", model, "--reverse-model", model, "--src", src, "--tgt", tgt, "--threads", "1"]
    kept = ["--out-src", "{out-src}", "--out-tgt", "{out-tgt}"]
    return {
        ("prepare", "--out"): [["prepare", "--train-src", src, "--train-tgt", tgt, "--out", src],
                               ["prepare", "--train-src", f"{data}/train.src.txt", "--train-tgt", tgt, "--out", data,
                                "--overwrite"]],
        ("train", "--out"): [["train", "--data", data, "--out", str(Path(model).parent), "--init-from", model],
                             ["train", "--data", data, "--out", src, "--max-steps", "1"]],
        ("translate", "--output"): [["translate", "-m", model, "-i", src, "--output", target, *resume]
                                    for target in (src, model) for resume in ((), ("--resume",))],
        ("filter-distilled", "--out-src"): [[*distill, "--report", "{report}"]],
        ("filter-distilled", "--out-tgt"): [[*distill, "--report", "{report}"]],
        ("filter-distilled", "--report"): [[*distill, "--report", target] for target in (src, hyp)],
        ("export", "--out"): [["export", "-m", model, "--out", target] for target in (model, data)],
        ("align", "--output"): [[*align, "--output", target] for target in (src, tgt, model)],
        ("align", "--plot"): [[*align, "--plot", target] for target in (src, model)],
        ("score-pairs", "--output"): [[*scores, "--output", target] for target in (src, tgt, model)],
        ("score-pairs", "--out-src"): [[*scores, "--out-src", target, "--out-tgt", "{out-tgt}"]
                                       for target in (src, tgt, model)],
        ("score-pairs", "--out-tgt"): [[*scores, "--out-src", "{out-src}", "--out-tgt", target]
                                       for target in (src, tgt, model)],
        ("score-pairs", "--out-removed"): [[*scores, *kept, "--out-removed", target] for target in (src, tgt, model)],
        ("robustness", "--out"): [["robustness", "--src", src, "--ref", tgt, "--out", target] for target in (src, tgt)],
        ("best-of", "--output"): [["best-of", "--nbest", hyp, "--ref", tgt, "--output", target]
                                  for target in (hyp, tgt)],
        ("import", "--out"): [["import", data, "--out", target] for target in (data, f"{data}/inside")],
    }


@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_an_output_onto_an_input_is_refused(files, tmp_path, output):
    """STYLE rule 17: a command never writes onto one of its own inputs, whatever the path (here: the input's own;
    links are tried in tests/test_translate_output.py and above)."""
    before = {path: path.read_bytes() for path in files["src"].parent.rglob("*") if path.is_file()}
    _, flag = output
    for args in output_cases(files)[output]:
        targets = {"{out-src}": str(tmp_path / "kept.src"), "{out-tgt}": str(tmp_path / "kept.tgt"),
                   "{report}": str(tmp_path / "report.json"), f"{{{flag[2:]}}}": str(files["hyp"])}
        result = nmtkit(*[targets.get(arg, arg) for arg in args])
        assert result.exit_code != 0 and "Traceback" not in result.stderr, (args, result.stdout)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert {path: path.read_bytes() for path in before} == before, args
