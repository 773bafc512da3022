"""Shared fixtures: tiny random Transformers, small enough to run many tests on one CPU thread."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from nmtkit.data.dataset import encode_sources
from nmtkit.models.transformer import TransformerConfig
from nmtkit.registry import build_model

torch.set_num_threads(1)

VOCAB = 12

TINY = TransformerConfig(encoder_layers=2, decoder_layers=2, d_model=16, heads=2, ffn=32,
                         dropout=0.1, max_positions=64)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With NMTKIT_TEST_FAILURES=FILE, each failure's report is appended to FILE as it happens: a run cut by a time
    limit, as on a lent GPU machine, keeps its tracebacks. Under xdist the controller writes them (workers hand it
    their reports), not the workers as well."""
    path = os.environ.get("NMTKIT_TEST_FAILURES")
    if path and report.failed and "PYTEST_XDIST_WORKER" not in os.environ:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test starts on one thread, whatever an in-process command (`--threads 0` = all cores) set before:
    results that depend on summation order (a model trained to a threshold) must not depend on test order."""
    torch.set_num_threads(1)
    yield


@pytest.fixture
def make_transformer():
    """Build a tiny Transformer in eval mode; keyword arguments override TransformerConfig fields."""

    def build(src_vocab: int = VOCAB, tgt_vocab: int = VOCAB, shared_vocab: bool = True, seed: int = 0,
              **overrides):
        torch.manual_seed(seed)
        config = dataclasses.replace(TINY, **overrides)
        return build_model(config, src_vocab, tgt_vocab, shared_vocab).eval()

    return build


@pytest.fixture
def tiny_transformer(make_transformer):
    return make_transformer()


@pytest.fixture
def source_batch():
    """Three source sentences of different lengths (ids >= 4, so no special tokens), padded with EOS appended."""
    sentences = [[4, 5, 6], [7, 8, 9, 10, 11, 4], [5, 9, 11, 6]]
    src, src_mask = encode_sources(sentences)
    return sentences, src, src_mask
