"""Tests for nmtkit/models/bahdanau.py: every score and option, and the equations checked by hand: the attention
at step i is queried by the PREVIOUS decoder state s_{i-1}, s_0 = tanh(W_s <-h_1), and the maxout deep output."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from model_checks import assert_step_matches_forward

from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS
from nmtkit.errors import NmtkitError
from nmtkit.models.bahdanau import BahdanauConfig
from nmtkit.modules.readout import maxout
from nmtkit.registry import SCORES, build_model

VOCAB = 13
HIDDEN = 8
SOURCES = [[4, 5, 6], [7, 8, 9, 10, 11, 4], [5, 9, 11, 6, 12]]
TARGETS = [[9, 10, 4, 12], [5, 6, 7, 8, 9, 10, 11], [12, 4]]


def make_model(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    config = BahdanauConfig(**{"embed_dim": 6, "hidden": HIDDEN, "attention_hidden": 5, "dropout": 0.1,
                               "max_positions": 16, **overrides})
    return build_model(config, VOCAB, VOCAB, True).eval()


def batch():
    src, src_mask = encode_sources(SOURCES)  # (3, 7)
    return src, src_mask, pad_sequences(TARGETS, [BOS], [])  # tgt_in (3, 8)


def assert_step_equals_forward(model) -> None:
    src, src_mask, tgt_in = batch()
    attention, _ = assert_step_matches_forward(model, src, src_mask, tgt_in)
    assert torch.all(attention[0, :, 4:] == 0)  # padding gets no weight
    torch.testing.assert_close(attention.sum(-1), torch.ones(3, 8))


@pytest.mark.parametrize("score", SCORES)
def test_every_attention_score_builds_and_step_equals_forward(score):
    assert_step_equals_forward(make_model(attention=score, cell="lstm" if list(SCORES).index(score) % 2 else "gru"))


OPTIONS = list(itertools.product(["gru", "lstm"], ["maxout", "linear"], [False, True], [1, 2]))


@pytest.mark.parametrize("cell, readout, bidirectional, layers", OPTIONS)
def test_every_option_builds_and_step_equals_forward(cell, readout, bidirectional, layers):
    model = make_model(cell=cell, readout=readout, bidirectional=bidirectional, encoder_layers=layers,
                       decoder_layers=3 - layers)
    assert_step_equals_forward(model)


def additive_attention(model, query, annotations, src_mask):
    """a_ij = softmax_j(v_a^T tanh(W_a s_{i-1} + U_a h_j)) written out (Eq. 6, Appendix A.1.2): (B, H) -> (B, S)."""
    score = model.attention.score
    energies = torch.tanh(score.query_proj(query).unsqueeze(1) + score.key_proj(annotations)) @ score.vector
    return torch.softmax(energies.masked_fill(~src_mask, float("-inf")), dim=-1)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_first_attention_is_queried_by_s0_computed_from_the_backward_first_state(cell):
    model = make_model(cell=cell, encoder_layers=2)
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        annotations, _ = model.encoder(src, src_mask)  # h_j = [->h_j; <-h_j] (B, S, H)
        s0 = torch.tanh(model.init_proj(annotations[:, 0, HIDDEN // 2:]))  # s_0 = tanh(W_s <-h_1)
        expected = additive_attention(model, s0, annotations, src_mask)
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        _, _, step_attention = model.step(tgt_in[:, 0], state, memory)
        _, attention = model(src, src_mask, tgt_in, need_attention=True)
    torch.testing.assert_close(state["h0"], s0, rtol=0, atol=1e-6)
    if cell == "lstm":
        assert torch.all(state["c0"] == 0)
    torch.testing.assert_close(step_attention, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(attention[:, 0], expected, rtol=0, atol=1e-6)


def test_attention_at_step_i_is_queried_by_the_state_after_step_i_minus_1():
    model = make_model()
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        for t in range(3):
            expected = additive_attention(model, state["h0"], memory["annotations"], src_mask)
            _, state, step_attention = model.step(tgt_in[:, t], state, memory)
            torch.testing.assert_close(step_attention, expected, rtol=0, atol=1e-6)


def test_the_token_read_at_step_i_changes_the_attention_of_step_i_plus_1_only():
    model = make_model()
    src, src_mask, tgt_in = batch()
    changed = tgt_in.clone()
    changed[:, 2] = 5 + tgt_in[:, 2] % 7
    with torch.no_grad():
        _, attention = model(src, src_mask, tgt_in, need_attention=True)
        _, other = model(src, src_mask, changed, need_attention=True)
    torch.testing.assert_close(other[:, :3], attention[:, :3], rtol=0, atol=0)  # a_i depends on s_{i-1} only
    assert not torch.allclose(other[:, 3], attention[:, 3])


def test_with_several_decoder_layers_the_top_layer_queries_the_attention():
    model = make_model(decoder_layers=2)
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        assert not torch.allclose(state["h0"], state["h1"])  # one W_s per layer
        expected = additive_attention(model, state["h1"], memory["annotations"], src_mask)
        _, _, step_attention = model.step(tgt_in[:, 0], state, memory)
    torch.testing.assert_close(step_attention, expected, rtol=0, atol=1e-6)


def test_a_unidirectional_encoder_starts_the_decoder_from_its_last_state():
    model = make_model(bidirectional=False)
    src, src_mask, _ = batch()
    with torch.no_grad():
        annotations, _ = model.encoder(src, src_mask)  # (B, S, H)
        last = annotations[torch.arange(3), src_mask.sum(-1) - 1]  # h_{T_x} (B, H)
        state = model.init_state(model.encode(src, src_mask))
    torch.testing.assert_close(state["h0"], torch.tanh(model.init_proj(last)), rtol=0, atol=1e-6)


@pytest.mark.parametrize("readout", ["maxout", "linear"])
def test_readout_combines_the_previous_state_the_previous_word_and_the_context(readout):
    model = make_model(readout=readout, cell="lstm")
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        weights = additive_attention(model, state["h0"], memory["annotations"], src_mask)  # a_1 (B, S)
        context = (weights.unsqueeze(1) @ memory["annotations"]).squeeze(1)  # c_1 (B, H)
        parts = model.readout
        pre = parts.state_proj(state["h0"]) + parts.embed_proj(model.tgt_embed(tgt_in[:, 0])) \
            + parts.context_proj(context)  # t~_1 = U_o s_0 + V_o E y_0 + C_o c_1
        assert pre.shape == (3, 12 if readout == "maxout" else 6)
        expected = F.log_softmax(model.output(maxout(pre) if readout == "maxout" else pre), dim=-1)
        log_probs, _, _ = model.step(tgt_in[:, 0], state, memory)
    torch.testing.assert_close(log_probs, expected, rtol=0, atol=1e-6)


def test_maxout_takes_the_larger_of_each_pair():
    assert maxout(torch.tensor([[1.0, 3.0, -2.0, -5.0, 0.5, 0.25]])).tolist() == [[3.0, -2.0, 0.5]]


def test_output_tying_and_shared_embeddings():
    tied = make_model(tie_output=True, share_embeddings=True)
    assert tied.output.weight is tied.tgt_embed.weight
    assert tied.encoder.embedding is tied.tgt_embed
    assert_step_equals_forward(tied)
    config = BahdanauConfig(embed_dim=6, hidden=HIDDEN, share_embeddings=True)
    separate = build_model(config, VOCAB + 2, VOCAB, False)
    assert separate.encoder.embedding is not separate.tgt_embed


def test_cosine_score_keeps_its_sharpness_initialisation():
    model = make_model(attention="cosine")
    torch.testing.assert_close(model.attention.score.log_sharpness.exp(), torch.tensor(HIDDEN**0.5))


def test_bidirectional_encoder_needs_an_even_hidden_size():
    with pytest.raises(NmtkitError, match="even hidden size"):
        make_model(hidden=7)
