"""An exported directory a user is handed (nmtkit/translate/exported.py): its nmtkit.json names the files nmtkit reads
(the subword models); a name outside the directory, a link out of it, something that is not a file, a file far too
large, tags beyond the vocabulary or a damaged manifest is a one-line error, and nothing outside is read. These need
no CTranslate2 model: nmtkit.json and the subword models are read before CTranslate2 loads its own files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_runner import assert_error, nmtkit

from nmtkit.config.sections import DataConfig
from nmtkit.data.lines import SMALL_FILE_BYTES
from nmtkit.data.subword import train_subword
from nmtkit.errors import NmtkitError
from nmtkit.translate.exported import load_exported


@pytest.fixture(scope="module")
def proto() -> bytes:
    return train_subword(["a b c d e f g h"] * 20, DataConfig(subword="word", vocab_size=14), 14).proto


def export_dir(root: Path, proto: bytes, **changes) -> Path:
    """A directory with the nmtkit.json and source.spm that `nmtkit export` writes (no CTranslate2 files)."""
    directory = root / "ct2"
    directory.mkdir(exist_ok=True)
    (directory / "source.spm").write_bytes(proto)
    info = {"format": 1, "subword": {"src": "source.spm", "tgt": "source.spm", "joint": True},
            "config": {"model": {"max_positions": 64}, "decode": {}}, "langs": {"src": "xx", "tgt": "yy", "tags": {}},
            "quantization": "float32"}
    for key, value in changes.items():
        info[key] = value
    (directory / "nmtkit.json").write_text(json.dumps(info), encoding="utf-8")
    return directory


def test_a_plain_export_loads(tmp_path, proto):
    assert load_exported(export_dir(tmp_path, proto)).src_subword.proto == proto


def test_language_tags_read_in_the_decoder_name_the_source_token_and_a_manifest_without_them_has_none(tmp_path, proto):
    """An M2M100 or NLLB export's record (nmtkit/export/ctranslate2.py), in a manifest of format 2, which an nmtkit
    that would ignore the record refuses; manifests of format 1 lack it: the decoder starts with BOS."""
    assert load_exported(export_dir(tmp_path, proto)).source_token is None
    record = {"where": "decoder", "decoder_start": 3, "source_token": 4}
    tagged = export_dir(tmp_path, proto, format=2, langs={"tags": {"de": 5}}, language_tags=record)
    assert load_exported(tagged).source_token == 4


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "..", "", "sub/source.spm", 7, None])
def test_a_subword_model_named_outside_the_directory_is_refused(tmp_path, proto, name):
    """`../../etc/passwd` was read and handed to SentencePiece (a traceback); now no such name is opened."""
    directory = export_dir(tmp_path, proto, subword={"src": name, "tgt": name, "joint": True})
    with pytest.raises(NmtkitError, match="as its subword model, not a file of"):
        load_exported(directory)
    assert_error(nmtkit("translate", "-m", str(directory), stdin="a b\n"), "nmtkit.json names")


@pytest.mark.parametrize("kind", ["symlink-out", "directory", "fifo", "missing"])
def test_a_subword_file_that_links_out_or_is_not_a_file_is_refused(tmp_path, proto, kind):
    directory = export_dir(tmp_path, proto)
    spm = directory / "source.spm"
    spm.unlink()
    outside = tmp_path / "outside.spm"
    outside.write_bytes(proto)
    if kind == "symlink-out":
        spm.symlink_to(outside)
    elif kind == "directory":
        spm.mkdir()
    elif kind == "fifo":
        os.mkfifo(spm)  # reading it would wait forever
    needle = "is missing" if kind == "missing" else "is not a file of the directory"
    with pytest.raises(NmtkitError, match=needle):
        load_exported(directory)


def test_a_link_inside_the_directory_is_a_file_of_it(tmp_path, proto):
    directory = export_dir(tmp_path, proto, subword={"src": "alias.spm", "tgt": "alias.spm", "joint": True})
    (directory / "alias.spm").symlink_to(directory / "source.spm")
    assert load_exported(directory).src_subword.proto == proto


def test_a_manifest_that_links_out_is_refused(tmp_path, proto):
    directory = export_dir(tmp_path, proto)
    (directory / "nmtkit.json").rename(tmp_path / "elsewhere.json")
    (directory / "nmtkit.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(NmtkitError, match="its manifest nmtkit.json is not a file of the directory"):
        load_exported(directory)


def test_files_far_larger_than_any_export_are_read_no_further_than_the_bound(tmp_path, proto, monkeypatch):
    monkeypatch.setitem(SMALL_FILE_BYTES, "subword model", len(proto) - 1)
    with pytest.raises(NmtkitError, match=f"source.spm is over {len(proto) - 1} bytes"):
        load_exported(export_dir(tmp_path, proto))
    monkeypatch.setitem(SMALL_FILE_BYTES, "manifest", 10)
    with pytest.raises(NmtkitError, match="nmtkit.json is over 10 bytes"):
        load_exported(export_dir(tmp_path, proto))


@pytest.mark.parametrize(("changes", "needle"), [
    ({"langs": {"tags": {"de": 14}}}, "its language tags are not ids of its vocabulary"),
    ({"langs": {"tags": {"de": -1}}}, "its language tags are not ids"),
    ({"langs": {"tags": ["de"]}}, "its language tags are not ids"),
    ({"config": {"model": {"max_positions": 0}}}, "max_positions 0"),
    ({"config": {"model": {"max_positions": "many"}}}, "damaged export (ValueError"),
    ({"config": {"model": {}}}, "damaged export (KeyError"),
    ({"format": 3}, "has format 3"),
    ({"format": "9" * 10**5}, "has format 99999999999999999999;"),
    ({"format": 2}, "damaged export (format 2 without language_tags"),
    ({"format": 1, "langs": {"tags": {"de": 5}}, "language_tags": {"where": "decoder", "decoder_start": 3,
                                                                   "source_token": 4}},
     "damaged export (format 1 with language_tags"),
    ({"subword": "source.spm"}, "damaged export (TypeError"),
    *[({"format": 2, **changes}, "its language_tags") for changes in (
        {"langs": {"tags": {"de": 5}}, "language_tags": {"where": "decoder", "decoder_start": 3, "source_token": 14}},
        {"langs": {"tags": {"de": 5}}, "language_tags": {"where": "decoder", "decoder_start": 3, "source_token": -1}},
        {"langs": {"tags": {"de": 5}}, "language_tags": {"where": "decoder", "decoder_start": 3, "source_token": True}},
        {"langs": {"tags": {"de": 5}}, "language_tags": {"where": "decoder", "decoder_start": 2, "source_token": 4}},
        {"langs": {"tags": {"de": 5}}, "language_tags": {"where": "source", "decoder_start": 3, "source_token": 4}},
        {"langs": {"tags": {"de": 5}}, "language_tags": {"where": "decoder", "decoder_start": 3, "source_token": 4,
                                                         "more": 1}},
        {"langs": {"tags": {"de": 5}}, "language_tags": "decoder"},
        {"langs": {"tags": {"de": 5}}, "language_tags": ["x" * 10**6]},
        {"langs": {"tags": {}}, "language_tags": {"where": "decoder", "decoder_start": 3, "source_token": 4}})],
])
def test_a_damaged_manifest_is_a_one_line_error(tmp_path, proto, changes, needle):
    with pytest.raises(NmtkitError, match=needle.replace("(", r"\(")):
        load_exported(export_dir(tmp_path, proto, **changes))


def test_a_manifest_that_is_not_json_or_not_an_object_is_an_error(tmp_path, proto):
    directory = export_dir(tmp_path, proto)
    (directory / "nmtkit.json").write_bytes(b"\xff not json")
    with pytest.raises(NmtkitError, match="nmtkit.json is damaged"):
        load_exported(directory)
    (directory / "nmtkit.json").write_text("[1, 2]")
    with pytest.raises(NmtkitError, match="has format None"):
        load_exported(directory)
    (directory / "source.spm").write_bytes(b"not a model")
    (directory / "nmtkit.json").unlink()
    export_dir(tmp_path, b"not a model")
    with pytest.raises(NmtkitError, match="source.spm is not a SentencePiece model"):
        load_exported(directory)


def test_a_ctranslate2_file_that_is_a_device_is_refused_before_ctranslate2_reads_it(tmp_path, proto):
    directory = export_dir(tmp_path, proto)
    (directory / "model.bin").symlink_to("/dev/zero")
    assert_error(nmtkit("translate", "-m", str(directory), stdin="a b\n"), "model.bin is not a file")
