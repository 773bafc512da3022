"""Ensembles decode through the same interface: averaged log-probabilities, exact incremental state."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nmtkit.data.subword import BOS
from nmtkit.ensemble import Ensemble
from nmtkit.search import beam_search, greedy_search, max_lengths


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
