"""Linear time by test (STYLE rule 17): time a function on an adversarial input family at two sizes, n and 8n, and
fail when the ratio shows super-linear growth.

A family is a function `size -> input` (`"<b>" * size`, `"%" + "0" * size`, ...). `assert_linear` first grows the
size until one call takes `MIN_SECONDS` of CPU time (so the small size is well above the timer's noise) or the input
reaches `MAX_LENGTH` items (past it the memory, not the code, sets the pace: strings of megabytes are fresh pages at
each call, and 8n falls out of the caches); a call still cheaper than that is timed as many calls in a row. Both sizes
are timed, the best of a few runs each, on the process's CPU clock (another process on the machine slows the wall
clock, not this), with the garbage collector off (not run before: with torch loaded one collection takes 0.1 s).
Linear work grows 8x, n log n about 10x, quadratic work 64x: the bound, `MAX_RATIO` (24x), leaves room for noise and
cache effects on either side and catches anything quadratic.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

FACTOR = 8
MAX_RATIO = 24.0
MIN_SECONDS = 0.004
MAX_LENGTH = 1 << 15  # items (characters, bytes, elements) of the small size's input, at most
MAX_CALLS = 1024


def cpu_seconds(function: Callable[[Any], Any], argument: Any, repeats: int = 3, calls: int = 1) -> float:
    """The least CPU time of a call of `function(argument)`, over `repeats` runs of `calls` calls in a row."""
    best = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.process_time()
            for _ in range(calls):
                function(argument)
            best = min(best, (time.process_time() - start) / calls)
    finally:
        if enabled:
            gc.enable()
    return best


def _length(argument: Any) -> int:
    return len(argument) if hasattr(argument, "__len__") else 0


def growth(function: Callable[[Any], Any], family: Callable[[int], Any], start: int = 16,
           factor: int = FACTOR) -> tuple[int, float, float]:
    """(n, seconds a call at n, seconds a call at factor * n): n the first size from `start` (doubling) whose call
    takes at least MIN_SECONDS or whose input holds MAX_LENGTH items."""
    size = start
    function(family(size))  # warm-up: imports, caches, compiled patterns
    small = cpu_seconds(function, family(size))
    while small < MIN_SECONDS and _length(family(size)) < MAX_LENGTH:
        size *= 2
        small = cpu_seconds(function, family(size))
    calls = max(1, min(MAX_CALLS, math.ceil(MIN_SECONDS / max(small, 1e-7))))
    if calls > 1:
        small = cpu_seconds(function, family(size), calls=calls)
    return size, small, cpu_seconds(function, family(size * factor), repeats=2, calls=max(1, calls // factor))


def assert_linear(function: Callable[[Any], Any], family: Callable[[int], Any], start: int = 16,
                  name: str = "") -> None:
    """Fail when `function` on `family(8n)` takes more than MAX_RATIO times what it takes on `family(n)`; a ratio
    just over the bound is measured once more before it fails (a machine's hiccup is not a finding)."""
    size, small, large = growth(function, family, start)
    if large / small > MAX_RATIO:
        size, small, large = growth(function, family, size)
    assert large / small <= MAX_RATIO, (
        f"{name or getattr(family, '__name__', 'family')}: {small * 1e3:.2f} ms at n={size}, {large * 1e3:.2f} ms "
        f"at n={size * FACTOR}: {large / small:.1f}x for {FACTOR}x the input (at most {MAX_RATIO:g}x: super-linear)")
