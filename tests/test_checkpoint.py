"""Tests for nmtkit/checkpoint/payload.py: self-contained payloads, atomic writes and clear errors on bad files."""

from __future__ import annotations

import os
import random
import re
import time

import pytest
import torch

import nmtkit.checkpoint.payload as checkpoint
from nmtkit.checkpoint.payload import FORMAT, load_checkpoint, make_payload, restore_model, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS, train_subword
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model

WORDS = "the a cat dog sees eats runs big small red fish bird tree house".split()
TINY_MODEL = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32, "max_positions": 64}


@pytest.fixture(scope="module")
def subword():
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(50)]
    return train_subword(lines, DataConfig(subword="word", vocab_size=30), 30)


@pytest.fixture
def trained(subword):
    """A config, a tiny model with non-default weights, and the subword model."""
    config = build_config({"model": TINY_MODEL, "train": {"lr": 3e-4}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    return config, model, subword


def outputs(model, subword) -> torch.Tensor:
    src, src_mask = encode_sources(subword.encode(["the big cat", "a small red fish eats"]))
    tgt_in = pad_sequences(subword.encode(["a dog", "the bird runs"]), [BOS], [])
    with torch.no_grad():
        return model(src, src_mask, tgt_in)[0]


def test_round_trip_restores_config_subwords_and_outputs(tmp_path, trained):
    config, model, subword = trained
    path = tmp_path / "run" / "model.pt"
    save_atomic(make_payload(config, model, (subword, subword), {"step": 7}), path)
    payload = load_checkpoint(path)
    assert payload["format"] == FORMAT
    assert payload["train_state"] == {"step": 7}
    loaded = restore_model(payload, torch.device("cpu"))
    assert loaded.config == config
    assert loaded.src_subword is loaded.tgt_subword
    assert loaded.src_subword.proto == subword.proto
    assert loaded.src_subword.encode(["the cat"]) == subword.encode(["the cat"])
    assert not loaded.model.training
    torch.testing.assert_close(outputs(loaded.model, loaded.src_subword), outputs(model, subword), rtol=0, atol=0)


def test_languages_are_recorded_and_older_checkpoints_without_them_still_load(tmp_path, trained):
    config = trained[0]
    nfkc = train_subword(["ﬁle … the cat", "the dog"] * 20, DataConfig(vocab_size=30, normalization="nmt_nfkc"), 30)
    model = build_model(config.model, nfkc.vocab_size, nfkc.vocab_size, True)
    payload = make_payload(config, model, (nfkc, nfkc), langs=("es", "zh"))
    assert restore_model(payload, torch.device("cpu")).langs == ("es", "zh")
    del payload["langs"]  # as nmtkit wrote them before it kept languages (and trained SentencePiece with NFKC)
    loaded = restore_model(payload, torch.device("cpu"))
    assert loaded.langs == (None, None) and loaded.tgt_subword.settings["normalization"] == "nmt_nfkc"
    assert loaded.tgt_subword.decode(loaded.tgt_subword.encode(["ﬁle …"])) == ["file ..."]


def test_separate_subword_models_stay_separate(tmp_path, trained):
    config, _, src_subword = trained
    tgt_subword = train_subword(WORDS, DataConfig(subword="char"), 30)
    assert tgt_subword.vocab_size != src_subword.vocab_size
    model = build_model(config.model, src_subword.vocab_size, tgt_subword.vocab_size, False)
    path = tmp_path / "model.pt"
    save_atomic(make_payload(config, model, (src_subword, tgt_subword)), path)
    loaded = restore_model(load_checkpoint(path), torch.device("cpu"))
    assert loaded.src_subword.proto == src_subword.proto
    assert loaded.tgt_subword.proto == tgt_subword.proto
    assert loaded.model.src_embed is not loaded.model.tgt_embed


def test_save_atomic_leaves_no_temporary_files(tmp_path, trained):
    config, model, subword = trained
    path = tmp_path / "last.pt"
    save_atomic(make_payload(config, model, (subword, subword)), path)
    save_atomic(make_payload(config, model, (subword, subword)), path)  # overwriting works too
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(NmtkitError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")


def test_truncated_checkpoint_is_an_error(tmp_path, trained):
    config, model, subword = trained
    path = tmp_path / "model.pt"
    save_atomic(make_payload(config, model, (subword, subword)), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(NmtkitError, match="corrupted or truncated"):
        load_checkpoint(path)


# Files a user may pass by mistake: corpus text, a config, random bytes (two seeds take different paths
# through torch's legacy pickle reader).
NOT_CHECKPOINTS = {
    "random_seed0": random.Random(0).randbytes(4096),
    "random_seed2": random.Random(2).randbytes(4096),
    "yaml": b"model:\n  d_model: 16\n",
    "text_hello": b"hello world\n",
    "text_english": b"the cat sat on the mat\n",
}


@pytest.mark.parametrize("content", NOT_CHECKPOINTS.values(), ids=NOT_CHECKPOINTS.keys())
def test_a_file_that_is_not_a_checkpoint_is_an_error(tmp_path, content):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(NmtkitError, match=str(path)):
        load_checkpoint(path)


def test_foreign_payload_is_an_error(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(2)}, path)
    with pytest.raises(NmtkitError, match="not an nmtkit checkpoint"):
        load_checkpoint(path)


def test_unknown_format_is_an_error_naming_it(tmp_path, trained):
    config, model, subword = trained
    payload = make_payload(config, model, (subword, subword))
    payload["format"] = 999
    path = tmp_path / "future.pt"
    save_atomic(payload, path)
    with pytest.raises(NmtkitError, match="format 999"):
        load_checkpoint(path)


def test_weights_that_do_not_match_the_config_are_an_error(tmp_path, trained):
    config, model, subword = trained
    payload = make_payload(config, model, (subword, subword))
    payload["config"]["model"]["d_model"] = 32
    with pytest.raises(NmtkitError, match="do not match"):
        restore_model(payload, torch.device("cpu"))


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, trained, monkeypatch):
    config, model, subword = trained
    path = tmp_path / "last.pt"
    save_atomic(make_payload(config, model, (subword, subword), {"step": 1}), path)
    before = path.read_bytes()

    def write_half_then_fail(payload, handle):
        handle.write(before[: len(before) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", write_half_then_fail)
    with pytest.raises(NmtkitError, match=f"cannot write checkpoint {path}: No space left on device; the one there"):
        save_atomic(make_payload(config, model, (subword, subword), {"step": 2}), path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]
    monkeypatch.undo()
    assert load_checkpoint(path)["train_state"] == {"step": 1}


def test_average_checkpoints_is_the_elementwise_mean(tmp_path, trained):
    config, model, subword = trained
    torch.manual_seed(5)
    other = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    for name, weights in (("checkpoint_100.pt", model), ("checkpoint_20.pt", other)):
        save_atomic(make_payload(config, weights, (subword, subword)), tmp_path / name)
    (tmp_path / "checkpoint_x.pt").write_bytes(b"not a step checkpoint")
    assert checkpoint.step_checkpoints(tmp_path) == [tmp_path / "checkpoint_20.pt", tmp_path / "checkpoint_100.pt"]
    averaged = checkpoint.average_checkpoints(checkpoint.step_checkpoints(tmp_path))
    for name, value in averaged["model"].items():
        expected = (model.state_dict()[name].double() + other.state_dict()[name].double()) / 2
        torch.testing.assert_close(value, expected.float())
    assert averaged["train_state"] is None
    restore_model(averaged, torch.device("cpu"))


def test_average_rejects_checkpoints_of_different_models(tmp_path, trained):
    config, model, subword = trained
    bigger = build_config({"model": {**TINY_MODEL, "ffn": 64}})
    save_atomic(make_payload(config, model, (subword, subword)), tmp_path / "a.pt")
    wide = build_model(bigger.model, subword.vocab_size, subword.vocab_size, True)
    save_atomic(make_payload(bigger, wide, (subword, subword)), tmp_path / "b.pt")
    with pytest.raises(NmtkitError, match="same model"):
        checkpoint.average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])


def test_truncate_metrics_drops_records_after_the_step_and_a_cut_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 10, "a": 1}\n{"step": 20}\n{"step": 30}\n{"step": 4', encoding="utf-8")
    checkpoint.truncate_metrics(path, 20)
    assert path.read_text() == '{"step": 10, "a": 1}\n{"step": 20}\n'
    checkpoint.truncate_metrics(tmp_path / "absent.jsonl", 5)  # nothing to do
    assert not (tmp_path / "absent.jsonl").exists()


def test_a_full_disk_under_torch_save_is_one_line_naming_the_reason(tmp_path, trained, monkeypatch):
    """torch.save turns a failed write into a RuntimeError that no longer says why (`unexpected pos`): a traceback
    through `train` before. Here the kernel refuses the writes (/dev/full: ENOSPC) as a full disk does."""
    config, model, subword = trained
    path = tmp_path / "last.pt"
    save_atomic(make_payload(config, model, (subword, subword), {"step": 1}), path)
    before = path.read_bytes()

    def full_disk(handle, *args, **kwargs):
        os.close(handle)
        return open("/dev/full", *args, **kwargs)

    monkeypatch.setattr(checkpoint.os, "fdopen", full_disk)
    with pytest.raises(NmtkitError, match="No space left on device; the one there is kept"):
        save_atomic(make_payload(config, model, (subword, subword), {"step": 2}), path)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["last.pt"]
    with pytest.raises(NmtkitError, match="nothing was written"):
        save_atomic(make_payload(config, model, (subword, subword)), tmp_path / "model.pt")
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]


@pytest.mark.parametrize(("model_change", "needle"), [
    ({"d_model": 1 << 40}, "builds no model"),  # a traceback before: torch could not size it
    ({"d_model": 1 << 20}, "decoder.0.blocks.0.norm.bias is (16,) in the file, (1048576,) by its config"),
    ({"ffn": 1 << 30}, "do not match its config"),
    ({"encoder_layers": 10**6}, "1000001 layers by its config, 49 weights in the file"),
    ({"max_positions": 1 << 30}, "17179869184 elements beyond its weights"),
    ({"heads": 0}, "builds no model (ZeroDivisionError"),
    ({"ffn": -5}, "builds no model"),
    ({"positions": "learned"}, "positions.table is missing in the file"),
])
def test_a_config_that_asks_for_more_than_its_weights_is_refused_before_allocating(trained, model_change, needle):
    """A checkpoint is a file a user may be handed: its config is compared with the weights it holds on a model
    without memory (the meta device), so a config asking for a d_model of 2^20 (a 4 TB layer) or a million layers
    costs milliseconds, not the machine."""
    config, model, subword = trained
    payload = make_payload(config, model, (subword, subword))
    payload["config"]["model"].update(model_change)
    started = time.process_time()
    with pytest.raises(NmtkitError) as error:
        restore_model(payload, torch.device("cpu"))
    assert needle in str(error.value) and "\n" not in str(error.value)
    assert time.process_time() - started < 5


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda payload: payload.pop("model"), "damaged (no weights)"),
    (lambda payload: payload.update(config="transformer"), "damaged (no config)"),
    (lambda payload: payload["subword"].update(src="a string"), "damaged (no subword models)"),
    (lambda payload: payload["model"].update(extra=[1, 2]), "damaged (no weights)"),
])
def test_a_payload_missing_its_parts_is_an_error(tmp_path, trained, damage, needle):
    config, model, subword = trained
    payload = make_payload(config, model, (subword, subword))
    damage(payload)
    torch.save(payload, tmp_path / "damaged.pt")
    with pytest.raises(NmtkitError, match=re.escape(needle)):
        load_checkpoint(tmp_path / "damaged.pt")


def test_damaged_subword_bytes_and_tags_beyond_the_vocabulary_are_errors(trained):
    config, model, subword = trained
    payload = make_payload(config, model, (subword, subword), tags={"de": subword.vocab_size + 5})
    with pytest.raises(NmtkitError, match="its language tags are not ids of its vocabulary"):
        restore_model(payload, torch.device("cpu"))
    payload = make_payload(config, model, (subword, subword))
    payload["subword"]["src"] = b"not a model"
    with pytest.raises(NmtkitError, match="subword model is damaged"):
        restore_model(payload, torch.device("cpu"))
