"""Width pruning (train.init_width=prune): a narrower Transformer starts from a wider one's channels, whole heads
and strongest feed-forward neurons; position table and embedding scale stay exact; clear errors otherwise."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
from training_runs import copy_task
from typer.testing import CliRunner

from nmtkit.checkpoint.payload import load_checkpoint
from nmtkit.cli import app
from nmtkit.config.run import build_config
from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import Transformer, TransformerConfig
from nmtkit.modules.embeddings import sinusoidal_table
from nmtkit.training.config import completed
from nmtkit.training.loop import train
from nmtkit.training.prune import hidden_channels, kept_heads, kept_neurons, pruned_weights

WIDE = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 4, "ffn": 32}


def model(activation: str = "gelu", norm: str = "pre", **sizes) -> tuple[Transformer, dict]:
    config = TransformerConfig(**{**WIDE, **sizes}, activation=activation, norm=norm)
    torch.manual_seed(0)
    return Transformer(config, 30, 30, shared_vocab=True), {"name": "transformer", **dataclasses.asdict(config)}


def test_kept_channels_are_every_other_frequency_so_the_position_table_is_the_narrower_models():
    assert hidden_channels(8, 4).tolist() == [0, 1, 4, 5]
    assert hidden_channels(16, 16).tolist() == list(range(16))
    for wide, narrow in ((256, 128), (16, 8), (24, 8)):
        kept = hidden_channels(wide, narrow)
        assert torch.allclose(sinusoidal_table(60, wide)[:, kept], sinusoidal_table(60, narrow), atol=1e-6)


@pytest.mark.parametrize("activation, norm", [("gelu", "pre"), ("swiglu", "pre"), ("relu", "post")])
def test_a_pruned_model_loads_and_keeps_embeddings_times_scale_and_the_logit_scale(activation, norm):
    teacher, saved = model(activation, norm)
    student, wanted = model(activation, norm, d_model=8, heads=2, ffn=16)
    weights = pruned_weights(teacher.state_dict(), saved, wanted)
    student.load_state_dict(weights)  # strict: every weight of the narrower model, in its shape
    kept, ids = hidden_channels(16, 8), torch.tensor([[3, 7, 12]])
    with torch.no_grad():
        assert torch.allclose(student.positions(student.src_embed(ids)),
                              teacher.positions(teacher.src_embed(ids))[..., kept], atol=1e-5)
        assert student.output.weight is student.tgt_embed.weight
        assert torch.allclose(student.output.weight, teacher.output.weight[:, kept] * math.sqrt(2))
        if norm == "pre":  # the final norm gives the tied output layer its scale back
            assert torch.allclose(student.decoder_norm.weight * math.sqrt(2), teacher.decoder_norm.weight[kept])


def test_pruning_to_the_same_widths_changes_nothing():
    teacher, saved = model()
    same = pruned_weights(teacher.state_dict(), saved, saved)
    assert all(torch.equal(value, teacher.state_dict()[name]) for name, value in same.items())


def test_the_heads_and_neurons_kept_are_the_strongest_in_their_order():
    teacher, saved = model()
    weights = {name: value.clone() for name, value in teacher.state_dict().items()}
    attention, hidden = "encoder.0.attention", hidden_channels(16, 8)
    for head, factor in ((2, 10.0), (0, 5.0)):  # head size 4: heads 2 and 0 write the most
        weights[f"{attention}.value.weight"][4 * head:4 * head + 4] *= factor
    assert kept_heads(weights, attention, hidden, heads=4, keep=2).tolist() == [0, 1, 2, 3, 8, 9, 10, 11]
    pruned = pruned_weights(weights, saved, {**saved, "d_model": 8, "heads": 2})
    assert torch.equal(pruned[f"{attention}.query.weight"], weights[f"{attention}.query.weight"][[0, 1, 2, 3, 8, 9, 10,
                                                                                                  11]][:, hidden])
    ffn = "decoder.0.feed_forward"
    weights[f"{ffn}.outer.weight"][:, [5, 30]] *= 100.0
    chosen, rows = kept_neurons(weights, ffn, hidden, ffn=32, keep=2, gated=False)
    assert chosen.tolist() == [5, 30] and rows.tolist() == [5, 30]
    gated, _ = model("swiglu")  # W_in's rows: the 32 neurons, then their 32 gates
    chosen, rows = kept_neurons(gated.state_dict(), ffn, hidden, ffn=32, keep=3, gated=True)
    assert rows.tolist() == chosen.tolist() + [neuron + 32 for neuron in chosen.tolist()]


@pytest.mark.parametrize("change, message", [
    ({"d_model": 32, "heads": 8}, "cannot widen: model.d_model 16 -> 32"),
    ({"d_model": 8}, "keeps whole heads: d_model/heads must stay 4 (got 8/4); e.g. model.heads=2"),
    ({"name": "lstm"}, "prunes Transformers only"),
])
def test_widths_pruning_cannot_reach_are_errors(change, message):
    teacher, saved = model()
    saved = {**saved, **({"name": change.pop("name")} if "name" in change else {})}
    with pytest.raises(NmtkitError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pruned_weights(teacher.state_dict(), saved, {**saved, **change})


def config(**train_settings):
    train_section = {"batch_tokens": 256, "warmup": 10, "log_every": 5, "threads": 1, "amp": "none",
                     "valid_every": 10, "valid_bleu": False, "device": "cpu", **train_settings}
    return completed(build_config({"model": {**WIDE, "decoder_layers": 2}, "train": train_section}))


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> tuple[Path, Path]:
    """A 1+2-layer d16 run of 2 updates on the copy task: (checkpoint, data)."""
    root = tmp_path_factory.mktemp("wide")
    data = copy_task(root)
    train(config(max_steps=2), data, root / "run")
    return root / "run" / "model.pt", data


def one_line_error(args: list[str], *needles: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(needle in errors[0] for needle in needles), result.output


def test_a_narrower_shallower_student_trains_from_the_cli(teacher, tmp_path: Path):
    checkpoint, data = teacher
    base = ["train", "--data", str(data), "--init-from", str(checkpoint), "--threads", "1", "--set", "model.d_model=8",
            "--set", "model.heads=2", "--set", "model.ffn=16", "--set", "model.encoder_layers=1", "--set",
            "model.decoder_layers=1", "--set", "train.max_steps=1", "--set", "train.valid_bleu=false", "--set",
            "train.amp=none", "--set", "train.init_layers=spread"]
    one_line_error([*base, "--out", str(tmp_path / "a")], "d_model: 16 -> 8", "train.init_width=prune")
    one_line_error([*base, "--out", str(tmp_path / "b"), "--set", "train.init_width=shrink"], "is prune (or empty)")
    one_line_error([*base, "--out", str(tmp_path / "c"), "--set", "train.init_width=prune", "--set",
                    "train.init_optimizer=true"], "leave train.init_optimizer out")
    result = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "d"), "--set", "train.init_width=prune"])
    assert result.exit_code == 0, result.output
    assert load_checkpoint(tmp_path / "d" / "model.pt")["config"]["model"]["d_model"] == 8


def test_init_width_without_a_checkpoint_is_an_error():
    with pytest.raises(NmtkitError, match="give --init-from"):
        config(init_width="prune")
