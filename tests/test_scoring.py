"""nmtkit/scoring/ (entropy.py, selection.py, outputs.py): the cross-entropies against a float64 computation, batching
that changes no score, the dual conditional score's properties on fixed-probability models, which pairs a share or a
threshold keeps, and kept lines copied byte for byte (the command line in test_score_pairs_cli.py)."""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from devices import device_params
from hypothesis import given, settings
from hypothesis import strategies as st
from pair_models import SOURCES, TARGETS, save_model, subword

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.config.run import build_config
from nmtkit.data.dataset import encode_sources
from nmtkit.data.files import replacing
from nmtkit.data.subword import BOS, EOS
from nmtkit.decoding.ensemble import load_models
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder
from nmtkit.scoring.command import PairFiles, Scores, copy_pairs, score_lines
from nmtkit.scoring.entropy import Direction, score_chunk, token_entropies
from nmtkit.scoring.selection import (
    EMPTY,
    KEEP_SHARE,
    MIN_SCORE,
    TOO_LONG,
    adequacy,
    dual_cost,
    kept_count,
    removal_reasons,
)

PAIRS = [([4, 5, 6], [7, 8, 9, 10]), ([11, 4], [5]), ([6, 7, 8, 9, 10, 11, 12], [13, 4, 5, 6, 7, 8]), ([9], [10, 11])]


@pytest.fixture(scope="module")
def vocab():
    return subword()


@pytest.fixture(scope="module", params=["transformer", "luong"])
def loaded(request, vocab, tmp_path_factory) -> LoadedModel:
    path = save_model(tmp_path_factory.mktemp("model") / "model.pt", vocab, 0, request.param)
    return load_models([path], torch.device("cpu"))


@torch.no_grad()
def float64_entropies(model: EncoderDecoder, pairs, device: str) -> list[float]:
    """-1/|y| sum log softmax(logits)[y_t] in float64, one pair at a time, from the model's own forward."""
    found = []
    for source, target in pairs:
        src, src_mask = encode_sources([source])
        logits, _ = model(src.to(device), src_mask.to(device), torch.tensor([[BOS, *target]], device=device))
        log_probs = torch.log_softmax(logits.double(), dim=-1)[0]  # (T, V)
        found.append(-sum(float(log_probs[t, token]) for t, token in enumerate([*target, EOS])) / (len(target) + 1))
    return found


@pytest.mark.parametrize("device", device_params())
def test_token_entropies_are_the_float64_cross_entropy_per_token(loaded, device):
    model = loaded.model.to(device)
    found = token_entropies(model, [s for s, _ in PAIRS], [t for _, t in PAIRS], torch.device(device))
    assert found.dtype == np.float64
    np.testing.assert_allclose(found, float64_entropies(model, PAIRS, device), rtol=1e-5, atol=1e-6)
    loaded.model.to("cpu")


def direction(loaded: LoadedModel, reverse: bool = False, tag=()) -> Direction:
    return Direction("forward", loaded, reverse, list(tag), None)


def test_batching_and_padding_change_no_score(loaded):
    sources, targets = [s for s, _ in PAIRS] * 3, [t for _, t in PAIRS] * 3
    rows, cpu = np.arange(len(sources)), torch.device("cpu")
    together = direction(loaded).entropies(sources, targets, rows, 10_000, cpu, 1)
    alone = direction(loaded).entropies(sources, targets, rows, 1, cpu, 1)  # a batch a pair: no padding
    np.testing.assert_allclose(together, alone, rtol=1e-6)
    np.testing.assert_allclose(direction(loaded).entropies(sources, targets, rows[::-1].copy(), 10_000, cpu, 1),
                               together[::-1], rtol=1e-6)  # each score where its pair is, in any order


class CopyModel(EncoderDecoder):
    """Fixed probabilities: at target position t the logit of the source's token t (EOS included) is `boost`, every
    other logit 0; a position past the source's end is uniform."""

    def __init__(self, vocab_size: int, boost: float = 8.0):
        super().__init__()
        self.vocab_size, self.boost = vocab_size, boost

    def forward(self, src, src_mask, tgt_in, need_attention=False):
        logits = torch.zeros(*tgt_in.shape, self.vocab_size)  # (B, T, V)
        width = min(src.size(1), tgt_in.size(1))
        logits[:, :width].scatter_(2, src[:, :width].unsqueeze(2), self.boost)
        return logits, None


def copy_direction(vocab, reverse: bool) -> Direction:
    return direction(LoadedModel(build_config({}), CopyModel(vocab.vocab_size), vocab, vocab), reverse)


def test_a_copied_pair_has_the_exact_entropy_and_outranks_every_misaligned_pair(vocab):
    """With a model that expects the target to repeat the source, a pair and its copy score exactly
    log(e^8 + V - 1) - 8 nats a token in both directions; every misaligned pair scores lower."""
    directions = (copy_direction(vocab, False), copy_direction(vocab, True))
    pairs = [(line, line) for line in SOURCES] + [(line, SOURCES[i - 1]) for i, line in enumerate(SOURCES)]
    h_fwd, h_bwd, unscored = score_chunk(directions, pairs, 4000, torch.device("cpu"), 1)
    assert not unscored.any()
    exact = math.log(math.exp(8) + vocab.vocab_size - 1) - 8
    np.testing.assert_allclose(h_fwd[: len(SOURCES)], exact, rtol=1e-6)
    np.testing.assert_allclose(h_bwd[: len(SOURCES)], exact, rtol=1e-6)
    scores = adequacy(dual_cost(h_fwd, h_bwd))
    assert scores[: len(SOURCES)].min() > scores[len(SOURCES):].max()
    assert np.all((scores > 0) & (scores <= 1))


def test_the_reverse_model_reads_the_target_as_its_source(loaded):
    """One model in both directions: the reverse entropy of (a, b) is the forward entropy of (b, a)."""
    directions, cpu = (direction(loaded), direction(loaded, reverse=True)), torch.device("cpu")
    pairs = list(zip(SOURCES, TARGETS))
    h_fwd, h_bwd, _ = score_chunk(directions, pairs, 4000, cpu, 1)
    swapped_fwd, swapped_bwd, _ = score_chunk(directions, [(b, a) for a, b in pairs], 4000, cpu, 1)
    np.testing.assert_allclose(h_bwd, swapped_fwd, rtol=1e-6)
    np.testing.assert_allclose(h_fwd, swapped_bwd, rtol=1e-6)
    assert not np.allclose(h_fwd, h_bwd)


def test_empty_sides_and_long_pairs_are_not_scored(vocab):
    directions = (copy_direction(vocab, False), copy_direction(vocab, True))
    limit = directions[0].limit
    pairs = [("uno", ""), (" \t", "UNO"), ("", ""), (" ".join(["uno"] * (limit + 1)), "UNO"),
             ("uno", " ".join(["UNO"] * limit)), ("uno", "UNO")]
    h_fwd, h_bwd, unscored = score_chunk(directions, pairs, 4000, torch.device("cpu"), 1)
    assert unscored.tolist() == [EMPTY, EMPTY, EMPTY, TOO_LONG, 0, 0]  # limit tokens fit, limit + 1 do not
    assert np.isinf(h_fwd[:4]).all() and np.isinf(h_bwd[:4]).all() and np.isfinite(h_fwd[4:]).all()
    assert score_lines(h_fwd, h_bwd, unscored, False).splitlines()[:4] == ["0.0"] * 4


def test_a_side_its_model_reads_as_no_subwords_is_empty():
    """An NFKC rule drops control and zero-width characters: such a side is nothing to the model, not a pair to
    score as an empty sentence."""
    nfkc = subword(normalization="nmt_nfkc")
    directions = (copy_direction(nfkc, False), copy_direction(nfkc, True))
    _, _, unscored = score_chunk(directions, [("\x01", "UNO"), ("uno", "\u200b"), ("uno", "UNO")], 4000,
                                 torch.device("cpu"), 1)
    assert unscored.tolist() == [EMPTY, EMPTY, 0]


def test_the_dual_cost_penalises_disagreement_and_never_gives_nan():
    cost = dual_cost(np.array([1.0, 0.5, 2.0, np.inf, np.inf]), np.array([1.0, 1.5, 2.0, 1.0, np.inf]))
    assert cost[:3].tolist() == [1.0, 2.0, 2.0]  # same mean entropy, but the directions disagree: as bad as 2 and 2
    assert np.isinf(cost[3:]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert adequacy(cost).tolist() == [math.exp(-1), math.exp(-2), math.exp(-2), 0.0, 0.0]


@pytest.mark.parametrize("keep, scored, count", [(0.7, 10, 7), (0.8, 3, 3), (0.5, 3, 2), (1e-9, 5, 1),
                                                 (1.0, 4, 4), (0.3, 0, 0), (0.29, 100, 29)])
def test_a_keep_share_keeps_the_ceiling_of_its_product(keep, scored, count):
    assert kept_count(keep, scored) == count


def test_removal_reasons_on_fixed_costs():
    unscored = np.array([0, EMPTY, 0, 0, TOO_LONG, 0, 0], dtype=np.int8)
    cost = np.array([0.5, np.inf, 3.0, 0.5, np.inf, 1.0, 2.0])
    everything = removal_reasons(unscored, cost, 1.0, 0.0)
    assert everything.tolist() == [0, EMPTY, 0, 0, TOO_LONG, 0, 0]
    share = removal_reasons(unscored, cost, 0.6, 0.0)  # ceil(0.6 x 5 scored) = 3: costs 0.5, 0.5, 1.0
    assert share.tolist() == [0, EMPTY, KEEP_SHARE, 0, TOO_LONG, 0, KEEP_SHARE]
    tie = removal_reasons(unscored, cost, 0.2, 0.0)  # one of the two 0.5s: the earlier line
    assert tie.tolist() == [0, EMPTY, KEEP_SHARE, KEEP_SHARE, TOO_LONG, KEEP_SHARE, KEEP_SHARE]
    threshold = removal_reasons(unscored, cost, 1.0, math.exp(-1.5))  # costs above 1.5 go
    assert threshold.tolist() == [0, EMPTY, MIN_SCORE, 0, TOO_LONG, 0, MIN_SCORE]
    both = removal_reasons(unscored, cost, 0.6, math.exp(-2.5))  # line 7: outside the share, above the threshold
    assert both.tolist() == [0, EMPTY, MIN_SCORE, 0, TOO_LONG, 0, KEEP_SHARE]


LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=20) | \
    st.sampled_from(["", "\r", "x\r", "\t", "\u2028", "\x85", "\x0c", "a\rb", "\ufeff"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LINE, LINE, st.integers(0, 4)), min_size=1, max_size=12), st.booleans())
def test_kept_pairs_come_out_byte_for_byte(rows, final_newline):
    """Whatever a kept line holds (CR, other line separators, a BOM, tabs), its bytes come out as they went in,
    each line ending in a newline; a removed pair is listed with its text."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        final_newline = final_newline or "" in rows[-1][:2]  # else an empty last line would not be a line
        for side, index in (("src", 0), ("tgt", 1)):
            text = "\n".join(row[index] for row in rows) + ("\n" if final_newline else "")
            (root / side).write_bytes(text.encode("utf-8"))
        reasons = np.array([row[2] for row in rows], dtype=np.int8)
        scores = Scores(np.ones(len(rows)), np.ones(len(rows)), np.zeros(len(rows), dtype=np.int8))
        files = PairFiles(root / "src", root / "tgt", root / "m", root / "r")
        with open(root / "a", "wb") as kept_src, open(root / "b", "wb") as kept_tgt, open(root / "c", "wb") as removed:
            copy_pairs(files, scores, reasons, 1 << 20, [kept_src, kept_tgt, removed])
        for name, index in (("a", 0), ("b", 1)):
            expected = "".join(row[index] + "\n" for row in rows if not row[2])
            assert (root / name).read_bytes() == expected.encode("utf-8")
        assert (root / "c").read_bytes().count(b"\n") == int((reasons != 0).sum())


def test_replacing_names_its_files_and_leaves_standard_outputs_errors_alone(tmp_path):
    (tmp_path / "kept").write_bytes(b"before\n")
    with pytest.raises(NmtkitError, match="cannot write .*kept: No space left on device; the files there are kept"):
        with replacing([tmp_path / "kept"]) as (file,):
            file.write(b"new\n")
            raise OSError(28, "No space left on device")
    assert (tmp_path / "kept").read_bytes() == b"before\n" and len(list(tmp_path.iterdir())) == 1
    for error in (BrokenPipeError(32, "Broken pipe"), OSError(28, "No space left on device")):
        with pytest.raises(type(error)):  # scores to stdout: `| head` ends the command quietly (cli.py)
            with replacing([]):
                raise error
