"""The training loop's parts: the loss against a float64 computation, the schedule, budgets and patience."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from devices import device_params
from training_runs import copy_task

from nmtkit.data.subword import PAD
from nmtkit.errors import NmtkitError
from nmtkit.run_config import build_config
from nmtkit.training.loop import Trainer
from nmtkit.training.objectives import label_smoothed_nll, scheduled_sampling_log_probs
from nmtkit.training.schedule import inverse_sqrt
from nmtkit.translate import Translator


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_label_smoothed_nll_matches_float64_definition(epsilon: float):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[1, 3:] = PAD
    loss, nll = label_smoothed_nll(logits, target, epsilon)
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    expected_loss = expected_nll = 0.0
    for b in range(3):
        for t in range(5):
            if target[b, t] == PAD:
                continue
            token_nll = -float(log_probs[b, t, target[b, t]])
            expected_nll += token_nll
            expected_loss += (1 - epsilon) * token_nll - epsilon * float(log_probs[b, t].mean())
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    assert float(nll) == pytest.approx(expected_nll, rel=1e-5)


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_label_smoothed_nll_gradient_matches_autograd_of_the_definition_in_float64(epsilon: float):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[1, 3:] = PAD
    label_smoothed_nll(logits, target, epsilon)[0].mul(0.7).backward()
    ours = logits.grad.clone()
    logits.grad = None
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, epsilon / 11).scatter_add(
        2, target.unsqueeze(2), torch.full((3, 5, 1), 1 - epsilon, dtype=torch.float64))
    expected = -(smoothed * log_probs).sum(dim=-1).masked_fill(target == PAD, 0.0).sum()
    expected.mul(0.7).backward()
    assert torch.allclose(ours, logits.grad, rtol=0, atol=1e-12)
    assert ours[1, 3:].abs().max() == 0  # no gradient from PAD targets
    inputs = (logits.detach().requires_grad_(),)
    assert torch.autograd.gradcheck(lambda x: label_smoothed_nll(x, target, epsilon)[0], inputs)


def test_label_smoothed_nll_of_bf16_logits_is_computed_in_float32_and_returns_a_bf16_gradient():
    torch.manual_seed(0)
    logits = (torch.randn(4, 6, 50) * 3).to(torch.bfloat16).requires_grad_()
    target = torch.randint(1, 50, (4, 6))
    loss, nll = label_smoothed_nll(logits, target, 0.1)
    assert loss.dtype == nll.dtype == torch.float32 and not nll.requires_grad
    loss.backward()
    reference = logits.detach().float().requires_grad_()
    reference_loss = label_smoothed_nll(reference, target, 0.1)[0]
    reference_loss.backward()
    assert logits.grad.dtype == torch.bfloat16
    assert torch.equal(logits.grad, reference.grad.to(torch.bfloat16))  # one rounding of the float32 gradient
    assert float(loss.detach()) == pytest.approx(float(reference_loss.detach()), rel=1e-6)


def test_inverse_sqrt_schedule():
    factor = inverse_sqrt(100)
    assert factor(1) == pytest.approx(0.01)
    assert factor(50) == pytest.approx(0.5)
    assert factor(100) == pytest.approx(1.0)
    assert factor(400) == pytest.approx(0.5)
    assert factor(10_000) == pytest.approx(math.sqrt(100 / 10_000))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


def tiny_config(**train):
    return build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32},
                         "train": {"batch_tokens": 256, "warmup": 10, "log_every": 5, "threads": 1, "amp": "none",
                                   "device": "cpu", **train}})


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_patience_stops_training_without_improvement(data_dir: Path, tmp_path: Path):
    config = tiny_config(lr=0.0, valid_every=2, patience=2, best_metric="loss", valid_bleu=False, max_steps=100)
    summary = Trainer(config, data_dir, tmp_path).run()
    assert summary["stopped_early"] and summary["steps"] == 6  # the first validation sets best, two more fail
    assert [r["step"] for r in records(tmp_path) if "valid_nll" in r] == [2, 4, 6]


def test_training_reduces_dev_loss_and_writes_checkpoints(data_dir: Path, tmp_path: Path):
    config = tiny_config(lr=3e-3, valid_every=20, max_steps=40, valid_bleu=True)
    summary = Trainer(config, data_dir, tmp_path).run()
    validations = [r for r in records(tmp_path) if "valid_nll" in r]
    assert summary["steps"] == 40 and len(validations) == 2
    assert validations[1]["valid_nll"] < validations[0]["valid_nll"]
    assert "valid_bleu" in validations[0]
    assert (tmp_path / "model.pt").exists() and (tmp_path / "last.pt").exists()
    assert [r["step"] for r in records(tmp_path) if "train_loss" in r] == [5, 10, 15, 20, 25, 30, 35, 40]


def test_max_time_budget(data_dir: Path, tmp_path: Path):
    summary = Trainer(tiny_config(max_time=1e-9, valid_bleu=False), data_dir, tmp_path).run()
    assert summary["steps"] == 1  # the budget is checked before each update


def test_the_fused_optimizer_steps_as_torchs_for_loop_adamw(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(lr=1e-3, warmup=0, weight_decay=0.01, adam_beta2=0.9), data_dir, tmp_path)
    assert trainer.optimizer.defaults["fused"]
    params = list(trainer.model.parameters())
    copies = [param.detach().clone().requires_grad_() for param in params]
    reference = torch.optim.AdamW(copies, lr=1e-3, betas=(0.9, 0.9), eps=1e-9, weight_decay=0.01, foreach=False)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        for param, copy in zip(params, copies):
            param.grad = torch.randn(param.shape, generator=generator)
            copy.grad = param.grad.clone()
        trainer.optimizer.step()
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
    assert trainer.optimizer.defaults["fused"]
    train = trainer.config.train
    params = list(trainer.model.parameters())
    copies = [param.detach().clone().requires_grad_() for param in params]
    reference = torch.optim.AdamW(copies, lr=1e-3, betas=(train.adam_beta1, train.adam_beta2), eps=train.adam_eps,
                                  weight_decay=0.01, foreach=False)
    seen: list[torch.Tensor] = []
    trainer.optimizer.register_step_pre_hook(
        lambda optimizer, args, kwargs: seen.extend(param.grad.clone() for param in params))
    for batch_indices in trainer.epoch_batches(0)[:3]:
        batch = trainer.train_data.batch(batch_indices)
        lr, seen[:] = trainer.optimizer.param_groups[0]["lr"], []
        stats = trainer.update([batch], batch.num_tgt_tokens)
        assert "grad_scale" not in vars(trainer.optimizer)  # the divisor does not outlive its step
        for copy, gradient in zip(copies, seen, strict=True):
            copy.grad = gradient
        norm = float(torch.nn.utils.clip_grad_norm_(copies, clip))
        assert stats["grad_norm"] == pytest.approx(norm, rel=1e-6) and (norm > clip) == (clip < 1.0)
        reference.param_groups[0]["lr"] = lr
        reference.step()
    for param, copy in zip(params, copies):
        torch.testing.assert_close(param.detach(), copy.detach(), rtol=1e-5, atol=1e-7)


def test_linear_schedule_decays_the_lr_to_zero_at_the_step_budget(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(lr=1e-3, warmup=5, lr_schedule="linear", max_steps=20, valid_bleu=False),
                      data_dir, tmp_path)
    trainer.run()
    rates = [r["lr"] for r in records(tmp_path) if "lr" in r]
    assert [round(rate, 6) for rate in rates] == [round(1e-3 * (1 - step / 20), 6) for step in (5, 10, 15, 20)]
    assert trainer.optimizer.param_groups[0]["lr"] == 0.0


def test_linear_schedule_after_resume_goes_on_from_the_time_trained(data_dir: Path, tmp_path: Path):
    first = Trainer(tiny_config(warmup=0, lr_schedule="linear", max_time=100.0, max_steps=4, valid_bleu=False),
                    data_dir, tmp_path)
    first.run()
    resumed = Trainer(tiny_config(warmup=0, lr_schedule="linear", max_time=100.0, max_steps=8, valid_bleu=False),
                      data_dir, tmp_path)
    resumed.resume()
    resumed.progress.elapsed = 75.0  # as if 75 of the 100 seconds were spent
    resumed.scheduler.step()
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(resumed.config.train.lr * 0.25)


def test_linear_schedule_without_a_budget_is_an_error(data_dir: Path, tmp_path: Path):
    with pytest.raises(NmtkitError, match="--max-steps or --max-time"):
        Trainer(tiny_config(lr_schedule="linear"), data_dir, tmp_path)


def test_scheduled_sampling_with_probability_zero_is_teacher_forcing(make_transformer, source_batch):
    model = make_transformer()
    _, src, src_mask = source_batch
    tgt_in = torch.tensor([[2, 4, 9, 5, 0], [2, 7, 7, 10, 4], [2, 6, 5, 0, 0]])
    with torch.no_grad():
        logits, _ = model(src, src_mask, tgt_in)
        unrolled = scheduled_sampling_log_probs(model, src, src_mask, tgt_in, 0.0)
    torch.testing.assert_close(unrolled, torch.log_softmax(logits, -1), rtol=0, atol=1e-5)


def test_scheduled_sampling_with_probability_one_ignores_the_reference(make_transformer, source_batch):
    model = make_transformer()
    _, src, src_mask = source_batch
    tgt_in = torch.tensor([[2, 4, 9, 5, 6], [2, 7, 7, 10, 4], [2, 6, 5, 4, 8]])
    other = torch.cat([tgt_in[:, :1], torch.randint(4, 12, (3, 4))], dim=1)
    results = []
    for inputs in (tgt_in, other):
        torch.manual_seed(3)
        with torch.no_grad():
            results.append(scheduled_sampling_log_probs(model, src, src_mask, inputs, 1.0))
    torch.testing.assert_close(results[0], results[1])
    torch.manual_seed(3)
    with torch.no_grad():
        half = scheduled_sampling_log_probs(model, src, src_mask, tgt_in, 0.5)
    assert not torch.allclose(half, results[0])


def test_training_with_scheduled_sampling_ramps_the_probability(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(scheduled_sampling=0.4, sampling_ramp=10, max_steps=6, valid_bleu=False),
                      data_dir, tmp_path)
    assert trainer.sampling_probability() == 0.0
    trainer.progress.step = 5
    assert trainer.sampling_probability() == pytest.approx(0.2)
    trainer.progress.step = 0
    summary = trainer.run()
    assert summary["steps"] == 6 and math.isfinite(records(tmp_path)[-1]["valid_nll"])
    with pytest.raises(NmtkitError, match="probability"):
        Trainer(tiny_config(scheduled_sampling=1.5), data_dir, tmp_path)


def test_late_dropout_is_off_until_its_fraction_of_the_budget_then_at_the_models_rates(data_dir: Path,
                                                                                       tmp_path: Path, caplog):
    config = tiny_config(dropout_from=0.5, max_steps=8, valid_bleu=False)
    config.model.attention_dropout = 0.2
    trainer = Trainer(config, data_dir, tmp_path)
    rates = {(type(module).__name__, rate) for module, _, rate in trainer.late_dropout.rates}
    assert rates == {("Dropout", 0.1), ("MultiHeadAttention", 0.2)}
    seen = []
    update = trainer.update

    def recording_update(*args, **kwargs):
        stats = update(*args, **kwargs)
        seen.append(sorted({getattr(module, attribute) for module, attribute, _ in trainer.late_dropout.rates}))
        return stats

    trainer.update = recording_update
    with caplog.at_level("INFO", logger="nmtkit.training.loop"):
        assert trainer.run()["steps"] == 8
    assert seen == [[0.0]] * 4 + [[0.1, 0.2]] * 4  # off for steps 1-4 (0/8 to 3/8 spent), on from the 5th
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
    batch = trainer.train_data.batch(trainer.epoch_batches(0)[0])
    return batch, batch.num_tgt_tokens


def test_a_nonfinite_update_is_skipped_and_leaves_the_weights_alone(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(), data_dir, tmp_path)
    before = {name: value.clone() for name, value in trainer.model.state_dict().items()}
    trainer.forward = FaultyForward(trainer.forward, poisoned={1})
    batch, tokens = first_batch(trainer)
    assert trainer.update([batch], tokens) is None
    assert all(torch.equal(before[name], value) for name, value in trainer.model.state_dict().items())
    assert all(parameter.grad is None for parameter in trainer.model.parameters())
    assert trainer.optimizer.state_dict()["state"] == {} and trainer.progress.skipped_updates == 1


def test_training_skips_nonfinite_updates_and_goes_on(data_dir: Path, tmp_path: Path, caplog):
    trainer = Trainer(tiny_config(max_steps=5, valid_bleu=False), data_dir, tmp_path)
    trainer.forward = FaultyForward(trainer.forward, poisoned={2, 3})
    summary = trainer.run()
    assert summary["steps"] == 5 and summary["skipped_updates"] == 2
    assert sum("update skipped" in message for message in caplog.messages) == 2
    assert math.isfinite(records(tmp_path)[-1]["valid_nll"])


def test_training_aborts_after_too_many_nonfinite_updates_in_a_row(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(max_steps=50, max_nonfinite=3, valid_bleu=False), data_dir, tmp_path)
    trainer.forward = FaultyForward(trainer.forward, poisoned=range(1, 100))
    with pytest.raises(NmtkitError, match="diverged at step 1: 3 updates in a row"):
        trainer.run()
    assert trainer.forward.calls == 3 and trainer.progress.step == 0


def gradients_of_one_update(trainer: Trainer, batches, tokens) -> list[torch.Tensor]:
    """The gradients the optimizer receives in one update (compared before Adam, which amplifies rounding)."""
    seen = []
    trainer.optimizer.register_step_pre_hook(
        lambda optimizer, args, kwargs: seen.extend(p.grad.clone() for p in trainer.model.parameters()))
    assert trainer.update(batches, tokens) is not None
    return seen


def test_out_of_memory_splits_the_batches_and_gives_the_same_update(data_dir: Path, tmp_path: Path, caplog):
    gradients = []
    for max_sentences in (None, 3):
        config = tiny_config()
        config.model.dropout = 0.0  # the same sentences in other batch shapes would draw other dropout masks
        trainer = Trainer(config, data_dir, tmp_path)
        batch, tokens = first_batch(trainer)
        assert len(batch.indices) > 6
        trainer.forward = FaultyForward(trainer.forward, max_sentences=max_sentences)
        gradients.append(gradients_of_one_update(trainer, [batch], tokens))
    assert any("out of memory" in message and "retrying" in message for message in caplog.messages)
    for split, whole in zip(*gradients):
        torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-7)


def test_out_of_memory_on_single_sentences_is_a_clear_error(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(), data_dir, tmp_path)
    batch, tokens = first_batch(trainer)
    trainer.forward = FaultyForward(trainer.forward, max_sentences=0)
    with pytest.raises(NmtkitError, match="out of memory on cpu at step 1 with one sentence per batch"):
        trainer.update([batch], tokens)


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


def test_fp16_training_keeps_its_loss_scale_across_resume(data_dir: Path, tmp_path: Path):
    summary = Trainer(tiny_config(amp="fp16", max_steps=6, valid_every=3, valid_bleu=False), data_dir, tmp_path).run()
    assert summary["precision"] == "fp16 autocast" and summary["steps"] == 6
    assert math.isfinite(records(tmp_path)[-1]["valid_nll"])
    saved = torch.load(tmp_path / "last.pt", weights_only=True)["train_state"]["scaler"]
    resumed = Trainer(tiny_config(amp="fp16", max_steps=8, valid_bleu=False), data_dir, tmp_path)
    resumed.resume()
    assert resumed.scaler.get_scale() == saved["scale"] and resumed.progress.step == 6


def test_pairs_longer_than_max_length_or_the_positions_are_left_out(data_dir: Path, tmp_path: Path, caplog,
                                                                    monkeypatch):
    trainer = Trainer(tiny_config(max_length=5, valid_bleu=False), data_dir, tmp_path)
    for data in (trainer.train_data, trainer.dev_data):
        assert 0 < len(data) < len(data.src)
        assert max(max(len(data.src[i]), len(data.tgt[i])) for i in data.kept) == 4
    assert "train: left out" in caplog.text
    decoded = []
    monkeypatch.setattr(Translator, "translate_requests", lambda self, requests: decoded.extend(
        request.text for request in requests) or [[(request.text, 0.0)] for request in requests])
    assert trainer.dev_scores() == pytest.approx((100.0, 100.0))  # the sources as translations: each copies its source
    assert len(decoded) == len(trainer.dev_data) and max(len(line.split()) for line in decoded) == 4
    positions = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                        "ffn": 32, "max_positions": 6}})
    assert Trainer(positions, data_dir, tmp_path).train_data.left_out > 0  # the model bounds it below 1024
    assert Trainer(tiny_config(max_length=7), data_dir, tmp_path).train_data.left_out == 0
    with pytest.raises(NmtkitError, match="every train pair .* is longer than 2 positions"):
        Trainer(tiny_config(max_length=2), data_dir, tmp_path)
    with pytest.raises(NmtkitError, match="train.max_length must be at least 2"):
        Trainer(tiny_config(max_length=1), data_dir, tmp_path)


def test_settings_that_do_not_combine_are_errors(data_dir: Path, tmp_path: Path):
    with pytest.raises(NmtkitError, match="train.compile does not combine with train.scheduled_sampling"):
        Trainer(tiny_config(compile=True, scheduled_sampling=0.2), data_dir, tmp_path)
    with pytest.raises(NmtkitError, match="update_freq"):
        Trainer(tiny_config(update_freq=0), data_dir, tmp_path)
