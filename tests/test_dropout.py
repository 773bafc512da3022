"""nmtkit's dropout: the drop rate, the scale, independent lanes, reproducibility and the gradient, against the
binomial distribution and `F.dropout`'s contract; every model uses it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import nmtkit.models  # noqa: F401  (registers the built-in models)
from nmtkit.modules.dropout import INT64_MAX, INT64_MIN, LANES, Dropout, dropout, random_words
from nmtkit.registry import MODELS, build_model


def effective(p: float) -> float:
    return round(p * LANES) / LANES


def within_binomial(count: int, trials: int, p: float, sigmas: float = 6.0) -> bool:
    return abs(count - trials * p) <= sigmas * math.sqrt(trials * p * (1 - p))


@pytest.mark.parametrize("p", [0.05, 0.1, 0.3, 0.5, 0.9])
def test_drop_rate_and_scale(p: float):
    torch.manual_seed(0)
    out = dropout(torch.ones(1000, 1001), p)  # odd element count: the last 64-bit draw is used in part
    dropped = int((out == 0).sum())
    assert within_binomial(dropped, out.numel(), effective(p))
    assert abs(effective(p) - p) <= 0.5 / LANES
    kept = out[out != 0]
    assert torch.equal(kept, torch.full_like(kept, LANES / (LANES - round(p * LANES))))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_keeps_the_exact_scale(dtype: torch.dtype):
    """Each kept element is its value times 1 / (1 - p) rounded once to the dtype, as with torch's dropout: a scale
    rounded to bfloat16 (1.109375 for 1.111119 at p 0.1) would shrink every kept activation by 0.16%."""
    torch.manual_seed(3)
    x = torch.rand(300, 301).add_(1.0).to(dtype)  # values in [1, 2]
    out = dropout(x, 0.1)
    kept = out != 0
    expected = (x.float() * (LANES / (LANES - round(0.1 * LANES)))).to(dtype)
    assert torch.equal(out[kept], expected[kept])
    ratio = (out[kept].double() / x[kept].double()).mean()
    assert abs(float(ratio) - 1 / (1 - effective(0.1))) < 1e-4


def test_each_lane_of_a_draw_is_uniform_and_neighbours_are_independent():
    torch.manual_seed(1)
    p, rows = 0.5, 400_000
    kept = (dropout(torch.ones(rows, 4), p) != 0).double()  # column j = lane j of one 64-bit draw
    for lane in range(4):  # the top lane too (bit 63): a generator of non-negative int64 would bias it
        assert within_binomial(int((kept[:, lane] == 0).sum()), rows, p)
    for a in range(4):
        for b in range(a + 1, 4):
            correlation = torch.corrcoef(torch.stack([kept[:, a], kept[:, b]]))[0, 1]
            assert abs(float(correlation)) < 6 / math.sqrt(rows)


def test_the_words_are_splitmix64_of_a_key_from_torchs_generator():
    """Against SplitMix64 in Python's unbounded integers (Steele et al. 2014; the output for state (key + i) * gamma),
    across the int64 wrap-around and the sign bit."""
    mask = (1 << 64) - 1

    def splitmix64(state: int) -> int:
        z = (state * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    for seed in range(3):
        torch.manual_seed(seed)
        words = random_words(1000, torch.device("cpu"))
        torch.manual_seed(seed)
        key = int(torch.randint(INT64_MIN, INT64_MAX, (1,), dtype=torch.int64))
        assert [word & mask for word in words.tolist()] == [splitmix64(key + i) for i in range(1000)]
    assert random_words(7, torch.device("cpu")).shape == (7,)


def test_masks_follow_the_seed_and_differ_between_calls():
    x = torch.ones(64, 33)
    torch.manual_seed(5)
    first, second = dropout(x, 0.3), dropout(x, 0.3)
    torch.manual_seed(5)
    assert torch.equal(dropout(x, 0.3), first)
    assert not torch.equal(first, second)


def test_gradient_is_the_mask():
    torch.manual_seed(2)
    x = torch.randn(50, 70, requires_grad=True)
    out = dropout(x, 0.2)
    mask = out.detach() / x.detach()
    upstream = torch.randn_like(out)
    out.backward(upstream)
    torch.testing.assert_close(x.grad, upstream * mask)


def test_identity_in_eval_and_at_zero_and_edge_probabilities():
    x = torch.randn(8, 9)
    module = Dropout(0.4).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))  # 16 bits cannot keep anything: F.dropout
    assert dropout(x, 1e-7).shape == x.shape  # too small for 16 bits: F.dropout
    assert dropout(x.bfloat16(), 0.3).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_uses_nmtkit_dropout(name: str):
    model = build_model(MODELS[name].config_cls(), 20, 20, True)
    assert not [module for module in model.modules() if type(module) is nn.Dropout]
    assert any(isinstance(module, Dropout) for module in model.modules())


def test_code_being_compiled_takes_torchs_dropout(monkeypatch):
    """Inductor cannot compile keep_mask's 64-bit constants; compiled code draws its masks with F.dropout."""
    calls = []
    monkeypatch.setattr(torch.nn.functional, "dropout", lambda x, p, training: calls.append(p) or x)
    x = torch.ones(4, 8)
    assert not torch.equal(dropout(x, 0.5), x) and calls == []
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert torch.equal(dropout(x, 0.5), x) and calls == [0.5]
