"""Tests for nmtkit/models/luong.py: a hand-written reference decoder (the CURRENT top state h_t queries the source,
h~_t = tanh(W_c [c_t; h_t]), input feeding), every score x window x input feeding with step == forward, the
encoder-to-decoder bridge, source reversal, weight tying and beam search over the step counter.
The local attention itself is tested in tests/test_attention_local.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from model_checks import assert_step_matches_forward

from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS
from nmtkit.decoding.search import beam_search, max_lengths
from nmtkit.errors import NmtkitError
from nmtkit.models.luong import LuongConfig
from nmtkit.modules.attention import masked_softmax
from nmtkit.modules.rnn import bridge_aligned_at_bottom, reverse_all_tokens_index
from nmtkit.registry import build_model

VOCAB = 14
TINY = LuongConfig(embed_dim=6, hidden=8, encoder_layers=2, decoder_layers=2, dropout=0.1, attention_hidden=5,
                   max_positions=16)
SOURCES = [[4, 5, 6], [7, 8, 9, 10, 11, 4], [5, 9, 11, 6, 12]]  # real lengths with EOS: 4, 7, 6
TARGETS = [[9, 10, 4, 13, 5, 6, 7, 8], [5, 6, 7], [12, 4, 4, 5]]
SCORES = ["dot", "scaled_dot", "general", "concat", "cosine", "location"]
WINDOWS = ["global", "local-m", "local-p"]


def make(seed: int = 0, src_vocab: int = VOCAB, shared_vocab: bool = True, **overrides):
    torch.manual_seed(seed)
    return build_model(dataclasses.replace(TINY, **overrides), src_vocab, VOCAB, shared_vocab).eval()


def batch():
    src, src_mask = encode_sources(SOURCES)  # (3, 7)
    return src, src_mask, pad_sequences(TARGETS, [BOS], [])  # (3, 9)


def lstm_cell(x, state, layer):
    """One LSTM step written out: i, f, g, o gates (Hochreiter & Schmidhuber 1997, torch's gate order)."""
    h, c = state
    gates = x @ layer.weight_ih_l0.T + layer.bias_ih_l0 + h @ layer.weight_hh_l0.T + layer.bias_hh_l0
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def reference_logits(model, src, src_mask, tgt_in):
    """Luong et al. 2015 with the general score, step by step: h_t from the stack, then a_t(s) from h_t (Eq. 7-8),
    c_t, h~_t = tanh(W_c [c_t; h_t]) (Eq. 5), logits W_s h~_t (Eq. 6); h~_{t-1} joins the input (Section 3.3)."""
    keys, finals = model.encoder(src, src_mask)  # (B, S, H)
    states = bridge_aligned_at_bottom(finals, model.config.decoder_layers)
    feed = keys.new_zeros(src.size(0), model.config.hidden)
    w_general = model.attention.score.weight.weight  # (H, H): score(h_t, h_s) = h_t^T W h_s
    outputs = []
    for t in range(tgt_in.size(1)):
        x = model.tgt_embed(tgt_in[:, t])  # (B, E)
        for index, layer in enumerate(model.decoder.layers):
            inputs = torch.cat([x, feed], -1) if index == 0 and model.config.input_feeding else x
            states[index] = lstm_cell(inputs, states[index], layer)
            x = states[index][0]
        scores = torch.einsum("bh,hk,bsk->bs", x, w_general, keys)  # the CURRENT h_t is the query
        align = masked_softmax(scores, src_mask)  # (B, S)
        context = torch.einsum("bs,bsh->bh", align, keys)
        feed = torch.tanh(model.combine.weight @ torch.cat([context, x], -1).unsqueeze(-1)).squeeze(-1)
        outputs.append(feed @ model.output.weight.T + model.output.bias)
    return torch.stack(outputs, dim=1)  # (B, T, V)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_forward_matches_a_hand_written_decoder(input_feeding):
    model = make(input_feeding=input_feeding, attention="general")
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        logits, _ = model(src, src_mask, tgt_in)
        expected = reference_logits(model, src, src_mask, tgt_in)
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)


def test_input_feeding_widens_the_bottom_decoder_input_only():
    fed, plain = make(input_feeding=True), make(input_feeding=False)
    assert fed.decoder.layers[0].input_size == TINY.embed_dim + TINY.hidden
    assert plain.decoder.layers[0].input_size == TINY.embed_dim
    assert fed.decoder.layers[1].input_size == plain.decoder.layers[1].input_size == TINY.hidden


def check_attention(attention, src_mask, window, width):
    """Zero on padding; rows sum to 1 (global, local-m) or at most 1 (local-p); nothing outside the window."""
    lengths = src_mask.sum(-1)
    assert torch.all(attention.masked_select(~src_mask.unsqueeze(1)) == 0)
    sums = attention.sum(-1)  # (B, T)
    if window == "local-p":
        assert torch.all(sums <= 1 + 1e-5) and torch.all(sums > 0)
        support = attention > 0
        assert torch.all(support.sum(-1) <= 2 * width + 1)
        first, last = support.float().argmax(-1), attention.size(-1) - 1 - support.flip(-1).float().argmax(-1)
        assert torch.all(last - first <= 2 * width)
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-5)
    if window == "local-m":
        positions = torch.arange(attention.size(-1))
        for t in range(attention.size(1)):
            centers = torch.minimum(torch.tensor(t), lengths - 1).unsqueeze(-1)  # (B, 1)
            outside = (positions - centers).abs() > width  # (B, S)
            assert torch.all(attention[:, t].masked_select(outside) == 0)


@pytest.mark.parametrize("input_feeding", [True, False])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("score", SCORES)
def test_step_equals_forward_for_every_score_window_and_feeding(score, window, input_feeding):
    width = 1
    model = make(attention=score, window=window, window_width=width, input_feeding=input_feeding,
                 embed_dim=8 if score in ("dot", "scaled_dot", "cosine") else 6)
    src, src_mask, tgt_in = batch()
    attention, state = assert_step_matches_forward(model, src, src_mask, tgt_in)
    assert state["position"].tolist() == [tgt_in.size(1)] * 3
    check_attention(attention, src_mask, window, width)
    assert model(src, src_mask, tgt_in)[1] is None


@pytest.mark.parametrize("overrides", [dict(cell="gru"), dict(bidirectional=True), dict(reverse_source=True),
                                       dict(encoder_layers=1, decoder_layers=3), dict(encoder_layers=3,
                                                                                      decoder_layers=1)])
def test_step_equals_forward_for_other_shapes(overrides):
    model = make(window="local-p", **overrides)
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        expected = F.log_softmax(model(src, src_mask, tgt_in)[0], dim=-1)
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        for t in range(tgt_in.size(1)):
            log_probs, state, _ = model.step(tgt_in[:, t], state, memory)
            torch.testing.assert_close(log_probs, expected[:, t], rtol=0, atol=1e-5)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_decoder_starts_from_the_encoders_final_states(bidirectional):
    model = make(encoder_layers=2, decoder_layers=3, bidirectional=bidirectional)
    src, src_mask, _ = batch()
    with torch.no_grad():
        _, finals = model.encoder(src, src_mask)
        state = model.init_state(model.encode(src, src_mask))
    for index, source in enumerate([0, 1, 1]):
        torch.testing.assert_close(state[f"h{index}"], finals[source][0])
        torch.testing.assert_close(state[f"c{index}"], finals[source][1])
    assert torch.equal(state["feed"], torch.zeros(3, TINY.hidden))
    assert state["position"].dtype == torch.long and state["position"].tolist() == [0, 0, 0]


def test_reverse_source_encodes_backwards_but_keeps_keys_in_source_order():
    model = make(reverse_source=True)
    forward_model = make(reverse_source=False)
    src, src_mask = encode_sources([[4, 5, 6], [7, 8, 9, 10, 11]])
    with torch.no_grad():
        keys = model.encode(src, src_mask)["keys"]
        reversed_src = src.gather(1, reverse_all_tokens_index(src_mask))
        plain_keys, _ = forward_model.encoder(reversed_src, src_mask)
    for b, length in enumerate(src_mask.sum(-1).tolist()):
        torch.testing.assert_close(keys[b, :length], plain_keys[b, :length].flip(0))
        assert torch.all(keys[b, length:] == 0)
    assert reversed_src[0, :4].tolist() == [3, 6, 5, 4]  # EOS first: the encoder ends on the first word


def test_reverse_source_keeps_padding_invariance():
    model = make(reverse_source=True, window="local-m")
    short_src, long_src = [4, 5, 6], [7, 8, 9, 10, 11, 4, 5]
    short_tgt, long_tgt = [9, 10, 4], [5, 6, 7, 8, 9, 10, 11]
    with torch.no_grad():
        alone, _ = model(*encode_sources([short_src]), pad_sequences([short_tgt], [BOS], []))
        both, _ = model(*encode_sources([long_src, short_src]), pad_sequences([long_tgt, short_tgt], [BOS], []))
    torch.testing.assert_close(both[1, : len(short_tgt) + 1], alone[0], rtol=0, atol=1e-5)


def test_tie_output_needs_embed_dim_equal_to_hidden():
    with pytest.raises(NmtkitError, match="embed_dim == hidden"):
        make(tie_output=True, embed_dim=6, hidden=8)
    tied = make(tie_output=True, embed_dim=8, hidden=8)
    assert tied.output.weight is tied.tgt_embed.weight


def test_embeddings_are_shared_only_for_a_shared_vocabulary():
    shared = make(share_embeddings=True)
    assert shared.encoder.embedding is shared.tgt_embed
    separate = make(share_embeddings=True, src_vocab=17, shared_vocab=False)
    assert separate.encoder.embedding is not separate.tgt_embed
    assert separate.encoder.embedding.num_embeddings == 17
    assert torch.all(separate.encoder.embedding.weight[0] == 0) and torch.all(separate.tgt_embed.weight[0] == 0)


def test_recurrent_weights_are_uniform_within_the_init_scale():
    model = make(init_scale=0.05)
    for module in (model.encoder.layers, model.decoder, model.combine, model.output):
        assert all(parameter.abs().max() <= 0.05 for parameter in module.parameters())


@pytest.mark.parametrize("window", ["local-m", "local-p"])
def test_batched_beam_search_with_local_attention_equals_one_sentence_at_a_time(window):
    model = make(seed=1, window=window, window_width=1)
    src, src_mask = encode_sources(SOURCES)
    beams = beam_search(model, src, src_mask, max_lengths(src_mask, 1.0, 3), beam_size=3)
    for index, sentence in enumerate(SOURCES):
        one_src, one_mask = encode_sources([sentence])
        [one] = beam_search(model, one_src, one_mask, max_lengths(one_mask, 1.0, 3), beam_size=3)
        assert [hyp.tokens for hyp in beams[index]] == [hyp.tokens for hyp in one]
        assert [hyp.score for hyp in beams[index]] == pytest.approx([hyp.score for hyp in one], abs=1e-4)
