"""Choosing a reduced precision by measuring it on the model at hand, never by CPU flags alone.

A CPU that lists AVX512-BF16 may still run a bf16 autocast training step slower than float32 (an Intel Xeon without
AMX: 0.71x in benchmarks/train_speed.py), while another CPU with the same flag runs it faster. So `train.amp=auto`
times a few real forward/backward passes in each candidate precision and keeps the reduced one only when it is
clearly faster; `translate --bf16` times a short search the same way and warns when it would be slower.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable

import torch

from nmtkit.runtime.device import native_bf16

log = logging.getLogger(__name__)

MARGIN = 0.95  # a reduced precision must take at most 95% of float32's time: measurement noise never picks it
ROUNDS = 2  # each precision is timed in turn this many times (the fastest round counts), after one warm-up call


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(run: Callable[[], None], device: torch.device) -> float:
    """Seconds one call of `run` takes, the device's queued work included."""
    synchronize(device)
    started = time.perf_counter()
    run()
    synchronize(device)
    return time.perf_counter() - started


def time_precisions(run: Callable[[torch.dtype | None], None], candidates: list[torch.dtype | None],
                    device: torch.device) -> dict[torch.dtype | None, float]:
    """The fastest of `ROUNDS` timings of `run(dtype)` for each candidate (None = float32), each warmed up once;
    the candidates take turns, so a slow phase of the machine does not favour one of them."""
    for dtype in candidates:
        run(dtype)
    best = {dtype: float("inf") for dtype in candidates}
    for _ in range(ROUNDS):
        for dtype in candidates:
            best[dtype] = min(best[dtype], time_call(lambda dtype=dtype: run(dtype), device))
    return best


def fastest(timings: dict[torch.dtype | None, float]) -> torch.dtype | None:
    """float32 (None) unless a reduced precision takes at most MARGIN of its time; then the fastest of those."""
    reduced = {dtype: seconds for dtype, seconds in timings.items() if dtype is not None}
    if not reduced:
        return None
    dtype = min(reduced, key=reduced.get)
    return dtype if reduced[dtype] <= MARGIN * timings[None] else None


def auto_candidates(device: torch.device) -> list[torch.dtype | None]:
    """What `amp=auto` measures: float32 and bf16, where the device has bf16 kernels at all (a CPU without them
    emulates bf16, which is never faster; a flag may rule bf16 out, only a measurement can rule it in)."""
    return [None, torch.bfloat16] if native_bf16(device) else [None]


def decoding_timings(model: torch.nn.Module, vocab_size: int, dtype: torch.dtype,
                     device: torch.device, rows: int = 40) -> dict[torch.dtype | None, float]:
    """Seconds of a 12-step greedy search over `rows` made-up sources of 20 subwords, by the model in float32 and
    by a copy of it in `dtype` (converting the model there and back would round its float32 weights)."""
    from nmtkit.data.dataset import encode_sources
    from nmtkit.decoding.search import greedy_search

    sources = [[4 + (row * 7 + position) % (vocab_size - 4) for position in range(20)] for row in range(rows)]
    src, src_mask = (tensor.to(device) for tensor in encode_sources(sources))
    limit = torch.full((rows,), 12, device=device)
    copies = {None: model, dtype: copy.deepcopy(model).to(dtype)}
    return time_precisions(lambda chosen: greedy_search(copies[chosen], src, src_mask, limit, min_len=11),
                           [None, dtype], device)


def describe(timings: dict[torch.dtype | None, float]) -> str:
    return ", ".join(f"{dtype_name(dtype)} {seconds * 1000:.0f} ms" for dtype, seconds in timings.items())


def dtype_name(dtype: torch.dtype | None) -> str:
    return "float32" if dtype is None else str(dtype).removeprefix("torch.")
