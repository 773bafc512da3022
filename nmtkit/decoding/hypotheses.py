"""What a search finds and how it ranks what it finds: `Hypothesis`, `LengthPenalty` and the output length limit.

Shared by nmtkit's own searches (`nmtkit.decoding.search`) and CTranslate2's (`nmtkit.translate.ctranslate2_engine`).
This module imports no torch, so that translating with an exported model never does (importing torch takes about 2
seconds, ten times CTranslate2's whole start).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

_FLOAT32 = struct.Struct("f")


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-normalised log-probability used for ranking
    log_prob: float = 0.0  # total log-probability including EOS
    attention: list[list[float]] = field(default_factory=list)
    constraints_met: bool = True  # False: its line's constraints could not all be met, and it ignores them


@dataclass(frozen=True)
class LengthPenalty:
    """Ranks a finished hypothesis by log P(Y|X) / lp(|Y|) - word_penalty * |Y| + cp(X; Y), |Y| counting the EOS.

    lp(|Y|) is 1 for `none`, |Y| for `average`, ((5 + |Y|) / 6)^alpha for `gnmt` (Wu et al. 2016, Eq. 14) and
    ((beta + |Y|) / (beta + 1))^alpha for `sockeye` (Hieber et al. 2018). A negative word penalty rewards length.
    `coverage` > 0 adds GNMT's coverage penalty with that weight (`nmtkit.decoding.search.coverage_penalty`; needs
    attention).
    """

    kind: str = "average"
    alpha: float = 1.0
    beta: float = 0.0
    word_penalty: float = 0.0
    coverage: float = 0.0

    def __post_init__(self):
        if self.kind not in ("none", "average", "gnmt", "sockeye"):
            raise ValueError(f"unknown length penalty {self.kind!r}")

    def divisor(self, length: int) -> float:
        if self.kind == "average":
            return float(length)
        if self.kind == "gnmt":
            return ((5.0 + length) / 6.0) ** self.alpha
        if self.kind == "sockeye":
            return ((self.beta + length) / (self.beta + 1.0)) ** self.alpha
        return 1.0

    def __call__(self, log_prob: float, length: int) -> float:
        return log_prob / self.divisor(length) - self.word_penalty * length

    @property
    def monotone(self) -> bool:
        """Whether a hypothesis' score can only fall as it grows, so a finished one that beats every live beam wins."""
        return self.kind == "none" and self.word_penalty >= 0 and self.coverage == 0


def length_limits(src_lengths: Sequence[int], a: float, b: int, limit: int = 1024) -> list[int]:
    """Each sentence's output limit a * |src| + b (EOS included), at least 1 and at most `limit`; computed in
    float32 (as on a GPU) and truncated toward zero."""
    a32, b32 = float32(a), float32(b)
    return [min(max(int(float32(float32(float32(length) * a32) + b32)), 1), limit) for length in src_lengths]


def float32(value: float) -> float:
    """`value` rounded to the nearest float32. A float32 sum or product computed in float64 and then rounded this
    way is the float32 operation's result (float64 has more than twice float32's precision), so float32 arithmetic
    needs no numpy, which would add a tenth of a second to the start of `nmtkit translate` with an exported
    model."""
    return _FLOAT32.unpack(_FLOAT32.pack(value))[0]
