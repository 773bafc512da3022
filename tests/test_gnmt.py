"""Tests for nmtkit/models/gnmt.py: what makes GNMT that model (Wu et al. 2016): residual connections from the third
layer up, attention queried with the bottom decoder layer, the context fed to every decoder layer; step == forward
for every score, cell and `attention_from`; configuration errors."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from model_checks import assert_step_matches_forward

from nmtkit.data.dataset import pad_sequences
from nmtkit.data.subword import BOS
from nmtkit.errors import NmtkitError
from nmtkit.models.gnmt import GNMTConfig
from nmtkit.modules.attention import masked_softmax
from nmtkit.registry import SCORES, build_model

VOCAB = 12
TINY = GNMTConfig(embed_dim=6, hidden=8, encoder_layers=4, decoder_layers=4, attention_hidden=5, dropout=0.1,
                  max_positions=32)
TARGETS = [[9, 10, 4], [5, 6, 7, 8, 9], [11]]


def make_gnmt(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return build_model(dataclasses.replace(TINY, **overrides), VOCAB, VOCAB, True).eval()


def target_inputs(targets: list[list[int]]) -> torch.Tensor:
    return pad_sequences(targets, [BOS], [])  # (B, T) BOS + target, PAD-padded


def zero_(*modules) -> None:
    """Zero weights make an LSTM/GRU layer output zeros, so only a skip path can carry its input upwards."""
    with torch.no_grad():
        for module in modules:
            for parameter in module.parameters():
                parameter.zero_()


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("attention_from", ["previous", "current"])
@pytest.mark.parametrize("score", SCORES)
def test_step_reproduces_forward(source_batch, score, attention_from, cell):
    model = make_gnmt(attention=score, attention_from=attention_from, cell=cell)
    _, src, src_mask = source_batch
    tgt_in = target_inputs(TARGETS)
    attention, _ = assert_step_matches_forward(model, src, src_mask, tgt_in)
    assert torch.all(attention[0, :, 4:] == 0)  # the first sentence has 3 tokens and EOS


def test_encoder_residual_connections_start_at_the_third_layer(source_batch):
    _, src, src_mask = source_batch
    model = make_gnmt()
    two_layers = make_gnmt(encoder_layers=2)
    two_layers.load_state_dict(model.state_dict(), strict=False)  # the same bottom two layers
    zero_(*model.encoder.layers[2:])
    with torch.no_grad():
        torch.testing.assert_close(model.encode(src, src_mask)["keys"], two_layers.encode(src, src_mask)["keys"])
        zero_(model.encoder.layers[1])  # layer 2 has no skip path: nothing reaches the top
        assert torch.all(model.encode(src, src_mask)["keys"] == 0)


def test_no_residual_connections_when_switched_off(source_batch):
    _, src, src_mask = source_batch
    model = make_gnmt(residual_from=0)
    zero_(model.encoder.layers[-1])
    with torch.no_grad():
        assert torch.all(model.encode(src, src_mask)["keys"] == 0)


def test_decoder_residual_connections_start_at_the_third_layer(source_batch):
    _, src, src_mask = source_batch
    tgt_in = target_inputs(TARGETS)
    model = make_gnmt()
    two_layers = make_gnmt(decoder_layers=2)
    two_layers.load_state_dict(model.state_dict(), strict=False)  # bottom and second decoder layers
    zero_(*model.upper.layers[1:])  # decoder layers 3 and 4
    with torch.no_grad():
        torch.testing.assert_close(model(src, src_mask, tgt_in)[0], two_layers(src, src_mask, tgt_in)[0])
        zero_(model.upper.layers[0])  # layer 2 has no skip path: the top output is zero, logits are the bias
        logits, _ = model(src, src_mask, tgt_in)
    torch.testing.assert_close(logits, model.output.bias.expand_as(logits), rtol=0, atol=0)


def test_context_is_fed_to_every_decoder_layer(source_batch):
    model = make_gnmt()
    layers = [*model.bottom.layers, *model.upper.layers]
    assert len(layers) == 4
    assert layers[0].input_size == TINY.embed_dim + TINY.hidden
    assert all(layer.input_size == 2 * TINY.hidden for layer in layers[1:])
    _, src, src_mask = source_batch
    tgt_in = target_inputs(TARGETS)
    with torch.no_grad():
        logits, _ = model(src, src_mask, tgt_in)
        for layer in layers:  # the context columns come last in every layer's input weights
            saved = layer.weight_ih_l0.clone()
            layer.weight_ih_l0[:, -TINY.hidden :] = 0
            assert not torch.allclose(model(src, src_mask, tgt_in)[0], logits)
            layer.weight_ih_l0.copy_(saved)


def additive_weights(model, query: torch.Tensor, memory) -> torch.Tensor:
    """p = softmax(v^T tanh(W_q y + b + W_k x_t)) by hand (Eq. 4-5): query (B, H) -> (B, S)."""
    score = model.attention.score
    hidden = torch.tanh(score.query_proj(query).unsqueeze(1) + score.key_proj(memory["keys"]))  # (B, S, A)
    return masked_softmax(hidden @ score.vector, memory["src_mask"])


def bottom_lstm_from_zeros(model, inputs: torch.Tensor) -> torch.Tensor:
    """h = o * tanh(i * g) for one LSTM step from a zero state (c_0 = h_0 = 0)."""
    layer = model.bottom.layers[0]
    gates = inputs @ layer.weight_ih_l0.T + layer.bias_ih_l0 + layer.bias_hh_l0  # (B, 4H): i, f, g, o
    input_gate, _, candidate, output_gate = gates.chunk(4, dim=-1)
    cell = torch.sigmoid(input_gate) * torch.tanh(candidate)
    return torch.sigmoid(output_gate) * torch.tanh(cell)


@pytest.mark.parametrize("attention_from", ["previous", "current"])
def test_attention_is_queried_with_the_bottom_decoder_layer(source_batch, attention_from):
    model = make_gnmt(attention_from=attention_from)
    _, src, src_mask = source_batch
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        assert all(torch.all(part == 0) for part in state.values())  # the paper passes no encoder state
        bos = torch.full((3,), BOS)
        _, state, first = model.step(bos, state, memory)
        read = additive_weights(model, torch.zeros(3, TINY.hidden), memory)  # a_1: query y_0 = 0
        context = (read.unsqueeze(1) @ memory["keys"]).squeeze(1)  # (B, H)
        bottom = bottom_lstm_from_zeros(model, torch.cat([model.tgt_embed(bos), context], dim=-1))
        torch.testing.assert_close(state["h0"], bottom)
        next_context = additive_weights(model, bottom, memory)  # a_2 from this step's bottom output
        torch.testing.assert_close(first, read if attention_from == "previous" else next_context)
        _, _, second = model.step(torch.tensor([4, 5, 6]), state, memory)
    if attention_from == "previous":
        torch.testing.assert_close(second, next_context)


def test_initial_state_has_every_layer_and_no_encoder_state(source_batch):
    _, src, src_mask = source_batch
    for cell, parts in (("lstm", "hc"), ("gru", "h")):
        model = make_gnmt(cell=cell)
        state = model.init_state(model.encode(src, src_mask))
        assert set(state) == {f"{part}{index}" for part in parts for index in range(4)}
        assert all(value.shape == (3, TINY.hidden) for value in state.values())


def test_embeddings_are_shared_and_tied_when_asked():
    model = make_gnmt(share_embeddings=True, tie_output=True, embed_dim=8)
    assert model.encoder.embedding is model.tgt_embed
    assert model.output.weight is model.tgt_embed.weight
    assert make_gnmt().encoder.embedding is not make_gnmt().tgt_embed
    assert not make_gnmt(bidirectional=False).encoder.layers[0].bidirectional


def test_uniform_initialisation_keeps_padding_zero():
    model = make_gnmt(init_scale=0.04)
    assert model.upper.layers[0].weight_ih_l0.abs().max() <= 0.04
    assert torch.all(model.tgt_embed.weight[0] == 0)


@pytest.mark.parametrize("overrides, message", [
    (dict(decoder_layers=1), "decoder_layers"),
    (dict(residual_from=1), "residual_from"),
    (dict(tie_output=True), "tie_output"),
    (dict(hidden=7), "even hidden"),
])
def test_impossible_configurations_are_errors(overrides, message):
    with pytest.raises(NmtkitError, match=message):
        make_gnmt(**overrides)
