"""nmtkit/data/files.py: outputs never clobber inputs (by any path), files written whole or not at all, digests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from cli_runner import assert_error, nmtkit

from nmtkit.data.files import digest_prefix, overlaps, refuse_onto_inputs, sha256_of, write_atomic
from nmtkit.errors import NmtkitError


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
    with pytest.raises(OSError, match="No space"):
        write_atomic(source, b"new\n")
    assert source.read_bytes() == b"the input\n"
    assert [path.name for path in source.parent.iterdir()] == ["in.txt"]  # no temporary file left behind


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
    result = nmtkit("train", "--data", str(tmp_path), "--out", str(run), "--init-from", str(run / "model.pt"))
    assert_error(result, "--init-from", "refusing to write onto an input")
    assert (run / "model.pt").read_bytes() == b"the model to fine-tune"
