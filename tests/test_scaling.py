"""The scaling helper itself (`tests/scaling.py`): it passes linear work and catches quadratic work."""

from __future__ import annotations

import pytest
from scaling import assert_linear


def linear(items: list[int]) -> int:
    return sum(items)


def quadratic(items: list[int]) -> int:
    return sum(items[:index].count(1) for index in range(len(items)))  # each slice copies: n^2 / 2 element copies


def test_linear_work_passes():
    assert_linear(linear, lambda size: [0] * size, start=1024)


def test_quadratic_work_fails():
    with pytest.raises(AssertionError, match="super-linear"):
        assert_linear(quadratic, lambda size: [0] * size, start=64)
