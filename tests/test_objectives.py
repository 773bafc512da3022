"""nmtkit/training/objectives.py: the label-smoothed loss against a float64 computation, and scheduled sampling."""

from __future__ import annotations

import pytest
import torch

from nmtkit.data.subword import BOS, EOS, PAD
from nmtkit.training.objectives import TrainingForward, label_smoothed_nll, scheduled_sampling_log_probs


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


def test_the_training_forward_compiles_whole_and_matches_eager(make_transformer, source_batch):
    """train.compile's graph has no break (fullgraph: masked_softmax's data-dependent check steps aside while
    compiling) and gives eager's loss and gradients. The "eager" backend runs the graph dynamo captured, without
    inductor's slow code generation (a break fails the same way)."""
    _, src, src_mask = source_batch
    tgt_in = torch.tensor([[BOS, 4, 5, 6], [BOS, 7, PAD, PAD], [BOS, 8, 9, PAD]])
    tgt_out = torch.tensor([[4, 5, 6, EOS], [7, EOS, PAD, PAD], [8, 9, EOS, PAD]])
    results = []
    for compiled in (False, True):
        model = make_transformer(dropout=0.0, encoder_layers=1, decoder_layers=1, seed=3).train()
        forward = TrainingForward(model)
        if compiled:
            forward = torch.compile(forward, backend="eager", fullgraph=True, dynamic=False)
        loss = label_smoothed_nll(forward(src, src_mask, tgt_in), tgt_out, 0.1)[0]
        loss.backward()
        results.append((loss.detach(), [parameter.grad for parameter in model.parameters()]))
    torch._dynamo.reset()
    (eager_loss, eager_grads), (compiled_loss, compiled_grads) = results
    torch.testing.assert_close(compiled_loss, eager_loss)
    for compiled_grad, eager_grad in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(compiled_grad, eager_grad)
