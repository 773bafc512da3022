"""Tests for the local attention of nmtkit/modules/attention.py against Luong et al. 2015, Section 3.2, Eq. 9-10:
window masks, the centres p_t of local-m and local-p, the Gaussian factor by hand, and gradients to W_p, v_p."""

from __future__ import annotations

import math

import pytest
import torch

from nmtkit.modules.attention import Attention, gaussian_weights, masked_softmax, window_mask

SRC_MASK = torch.tensor([[True] * 7, [True] * 3 + [False] * 4])  # real lengths 7 and 3


def batch(seed: int = 0, target_length: int = 9, dim: int = 4):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(2, target_length, dim, generator=generator)  # (B, T, D)
    keys = torch.randn(2, SRC_MASK.size(1), dim, generator=generator)  # (B, S, D)
    return query, keys


def local(window: str, width: int = 2, score: str = "dot", dim: int = 4) -> Attention:
    torch.manual_seed(0)
    return Attention(score, dim, dim, window=window, width=width)


def test_window_mask_keeps_positions_within_d_of_the_centre():
    centers = torch.tensor([[0.0, 2.5, 6.0]])  # (1, 3)
    mask = window_mask(centers, 7, 2)
    assert mask[0, 0].tolist() == [True, True, True, False, False, False, False]
    assert mask[0, 1].tolist() == [False, True, True, True, True, False, False]  # |j - 2.5| <= 2: j = 1..4
    assert mask[0, 2].tolist() == [False, False, False, False, True, True, True]


def test_gaussian_weights_by_hand():
    centers = torch.tensor([[1.5, 4.0]], dtype=torch.float64)
    sigma = 1.25
    expected = [[math.exp(-((j - p) ** 2) / (2 * sigma**2)) for j in range(6)] for p in (1.5, 4.0)]
    torch.testing.assert_close(gaussian_weights(centers, 6, sigma), torch.tensor([expected], dtype=torch.float64))


def test_local_m_centre_is_t_clamped_to_the_last_real_source_position():
    attention = local("local-m")
    query, _ = batch()
    positions = torch.arange(9).expand(2, 9)  # (B, T)
    centers = attention.centers(query, SRC_MASK, positions)
    assert centers[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6]
    assert centers[1].tolist() == [0, 1, 2, 2, 2, 2, 2, 2, 2]


def test_local_m_needs_the_target_positions():
    attention = local("local-m")
    query, keys = batch()
    with pytest.raises(ValueError, match="target positions"):
        attention(query, keys, attention.prepare(keys), SRC_MASK)


@pytest.mark.parametrize("width", [1, 2, 10])
def test_local_m_is_a_softmax_over_the_window_only(width):
    attention = local("local-m", width)
    query, keys = batch()
    positions = torch.arange(9).expand(2, 9)
    context, weights = attention(query, keys, attention.prepare(keys), SRC_MASK, positions)
    for b, length in enumerate((7, 3)):
        for t in range(9):
            center = min(t, length - 1)
            inside = [j for j in range(7) if abs(j - center) <= width and j < length]
            scores = query[b, t] @ keys[b, inside].T
            expected = torch.zeros(7)
            expected[inside] = torch.softmax(scores, dim=0)
            torch.testing.assert_close(weights[b, t], expected)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 9))
    torch.testing.assert_close(context, weights @ keys)


def test_local_p_centre_is_s_times_sigmoid_with_s_each_sentences_real_length():
    attention = local("local-p")
    query, _ = batch()
    w_p, b_p = attention.position_proj.weight, attention.position_proj.bias
    v_p = attention.position_vector.weight[0]
    centers = attention.centers(query, SRC_MASK, None)
    for b, length in enumerate((7, 3)):
        for t in range(9):
            expected = length * torch.sigmoid(v_p @ torch.tanh(w_p @ query[b, t] + b_p))  # Eq. 9
            torch.testing.assert_close(centers[b, t], expected)
    assert torch.all(centers >= 0)
    assert torch.all(centers <= SRC_MASK.sum(-1, keepdim=True))


def test_local_p_centres_reach_both_ends_of_the_source():
    attention = local("local-p")
    with torch.no_grad():
        attention.position_vector.weight.fill_(0.0)
        attention.position_vector.weight[0, 0] = 50.0
    query = torch.zeros(2, 2, 4)
    query[:, 0, 0], query[:, 1, 0] = -10.0, 10.0  # tanh saturates: sigmoid(-+50) = 0 and 1
    attention.position_proj.bias.data.zero_()
    with torch.no_grad():
        attention.position_proj.weight.copy_(torch.eye(4))
    centers = attention.centers(query, SRC_MASK, None)
    torch.testing.assert_close(centers, torch.tensor([[0.0, 7.0], [0.0, 3.0]]))


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_local_p_weights_by_hand(score):
    width = 2
    attention = local("local-p", width, score)
    query, keys = batch(seed=3)
    context, weights = attention(query, keys, attention.prepare(keys), SRC_MASK)
    centers = attention.centers(query, SRC_MASK, None)
    scores = attention.score(query, attention.prepare(keys))  # (B, T, S)
    sigma = width / 2
    for b, length in enumerate((7, 3)):
        for t in range(9):
            p = centers[b, t].item()
            inside = [j for j in range(7) if abs(j - p) <= width and j < length]
            assert inside, "the window around p_t in [0, S] always holds a real position"
            align = torch.softmax(scores[b, t, inside], dim=0)
            expected = torch.zeros(7)
            expected[inside] = align * torch.tensor([math.exp(-((j - p) ** 2) / (2 * sigma**2)) for j in inside])
            torch.testing.assert_close(weights[b, t], expected)  # Eq. 10
    assert torch.all(weights.sum(-1) <= 1 + 1e-6)
    assert torch.all(weights[1, :, 3:] == 0)
    torch.testing.assert_close(context, weights @ keys)


def test_local_p_gradients_reach_w_p_and_v_p():
    attention = local("local-p")
    query, keys = batch()
    context, _ = attention(query, keys, attention.prepare(keys), SRC_MASK)
    context.pow(2).sum().backward()
    for parameter in (attention.position_proj.weight, attention.position_proj.bias, attention.position_vector.weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


def test_local_p_with_a_window_covering_everything_is_global_times_the_gaussian():
    attention = local("local-p", width=20)
    query, keys = batch()
    _, weights = attention(query, keys, attention.prepare(keys), SRC_MASK)
    centers = attention.centers(query, SRC_MASK, None)
    global_weights = masked_softmax(query @ keys.transpose(1, 2), SRC_MASK.unsqueeze(1))
    torch.testing.assert_close(weights, global_weights * gaussian_weights(centers, 7, 10.0))


@pytest.mark.parametrize("window", ["local-m", "local-p"])
def test_bfloat16_windows_stay_exact_beyond_256_positions(window):
    attention = local(window, width=2).to(torch.bfloat16)
    length = 300
    keys = torch.randn(1, length, 4, dtype=torch.bfloat16)
    src_mask = torch.ones(1, length, dtype=torch.bool)
    query = torch.randn(1, 1, 4, dtype=torch.bfloat16)
    positions = torch.tensor([[281]])
    _, weights = attention(query, keys, attention.prepare(keys), src_mask, positions)
    center = attention.centers(query, src_mask, positions)[0, 0].item()
    assert weights.dtype == torch.bfloat16
    expected = [j for j in range(length) if abs(j - center) <= 2]
    assert weights[0, 0].nonzero()[:, 0].tolist() == expected
    if window == "local-m":
        assert expected == [279, 280, 281, 282, 283]


def test_bad_windows_are_errors():
    with pytest.raises(ValueError, match="unknown attention window"):
        Attention("dot", 4, 4, window="local")
    with pytest.raises(ValueError, match="half-width"):
        Attention("dot", 4, 4, window="local-p", width=0)
