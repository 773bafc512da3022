"""Fine-tuning: prepare new data in a trained model's vocabulary, start from its weights, and clear errors when the
vocabulary or the architecture does not fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from training_runs import copy_task
from typer.testing import CliRunner

from nmtkit.checkpoint.payload import load_checkpoint, save_atomic
from nmtkit.cli import app
from nmtkit.config.files import apply_overrides
from nmtkit.config.run import build_config
from nmtkit.data.command import vocabulary_of
from nmtkit.errors import NmtkitError
from nmtkit.training.command import train_command
from nmtkit.training.config import completed
from nmtkit.training.finetune import layer_maps, model_differences, spread
from nmtkit.training.loop import Trainer, train

MODEL = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32}


def config(model: dict | None = None, **train_settings):
    train_section = {"batch_tokens": 256, "warmup": 10, "log_every": 5, "threads": 1, "amp": "none",
                     "valid_every": 10, "valid_bleu": False, "device": "cpu", **train_settings}
    return completed(build_config({"model": {**MODEL, **(model or {})}, "train": train_section}))


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    """A run of 10 updates on the copy task (model.pt, last.pt)."""
    root = tmp_path_factory.mktemp("parent")
    train(config(max_steps=10), copy_task(root), root / "run")
    return root


def new_data(root: Path, *args: str) -> Path:
    """Other sentences over the same letters, prepared through the CLI with the given options, in `root`/new."""
    root.mkdir(exist_ok=True)
    for name in ("train", "dev"):
        for side in ("src", "tgt"):
            (root / f"new.{name}.{side}").write_text("".join(f"{a} {b} {a}\n" for a in "abcd" for b in "efgh"))
    result = CliRunner().invoke(app, ["prepare", "--out", str(root / "new"), *args,
                                      *[f"--{name}-{side}={root / f'new.{name}.{side}'}" for name in ("train", "dev")
                                        for side in ("src", "tgt")]])
    assert result.exit_code == 0, result.output
    return root / "new"


def test_model_differences_ignore_dropout():
    saved = {"name": "transformer", "d_model": 16, "dropout": 0.1, "heads": 2}
    assert model_differences(saved, {**saved, "dropout": 0.3}) == []
    assert model_differences(saved, {**saved, "activation_dropout": 0.0, "attention_dropout": 0.1}) == []
    assert model_differences(saved, {**saved, "d_model": 32}) == ["d_model: 16 -> 32"]


def test_prepare_reuses_the_vocabulary_and_training_starts_from_the_weights(parent: Path, tmp_path: Path):
    data = new_data(tmp_path, "--subword-model", str(parent / "run" / "model.pt"))
    payload = load_checkpoint(parent / "run" / "model.pt")
    assert (data / "spm.model").read_bytes() == payload["subword"]["src"]
    assert json.loads((data / "manifest.json").read_text())["subword"]["reused"] is True
    trainer = Trainer(config({"dropout": 0.3}, init_from=str(parent / "run" / "model.pt")), data, tmp_path / "child")
    trainer.checkpoints.initialize_from(trainer.config.train.init_from)
    assert all(torch.equal(value, payload["model"][name]) for name, value in trainer.setup.model.state_dict().items())
    assert trainer.progress.step == 0 and trainer.updater.scheduler.last_epoch == 0  # a fresh schedule
    summary = train(config(init_from=str(parent / "run" / "model.pt"), max_steps=5), data, tmp_path / "tuned")
    assert summary["steps"] == 5


def test_init_optimizer_continues_the_optimizer_and_schedule(parent: Path, tmp_path: Path):
    data = new_data(tmp_path, "--subword-model", str(parent / "run" / "last.pt"))
    last = str(parent / "run" / "last.pt")
    trainer = Trainer(config(init_from=last, init_optimizer=True), data, tmp_path / "child")
    trainer.checkpoints.initialize_from(last)
    saved = load_checkpoint(last)["train_state"]
    assert trainer.updater.scheduler.last_epoch == saved["scheduler"]["last_epoch"] == 10
    assert trainer.updater.optimizer.state_dict()["state"][0]["step"] == saved["optimizer"]["state"][0]["step"]
    model_only = Trainer(config(init_from=str(parent / "run" / "model.pt"), init_optimizer=True), data, tmp_path / "x")
    with pytest.raises(NmtkitError, match="no optimizer state"):
        model_only.checkpoints.initialize_from(str(parent / "run" / "model.pt"))


def one_line_error(args: list[str], *needles: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(needle in errors[0] for needle in needles), result.output


def test_another_vocabulary_or_architecture_is_a_one_line_error(parent: Path, tmp_path: Path):
    model = str(parent / "run" / "model.pt")
    own_vocabulary = new_data(tmp_path, "--subword", "word", "--vocab-size", "20")
    one_line_error(["train", "--data", str(own_vocabulary), "--out", str(tmp_path / "a"), "--init-from", model],
                   "other subword vocabularies", "--subword-model")
    same_vocabulary = new_data(tmp_path / "same", "--subword-model", model)
    one_line_error(["train", "--data", str(same_vocabulary), "--out", str(tmp_path / "b"), "--init-from", model,
                    "--set", "model.d_model=32", "--set", "train.max_steps=1"], "d_model: 16 -> 32")


def test_vocabulary_of_a_file_that_is_no_model_is_an_error(tmp_path: Path):
    (tmp_path / "x.model").write_bytes(b"not a model")
    with pytest.raises(NmtkitError, match="not a SentencePiece model"):
        vocabulary_of(tmp_path / "x.model")


def test_fine_tuning_reads_its_checkpoint_once(parent: Path, tmp_path: Path, monkeypatch):
    """For the model section it takes (no --config) and for its weights: one read."""
    model = parent / "run" / "model.pt"
    data = new_data(tmp_path, "--subword-model", str(model))
    reads, load = [], torch.load
    monkeypatch.setattr(torch, "load", lambda path, *args, **kwargs: reads.append(Path(path)) or load(path, *args,
                                                                                                       **kwargs))
    overrides = ["train.batch_tokens=256", "train.valid_bleu=false", "train.amp=none"]
    summary = train_command(data, tmp_path / "tuned", None, None, overrides, init_from=str(model), max_steps=2,
                            device="cpu", threads=1)
    assert summary["steps"] == 2 and reads.count(model) == 1


def test_spread_keeps_the_first_and_last_layer_and_repeats_when_deeper():
    assert spread(3, 1) == [0] and spread(6, 2) == [0, 5] and spread(6, 3) == [0, 2, 5] and spread(12, 3) == [0, 6, 11]
    assert spread(3, 3) == [0, 1, 2] and spread(3, 6) == [0, 0, 1, 1, 2, 2]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    """A 2+3-layer run of 2 updates on the copy task, and new data in its vocabulary: (checkpoint, data)."""
    root = tmp_path_factory.mktemp("teacher")
    train(config({"encoder_layers": 2, "decoder_layers": 3}, max_steps=2), copy_task(root), root / "run")
    return root / "run" / "model.pt"


@pytest.mark.parametrize("rule, decoder_layer", [("spread", 0), ("decoder:2", 2)])
def test_a_shallower_student_starts_from_the_teachers_layers(teacher: Path, tmp_path: Path, rule, decoder_layer):
    data = new_data(tmp_path, "--subword-model", str(teacher))
    trainer = Trainer(config({"encoder_layers": 2, "decoder_layers": 1}, init_from=str(teacher), init_layers=rule),
                      data, tmp_path / "student")
    trainer.checkpoints.initialize_from(str(teacher))
    saved, student = load_checkpoint(teacher)["model"], trainer.setup.model.state_dict()
    assert student.keys() == {name for name in saved if not name.startswith(("decoder.1.", "decoder.2."))}
    for name, value in student.items():
        source = name.replace("decoder.0.", f"decoder.{decoder_layer}.")
        assert torch.equal(value, saved[source]), name


def test_student_depths_are_errors_without_init_layers_and_with_a_wrong_map(teacher: Path, tmp_path: Path):
    data = new_data(tmp_path, "--subword-model", str(teacher))
    base = ["train", "--data", str(data), "--init-from", str(teacher), "--set", "model.encoder_layers=2",
            "--set", "model.d_model=16", "--set", "model.heads=2", "--set", "model.ffn=32",
            "--set", "model.decoder_layers=1", "--set", "train.max_steps=1", "--set", "train.valid_bleu=false"]
    one_line_error([*base, "--out", str(tmp_path / "a")], "decoder_layers: 3 -> 1", "train.init_layers=spread")
    one_line_error([*base, "--out", str(tmp_path / "b"), "--set", "train.init_layers=decoder:3"],
                   "decoder needs 1 layer(s) of the checkpoint's 3 (0-2), got 3")
    one_line_error([*base, "--out", str(tmp_path / "c"), "--set", "train.init_layers=middle"],
                   "'middle' is not spread")
    result = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "d"), "--set", "train.init_layers=spread",
                                      "--set", "train.amp=none", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert load_checkpoint(tmp_path / "d" / "model.pt")["config"]["model"]["decoder_layers"] == 1


def test_a_student_of_other_depths_cannot_continue_the_teachers_optimizer(teacher: Path, tmp_path: Path):
    data = new_data(tmp_path, "--subword-model", str(teacher))
    trainer = Trainer(config({"encoder_layers": 2, "decoder_layers": 1}, init_from=str(teacher), init_layers="spread",
                             init_optimizer=True), data, tmp_path / "student")
    with pytest.raises(NmtkitError, match="leave train.init_optimizer out"):
        trainer.checkpoints.initialize_from(str(teacher))


def test_init_layers_without_a_checkpoint_is_an_error():
    with pytest.raises(NmtkitError, match="give --init-from"):
        config(init_layers="spread")


@pytest.mark.parametrize(("rule", "needle"), [
    ("encoder:-1,0", "'encoder:-1,0' is not spread or STACK:LAYERS"),
    ("encoder:0,3", "encoder needs 2 layer(s) of the checkpoint's 3 (0-2), got 0,3"),
    ("encoder:0,99999999999999999999", "got 0,99999999999999999999"),
    ("encoder:0", "encoder needs 2 layer(s)"),
    ("encoder:0,1 encoder:1,2", "each stack once"),
    (" ", "' ' is not spread"),
    ("encoder:0;1", "is not spread"),
    ("encoder:٠,١", "is not spread"),  # digits of another script are not layer numbers
])
def test_bad_layer_maps_are_one_line_errors(rule, needle):
    teacher, student = {"encoder_layers": 3, "decoder_layers": 3}, {"encoder_layers": 2, "decoder_layers": 1}
    with pytest.raises(NmtkitError) as error:
        layer_maps(rule, teacher, student)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_a_repeated_teacher_layer_is_a_choice_and_a_checkpoint_without_depths_an_error():
    """A deeper student repeats layers (spread does too), so naming a teacher layer twice is allowed."""
    teacher, student = {"encoder_layers": 3, "decoder_layers": 3}, {"encoder_layers": 2, "decoder_layers": 1}
    assert layer_maps("encoder:1,1", teacher, student) == {"encoder": [1, 1], "decoder": [0]}
    with pytest.raises(NmtkitError, match="the checkpoint's model settings give no encoder_layers"):
        layer_maps("spread", {"decoder_layers": 3}, student)


@pytest.mark.parametrize("value", ["5", "[0, 1]", "{encoder: 1}"])
def test_init_layers_of_another_type_is_a_one_line_error(value):
    with pytest.raises(NmtkitError, match="train.init_layers"):
        completed(build_config(apply_overrides({"train": {"init_from": "x.pt"}}, [f"train.init_layers={value}"])))


def test_a_checkpoint_whose_config_asks_for_more_than_its_weights_is_refused_before_a_run_builds_it(parent: Path,
                                                                                                    tmp_path: Path):
    """A fine-tuning run without a model section builds the checkpoint's architecture: a config naming a d_model of
    2^20 over weights of 16 would have allocated terabytes; it is compared with the weights first."""
    payload = load_checkpoint(parent / "run" / "model.pt")
    payload["config"]["model"]["d_model"] = 1 << 20
    save_atomic(payload, tmp_path / "hostile.pt")
    result = CliRunner().invoke(app, ["--quiet", "train", "--data", str(tmp_path / "no-data"), "--out",
                                      str(tmp_path / "run"), "--init-from", str(tmp_path / "hostile.pt")])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    assert "hostile.pt: checkpoint weights do not match its config" in errors[0]


def test_a_checkpoint_from_before_a_model_setting_existed_fine_tunes_with_its_default(parent: Path, tmp_path: Path):
    """A checkpoint whose config lacks settings added since (here the Transformer's import settings) is the model
    of their defaults: fine-tuning it finds no other architecture."""
    payload = load_checkpoint(parent / "run" / "model.pt")
    added = ("scale_embeddings", "position_offset", "output_bias", "suppress_pad", "language_tags", "source_token")
    payload["config"]["model"] = {key: value for key, value in payload["config"]["model"].items() if key not in added}
    older = tmp_path / "older.pt"
    save_atomic(payload, older)
    data = new_data(tmp_path, "--subword-model", str(older))
    child = config(init_from=str(older), max_steps=2)
    assert train(child, data, tmp_path / "tuned")["steps"] == 2
