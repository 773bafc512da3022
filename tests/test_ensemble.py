"""Ensembles decode through the same interface: averaged log-probabilities, exact incremental state."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmtkit.data.subword import BOS
from nmtkit.decoding.ensemble import Ensemble
from nmtkit.decoding.search import beam_search, greedy_search, max_lengths


def step_through(model, src, src_mask, tgt_in):
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    outputs = []
    for position in range(tgt_in.size(1)):
        log_probs, state, _ = model.step(tgt_in[:, position], state, memory)
        outputs.append(log_probs)
    return torch.stack(outputs, dim=1)  # (B, T, V)


def test_an_ensemble_of_one_is_the_model(make_transformer, source_batch):
    _, src, src_mask = source_batch
    model = make_transformer(seed=1)
    tgt_in = torch.tensor([[BOS, 5, 6, 7]] * src.size(0))
    alone = step_through(model, src, src_mask, tgt_in)
    assert torch.allclose(step_through(Ensemble([model]).eval(), src, src_mask, tgt_in), alone, atol=1e-5)


def test_members_log_probs_are_averaged_and_renormalised(make_transformer, source_batch):
    _, src, src_mask = source_batch
    first, second = make_transformer(seed=1), make_transformer(seed=2, d_model=32, heads=4)
    ensemble = Ensemble([first, second]).eval()
    tgt_in = torch.tensor([[BOS, 5, 6, 7]] * src.size(0))
    expected = F.log_softmax((step_through(first, src, src_mask, tgt_in)
                              + step_through(second, src, src_mask, tgt_in)) / 2, dim=-1)
    stepped = step_through(ensemble, src, src_mask, tgt_in)
    assert torch.allclose(stepped, expected, atol=1e-5)
    with torch.no_grad():
        forward, attention = ensemble(src, src_mask, tgt_in)
    assert torch.allclose(forward, stepped, atol=1e-5)


def test_search_runs_on_an_ensemble(make_transformer, source_batch):
    _, src, src_mask = source_batch
    ensemble = Ensemble([make_transformer(seed=1), make_transformer(seed=2)]).eval()
    limit = max_lengths(src_mask, 1.0, 3)
    greedy = greedy_search(ensemble, src, src_mask, limit)
    beams = beam_search(ensemble, src, src_mask, limit, beam_size=1)
    assert [hyp.tokens for hyp in greedy] == [hyps[0].tokens for hyps in beams]
    wide = beam_search(ensemble, src, src_mask, limit, beam_size=4)
    assert all(len(hyps) == 4 for hyps in wide)


def test_ensemble_of_a_transformer_and_an_rnn_searches_like_its_members_memory_repeated(
        make_transformer, source_batch, monkeypatch):
    """The Transformer member keeps one memory row per sentence, the Luong member one per beam: beam search
    over the mixed memory equals beam search with every member's memory repeated per beam."""
    from nmtkit.models.base import EncoderDecoder
    from nmtkit.models.luong import Luong, LuongConfig

    _, src, src_mask = source_batch
    torch.manual_seed(3)
    rnn = Luong(LuongConfig(embed_dim=16, hidden=16, encoder_layers=1, decoder_layers=1), 12, 12, True).eval()
    ensemble = Ensemble([make_transformer(seed=1, tie_output=False), rnn]).eval()
    limit = max_lengths(src_mask, 1.5, 2)
    mixed = beam_search(ensemble, src, src_mask, limit, beam_size=3)
    monkeypatch.setattr(type(ensemble.members[0]), "beam_memory", EncoderDecoder.beam_memory)
    repeated = beam_search(ensemble, src, src_mask, limit, beam_size=3)
    assert [[hyp.tokens for hyp in hyps] for hyps in mixed] == [[hyp.tokens for hyp in hyps] for hyps in repeated]
    assert [hyps[0].score for hyps in mixed] == pytest.approx([hyps[0].score for hyps in repeated], abs=1e-5)
