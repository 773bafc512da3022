"""nmtkit/training/step.py: the update: the fused AdamW step and its clipping, skipped non-finite updates, the
out-of-memory split, scheduled sampling and late dropout in the updates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from devices import device_params
from training_runs import copy_task, records, tiny_config

from nmtkit.config.run import build_config
from nmtkit.errors import NmtkitError
from nmtkit.training.loop import Trainer


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def test_the_fused_optimizer_steps_as_torchs_for_loop_adamw(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(lr=1e-3, warmup=0, weight_decay=0.01, adam_beta2=0.9), data_dir, tmp_path)
    assert trainer.updater.optimizer.defaults["fused"]
    params = list(trainer.setup.model.parameters())
    copies = [param.detach().clone().requires_grad_() for param in params]
    reference = torch.optim.AdamW(copies, lr=1e-3, betas=(0.9, 0.9), eps=1e-9, weight_decay=0.01, foreach=False)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        for param, copy in zip(params, copies):
            param.grad = torch.randn(param.shape, generator=generator)
            copy.grad = param.grad.clone()
        trainer.updater.optimizer.step()
        reference.step()
    for param, copy in zip(params, copies):
        torch.testing.assert_close(param.detach(), copy.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("clip", [1e-3, 1e3])
def test_clipping_by_the_fused_step_matches_clip_grad_norm_then_torchs_adamw(data_dir: Path, tmp_path: Path,
                                                                              clip: float, device: str):
    """The fused step divides the gradients by the clip's factor instead of a pass of its own over them: three updates
    give the weights of clip_grad_norm_ and torch's for-loop AdamW on the same gradients (Adam's first step is
    nearly scale-free, the later ones are not), whether the clip acts (1e-3) or not (1e3), on every device."""
    trainer = Trainer(tiny_config(lr=1e-3, warmup=0, weight_decay=0.01, clip_norm=clip, device=device), data_dir,
                      tmp_path)
    assert trainer.updater.optimizer.defaults["fused"]
    train = trainer.config.train
    params = list(trainer.setup.model.parameters())
    copies = [param.detach().clone().requires_grad_() for param in params]
    reference = torch.optim.AdamW(copies, lr=1e-3, betas=(train.adam_beta1, train.adam_beta2), eps=train.adam_eps,
                                  weight_decay=0.01, foreach=False)
    seen: list[torch.Tensor] = []
    trainer.updater.optimizer.register_step_pre_hook(
        lambda optimizer, args, kwargs: seen.extend(param.grad.clone() for param in params))
    for batch_indices in trainer.batches.epoch_batches(0)[:3]:
        batch = trainer.setup.train_data.batch(batch_indices)
        lr, seen[:] = trainer.updater.optimizer.param_groups[0]["lr"], []
        stats = trainer.updater.update([batch], batch.num_tgt_tokens)
        assert "grad_scale" not in vars(trainer.updater.optimizer)  # the divisor does not outlive its step
        for copy, gradient in zip(copies, seen, strict=True):
            copy.grad = gradient
        norm = float(torch.nn.utils.clip_grad_norm_(copies, clip))
        assert stats["grad_norm"] == pytest.approx(norm, rel=1e-6) and (norm > clip) == (clip < 1.0)
        reference.param_groups[0]["lr"] = lr
        reference.step()
    for param, copy in zip(params, copies):
        torch.testing.assert_close(param.detach(), copy.detach(), rtol=1e-5, atol=1e-7)


def test_training_with_scheduled_sampling_ramps_the_probability(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(scheduled_sampling=0.4, sampling_ramp=10, max_steps=6, valid_bleu=False),
                      data_dir, tmp_path)
    assert trainer.updater.sampling_probability() == 0.0
    trainer.progress.step = 5
    assert trainer.updater.sampling_probability() == pytest.approx(0.2)
    trainer.progress.step = 0
    summary = trainer.run()
    assert summary["steps"] == 6 and math.isfinite(records(tmp_path)[-1]["valid_nll"])
    with pytest.raises(NmtkitError, match="probability"):
        Trainer(tiny_config(scheduled_sampling=1.5), data_dir, tmp_path)


def test_late_dropout_is_off_until_its_fraction_of_the_budget_then_at_the_models_rates(data_dir: Path,
                                                                                       tmp_path: Path, caplog):
    config = tiny_config(dropout_from=0.5, max_steps=8, valid_bleu=False)
    config.model.attention_dropout, config.model.activation_dropout = 0.2, 0.3
    trainer = Trainer(config, data_dir, tmp_path)
    rates = {(type(module).__name__, rate) for module, _, rate in trainer.updater.late_dropout.rates}
    assert rates == {("Dropout", 0.1), ("Dropout", 0.3), ("MultiHeadAttention", 0.2)}
    seen = []
    update = trainer.updater.update

    def recording_update(*args, **kwargs):
        stats = update(*args, **kwargs)
        seen.append(sorted({getattr(module, attribute) for module, attribute, _ in trainer.updater.late_dropout.rates}))
        return stats

    trainer.updater.update = recording_update
    with caplog.at_level("INFO", logger="nmtkit.training"):
        assert trainer.run()["steps"] == 8
    assert seen == [[0.0]] * 4 + [[0.1, 0.2, 0.3]] * 4  # off for steps 1-4 (0/8 to 3/8 spent), on from the 5th
    assert "step 4: dropout on" in caplog.text


def test_late_dropout_needs_a_budget_and_a_fraction(data_dir: Path, tmp_path: Path):
    with pytest.raises(NmtkitError, match="--max-steps or --max-time"):
        Trainer(tiny_config(dropout_from=0.3), data_dir, tmp_path)
    with pytest.raises(NmtkitError, match="dropout_from"):
        Trainer(tiny_config(dropout_from=1.0, max_steps=4), data_dir, tmp_path)


class FaultyForward:
    """Stands in for a trainer's forward pass: calls numbered in `poisoned` (1-based) return NaN logits, and a
    batch of more than `max_sentences` sentences raises torch.OutOfMemoryError as CUDA would."""

    def __init__(self, forward, poisoned=(), max_sentences: int | None = None):
        self.forward, self.poisoned, self.max_sentences, self.calls = forward, set(poisoned), max_sentences, 0

    def __call__(self, src, *rest):
        if self.max_sentences is not None and src.size(0) > self.max_sentences:
            raise torch.OutOfMemoryError("out of memory (simulated)")
        self.calls += 1
        logits = self.forward(src, *rest)
        return logits * float("nan") if self.calls in self.poisoned else logits


def first_batch(trainer: Trainer):
    batch = trainer.setup.train_data.batch(trainer.batches.epoch_batches(0)[0])
    return batch, batch.num_tgt_tokens


def test_a_nonfinite_update_is_skipped_and_leaves_the_weights_alone(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(), data_dir, tmp_path)
    before = {name: value.clone() for name, value in trainer.setup.model.state_dict().items()}
    trainer.updater.forward = FaultyForward(trainer.updater.forward, poisoned={1})
    batch, tokens = first_batch(trainer)
    assert trainer.updater.update([batch], tokens) is None
    assert all(torch.equal(before[name], value) for name, value in trainer.setup.model.state_dict().items())
    assert all(parameter.grad is None for parameter in trainer.setup.model.parameters())
    assert trainer.updater.optimizer.state_dict()["state"] == {} and trainer.progress.skipped_updates == 1


def test_training_skips_nonfinite_updates_and_goes_on(data_dir: Path, tmp_path: Path, caplog):
    trainer = Trainer(tiny_config(max_steps=5, valid_bleu=False), data_dir, tmp_path)
    trainer.updater.forward = FaultyForward(trainer.updater.forward, poisoned={2, 3})
    summary = trainer.run()
    assert summary["steps"] == 5 and summary["skipped_updates"] == 2
    assert sum("update skipped" in message for message in caplog.messages) == 2
    assert math.isfinite(records(tmp_path)[-1]["valid_nll"])


def test_training_aborts_after_too_many_nonfinite_updates_in_a_row(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(max_steps=50, max_nonfinite=3, valid_bleu=False), data_dir, tmp_path)
    trainer.updater.forward = FaultyForward(trainer.updater.forward, poisoned=range(1, 100))
    with pytest.raises(NmtkitError, match="diverged at step 1: 3 updates in a row"):
        trainer.run()
    assert trainer.updater.forward.calls == 3 and trainer.progress.step == 0


def gradients_of_one_update(trainer: Trainer, batches, tokens) -> list[torch.Tensor]:
    """The gradients the optimizer receives in one update (compared before Adam, which amplifies rounding)."""
    seen = []
    trainer.updater.optimizer.register_step_pre_hook(
        lambda optimizer, args, kwargs: seen.extend(p.grad.clone() for p in trainer.setup.model.parameters()))
    assert trainer.updater.update(batches, tokens) is not None
    return seen


def test_out_of_memory_splits_the_batches_and_gives_the_same_update(data_dir: Path, tmp_path: Path, caplog):
    gradients = []
    for max_sentences in (None, 3):
        config = tiny_config()
        config.model.dropout = 0.0  # the same sentences in other batch shapes would draw other dropout masks
        trainer = Trainer(config, data_dir, tmp_path)
        batch, tokens = first_batch(trainer)
        assert len(batch.indices) > 6
        trainer.updater.forward = FaultyForward(trainer.updater.forward, max_sentences=max_sentences)
        gradients.append(gradients_of_one_update(trainer, [batch], tokens))
    assert any("out of memory" in message and "retrying" in message for message in caplog.messages)
    for split, whole in zip(*gradients):
        torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-7)


def test_out_of_memory_on_single_sentences_is_a_clear_error(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(), data_dir, tmp_path)
    batch, tokens = first_batch(trainer)
    trainer.updater.forward = FaultyForward(trainer.updater.forward, max_sentences=0)
    with pytest.raises(NmtkitError, match="out of memory on cpu at step 1 with one sentence per batch"):
        trainer.updater.update([batch], tokens)


def test_activation_checkpointing_gives_the_same_gradients(data_dir: Path, tmp_path: Path):
    gradients = []
    for recompute in (False, True):  # dropout on: the recomputation must replay the same masks
        trainer = Trainer(tiny_config(activation_checkpointing=recompute), data_dir, tmp_path)
        batch, tokens = first_batch(trainer)
        gradients.append(gradients_of_one_update(trainer, [batch], tokens))
    for recomputed, kept in zip(*gradients):
        torch.testing.assert_close(recomputed, kept, rtol=1e-5, atol=1e-7)
    config = tiny_config(activation_checkpointing=True)
    config.model = build_config({"model": {"name": "luong", "hidden": 16, "embed_dim": 16}}).model
    with pytest.raises(NmtkitError, match="luong does not support train.activation_checkpointing"):
        Trainer(config, data_dir, tmp_path)


def test_settings_that_do_not_combine_are_errors(data_dir: Path, tmp_path: Path):
    with pytest.raises(NmtkitError, match="train.compile does not combine with train.scheduled_sampling"):
        Trainer(tiny_config(compile=True, scheduled_sampling=0.2), data_dir, tmp_path)
    with pytest.raises(NmtkitError, match="update_freq"):
        Trainer(tiny_config(update_freq=0), data_dir, tmp_path)
