"""Tests for nmtkit/modules/attention.py: masked softmax, scaled dot-product attention, multi-head attention,
the RNN attention scores and global/local attention."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nmtkit.modules.attention import (
    Attention,
    MultiHeadAttention,
    build_score,
    masked_softmax,
    scaled_dot_product,
)
from nmtkit.modules.dropout import dropout
from nmtkit.registry import SCORES


def test_masked_softmax_zeros_masked_positions_and_rows_sum_to_one():
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 5, generator=generator) * 10
    mask = torch.rand(2, 3, 5, generator=generator) > 0.4
    mask[..., 0] = True  # every row keeps at least one position
    weights = masked_softmax(scores, mask)
    assert torch.all(weights[~mask] == 0)
    assert torch.all(weights[mask] > 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))


def test_masked_softmax_all_masked_row_gives_zeros():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    mask = torch.tensor([[False, False, False], [True, False, True]])
    weights = masked_softmax(scores, mask)
    assert not torch.isnan(weights).any()
    assert weights[0].tolist() == [0.0, 0.0, 0.0]
    expected = torch.softmax(torch.tensor([0.5, 4.0]), dim=0)
    torch.testing.assert_close(weights[1, [0, 2]], expected)
    assert weights[1, 1] == 0


def test_masked_softmax_being_compiled_skips_the_check_and_gives_the_same_weights(monkeypatch):
    """torch.compile sees no data-dependent check (it would break the graph): the same weights, zeros included."""
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    for mask in (torch.tensor([[False, False, False], [True, False, True]]), torch.tensor([[True, False, True]] * 2)):
        eager = masked_softmax(scores, mask)
        with monkeypatch.context() as patch:
            patch.setattr(torch.compiler, "is_compiling", lambda: True)
            patch.setattr(torch.Tensor, "__bool__", lambda _: pytest.fail("a data-dependent check while compiling"))
            compiled = masked_softmax(scores, mask)
        torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_softmax_equals_masked_fill_softmax_forward_and_backward(dtype: torch.dtype):
    """The additive mask (and, on a CPU, no zeroing pass when every row attends somewhere) gives exactly what
    filling the masked scores with -inf gives, in the forward and the backward pass; with `dtype`, as a cast first."""
    generator = torch.Generator().manual_seed(2)
    scores = (torch.randn(3, 4, 6, 7, generator=generator) * 4).to(dtype)
    mask = (torch.rand(3, 1, 6, 7, generator=generator) > 0.5) | (torch.arange(7) == 0)
    grad = torch.randn(3, 4, 6, 7, generator=generator)
    ours_in, theirs_in = scores.clone().requires_grad_(), scores.clone().requires_grad_()
    ours = masked_softmax(ours_in, mask, dtype=torch.float32)
    theirs = torch.softmax(theirs_in.float().masked_fill(~mask, float("-inf")), dim=-1)
    ours.backward(grad)
    theirs.backward(grad)
    assert ours.dtype == torch.float32 and torch.equal(ours, theirs)
    assert torch.equal(ours_in.grad, theirs_in.grad)


def test_masked_softmax_without_mask_is_softmax():
    scores = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(masked_softmax(scores, None), torch.softmax(scores, dim=-1))


def as_tensor(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor([rows], dtype=torch.float64)  # (1, rows, columns)


def test_scaled_dot_product_matches_hand_computation():
    query = [[1.0, 0.0, 2.0], [-1.0, 0.5, 0.0]]
    key = [[0.5, 1.0, -1.0], [2.0, 0.0, 1.0], [0.0, -2.0, 0.5], [1.0, 1.0, 1.0]]
    value = [[1.0, 2.0], [-1.0, 0.0], [3.0, 1.0], [0.0, -4.0]]
    allowed = [[True, True, False, True], [True, False, True, True]]
    expected_weights, expected_context = [], []
    for q, row_mask in zip(query, allowed):
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(3) for k in key]
        exps = [math.exp(s) if ok else 0.0 for s, ok in zip(scores, row_mask)]
        weights = [e / sum(exps) for e in exps]
        expected_weights.append(weights)
        expected_context.append([sum(w * v[d] for w, v in zip(weights, value)) for d in range(2)])
    context, weights = scaled_dot_product(as_tensor(query), as_tensor(key), as_tensor(value),
                                          torch.tensor([allowed]))
    torch.testing.assert_close(weights, as_tensor(expected_weights), rtol=0, atol=1e-12)
    torch.testing.assert_close(context, as_tensor(expected_context), rtol=0, atol=1e-12)


@pytest.fixture
def attention():
    torch.manual_seed(0)
    return MultiHeadAttention(16, 4, dropout=0.5).eval()


def test_need_weights_does_not_change_cross_attention_output(attention):
    generator = torch.Generator().manual_seed(2)
    x, memory = torch.randn(2, 5, 16, generator=generator), torch.randn(2, 7, 16, generator=generator)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3]).unsqueeze(1)  # (B, 1, L)
    key, value = attention.project_kv(memory)
    with_weights, weights = attention(x, key, value, mask=mask, need_weights=True)
    without_weights, none = attention(x, key, value, mask=mask)
    assert none is None
    assert weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(with_weights, without_weights, rtol=0, atol=1e-6)
    assert torch.all(weights[1, :, :, 4:] == 0)


def test_need_weights_does_not_change_causal_self_attention_output(attention):
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(3))
    key, value = attention.project_kv(x)
    with_weights, weights = attention(x, key, value, causal=True, need_weights=True)
    without_weights, _ = attention(x, key, value, causal=True)
    torch.testing.assert_close(with_weights, without_weights, rtol=0, atol=1e-6)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert torch.all(weights[..., future] == 0)


@pytest.mark.parametrize("queries", [1, 5, 20])
@pytest.mark.parametrize("causal", [False, True])
def test_matmul_path_equals_the_fused_kernel(attention, monkeypatch, queries, causal):
    """Up to `few_queries` queries per row attention is two matmuls (faster when decoding); more go to the fused
    kernel. Both give the same output, with a mask, and causally over a cache of 3 earlier positions."""
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(2, queries, 16, generator=generator)
    key, value = attention.project_kv(torch.randn(2, queries + 3 * causal, 16, generator=generator))
    mask = None if causal else torch.ones(2, 1, queries, dtype=torch.bool).tril(queries - 2)
    matmul, _ = attention(x, key, value, mask=mask, causal=causal)
    monkeypatch.setattr(attention, "few_queries", 0 if queries <= 16 else 100)
    fused, _ = attention(x, key, value, mask=mask, causal=causal)
    torch.testing.assert_close(matmul, fused, rtol=0, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_training_on_a_cpu_equals_the_fused_kernel_with_gradients(causal):
    """Training on a CPU computes attention with two matmuls (faster there, forward and backward): the same output
    and the same gradients as torch's fused kernel."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).train()
    generator = torch.Generator().manual_seed(6)
    x = torch.randn(3, 6, 16, generator=generator, requires_grad=True)
    memory = x if causal else torch.randn(3, 8, 16, generator=generator, requires_grad=True)
    mask = None if causal else (torch.arange(8) < torch.tensor([[8], [5], [1]])).unsqueeze(1)  # (B, 1, L)
    key, value = attention.project_kv(memory)
    output, _ = attention(x, key, value, mask=mask, causal=causal)
    query = attention.split_heads(attention.query(x))
    head_mask = None if causal else mask.unsqueeze(1)
    fused = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=head_mask,
                                                             is_causal=causal)
    expected = attention._merge(fused)
    torch.testing.assert_close(output, expected, rtol=0, atol=1e-6)
    upstream = torch.randn_like(output)
    inputs = [x] + ([] if causal else [memory]) + list(attention.parameters())
    got = torch.autograd.grad(output, inputs, upstream, retain_graph=True)
    for ours, torchs in zip(got, torch.autograd.grad(expected, inputs, upstream)):
        torch.testing.assert_close(ours, torchs, rtol=1e-5, atol=1e-6)


def test_attention_dropout_drops_weights_when_training_on_a_cpu():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4, dropout=0.5).train()
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(7))
    key, value = attention.project_kv(x)
    torch.manual_seed(11)
    output, _ = attention(x, key, value)
    query = attention.split_heads(attention.query(x))
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(4), dim=-1)
    torch.manual_seed(11)
    expected = attention._merge(dropout(weights, 0.5) @ value)
    torch.testing.assert_close(output, expected, rtol=0, atol=1e-6)
    assert not torch.allclose(output, attention._merge(weights @ value), atol=1e-3)


def test_grouped_queries_equal_keys_repeated_per_row(attention):
    """Beams sharing their sentence's keys (grouped) attend exactly as with the keys copied to every beam row."""
    generator = torch.Generator().manual_seed(6)
    x = torch.randn(6, 1, 16, generator=generator)  # 2 sentences x 3 beams, one step
    key, value = attention.project_kv(torch.randn(2, 5, 16, generator=generator))
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2]).unsqueeze(1)  # (2, 1, 5)
    grouped, grouped_weights = attention.grouped(x, key, value, mask=mask, need_weights=True)
    rows = torch.tensor([0, 0, 0, 1, 1, 1])
    repeated, weights = attention(x, key[rows], value[rows], mask=mask[rows], need_weights=True)
    torch.testing.assert_close(grouped, repeated, rtol=0, atol=1e-6)
    torch.testing.assert_close(grouped_weights, weights, rtol=0, atol=1e-6)
    assert torch.all(grouped_weights[3:, :, :, 3:] == 0)


@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_output_ignores_later_positions(attention, need_weights):
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(1, 6, 16, generator=generator)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 16, generator=generator)
    out, _ = attention(x, *attention.project_kv(x), causal=True, need_weights=need_weights)
    out_changed, _ = attention(changed, *attention.project_kv(changed), causal=True, need_weights=need_weights)
    torch.testing.assert_close(out[:, :4], out_changed[:, :4], rtol=0, atol=1e-6)
    assert not torch.allclose(out[:, 4:], out_changed[:, 4:])


@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_queries_for_the_last_positions_see_all_earlier_keys(attention, need_weights):
    """Incremental decoding: 2 new queries over 6 cached keys equal the last 2 rows of the full computation."""
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(5))
    key, value = attention.project_kv(x)
    full, _ = attention(x, key, value, causal=True)
    last, _ = attention(x[:, 4:], key, value, causal=True, need_weights=need_weights)
    torch.testing.assert_close(last, full[:, 4:], rtol=0, atol=1e-6)


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 4)


# --- score functions of the RNN attention: hand-computed values, shapes, masking ---

QUERY = torch.tensor([[[1.0, 2.0]]])  # (B=1, T=1, 2)
KEYS = torch.tensor([[[3.0, -1.0], [0.5, 0.5], [2.0, 2.0]]])  # (1, S=3, 2)


def score_of(score: nn.Module, query=QUERY, keys=KEYS):
    return score(query, score.prepare(keys))


def test_dot_and_scaled_dot_scores_by_hand():
    assert score_of(build_score("dot", 2, 2)).tolist() == [[[1.0, 1.5, 6.0]]]
    scaled = score_of(build_score("scaled_dot", 2, 2))
    torch.testing.assert_close(scaled, torch.tensor([[[1.0, 1.5, 6.0]]]) / math.sqrt(2))


def test_general_score_is_bilinear():
    score = build_score("general", 2, 2)
    with torch.no_grad():
        score.weight.weight.copy_(torch.tensor([[1.0, 0.0], [2.0, -1.0]]))  # W: s^T W h
    weight = score.weight.weight
    expected = torch.stack([QUERY[0, 0] @ weight @ key for key in KEYS[0]])
    torch.testing.assert_close(score_of(score)[0, 0], expected)
    assert build_score("bilinear", 3, 2)(torch.zeros(1, 1, 3), torch.zeros(1, 4, 3)).shape == (1, 1, 4)


@pytest.mark.parametrize("name", ["additive", "mlp", "concat"])
def test_additive_score_by_hand(name):
    score = build_score(name, 2, 2, hidden=3)
    with torch.no_grad():
        for parameter in (score.key_proj.weight, score.query_proj.weight, score.query_proj.bias, score.vector):
            parameter.copy_(torch.linspace(-1, 1, parameter.numel()).view_as(parameter))
    w1, w2, b2, v = score.key_proj.weight, score.query_proj.weight, score.query_proj.bias, score.vector
    expected = torch.stack([v @ torch.tanh(w1 @ key + w2 @ QUERY[0, 0] + b2) for key in KEYS[0]])
    torch.testing.assert_close(score_of(score)[0, 0], expected)


def test_cosine_score_given_and_learned_sharpness():
    given = build_score("cosine", 2, 2, sharpness=3.0)
    cosines = torch.stack([QUERY[0, 0] @ key / (QUERY[0, 0].norm() * key.norm()) for key in KEYS[0]])
    torch.testing.assert_close(score_of(given)[0, 0], 3.0 * cosines)
    assert not given.log_sharpness.requires_grad
    learned = build_score("cosine", 2, 2)
    score_of(learned).sum().backward()
    assert learned.log_sharpness.grad is not None
    torch.testing.assert_close(score_of(learned)[0, 0], math.sqrt(2) * cosines)


def test_location_score_ignores_keys_and_cuts_to_source_length():
    score = build_score("location", 2, 2, max_positions=5)
    first = score_of(score)
    second = score_of(score, keys=torch.randn(1, 3, 2))
    assert first.shape == (1, 1, 3) and torch.equal(first, second)
    torch.testing.assert_close(first[0, 0], score.weight(QUERY[0, 0])[:3])
    with pytest.raises(ValueError, match="max_positions"):
        score.prepare(torch.zeros(1, 6, 2))


def test_dot_scores_need_equal_sizes_and_unknown_names_are_errors():
    with pytest.raises(ValueError, match="equal query and key sizes"):
        build_score("dot", 3, 4)
    with pytest.raises(ValueError, match="unknown attention score"):
        build_score("nearest", 2, 2)


@pytest.mark.parametrize("name", SCORES)
@pytest.mark.parametrize("window", ["global", "local-m", "local-p"])
def test_attention_never_attends_to_padding(name, window):
    torch.manual_seed(0)
    attention = Attention(name, 4, 4, window=window, width=2, hidden=5, max_positions=8)
    keys = torch.randn(2, 6, 4)
    src_mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    positions = torch.arange(5).expand(2, 5)
    context, weights = attention(torch.randn(2, 5, 4), keys, attention.prepare(keys), src_mask, positions)
    assert context.shape == (2, 5, 4) and weights.shape == (2, 5, 6)
    assert torch.all(weights[1, :, 3:] == 0)
    torch.testing.assert_close(context, weights @ keys)
    if window != "local-p":  # local-p multiplies by a Gaussian, so its rows sum to at most 1
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))
    else:
        assert torch.all(weights.sum(-1) <= 1 + 1e-6)
