"""Tests for nmtkit/models/seq2seq.py: Sutskever's encoder-decoder without attention, Cho's context at every step,
source reversal and the layer-by-layer transfer of the encoder's final states."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from model_checks import assert_step_matches_forward

from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS
from nmtkit.errors import NmtkitError
from nmtkit.models.seq2seq import Seq2SeqConfig
from nmtkit.modules.readout import maxout
from nmtkit.registry import build_model

VOCAB = 13
SOURCES = [[4, 5, 6], [7, 8, 9, 10, 11, 4], [5, 9, 11, 6, 12]]
TARGETS = [[9, 10, 4, 12], [5, 6, 7, 8, 9, 10, 11], [12, 4]]


def make_model(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    config = Seq2SeqConfig(**{"embed_dim": 8, "hidden": 8, "encoder_layers": 2, "decoder_layers": 2,
                              "dropout": 0.1, **overrides})
    return build_model(config, VOCAB, VOCAB, True).eval()


def batch():
    src, src_mask = encode_sources(SOURCES)  # (3, 7)
    return src, src_mask, pad_sequences(TARGETS, [BOS], [])  # tgt_in (3, 8)


def assert_step_equals_forward(model) -> None:
    src, src_mask, tgt_in = batch()
    attention, _ = assert_step_matches_forward(model, src, src_mask, tgt_in)
    assert attention is None  # no attention, even when asked for


OPTIONS = list(itertools.product(["lstm", "gru"], [False, True], [False, True], ["none", "every-step"]))


@pytest.mark.parametrize("cell, bidirectional, reverse_source, context", OPTIONS)
def test_every_option_builds_and_step_equals_forward(cell, bidirectional, reverse_source, context):
    model = make_model(cell=cell, bidirectional=bidirectional, reverse_source=reverse_source, context=context)
    assert_step_equals_forward(model)


@pytest.mark.parametrize("encoder_layers, decoder_layers", [(3, 1), (1, 3), (4, 2)])
def test_stacks_of_different_depth_build_and_step_equals_forward(encoder_layers, decoder_layers):
    assert_step_equals_forward(make_model(encoder_layers=encoder_layers, decoder_layers=decoder_layers))


def test_reverse_source_is_the_same_model_reading_the_reversed_sentence():
    forwards, backwards = make_model(reverse_source=False), make_model(reverse_source=True)
    backwards.load_state_dict(forwards.state_dict())
    reversed_sources = [sentence[::-1] for sentence in SOURCES]
    with torch.no_grad():
        expected = forwards.encode(*encode_sources(reversed_sources))
        memory = backwards.encode(*encode_sources(SOURCES))
    for key in expected:
        torch.testing.assert_close(memory[key], expected[key], rtol=0, atol=0)


@pytest.mark.parametrize("cell, bidirectional", [("lstm", False), ("lstm", True), ("gru", True)])
def test_decoder_layer_l_starts_from_encoder_layer_l(cell, bidirectional):
    model = make_model(cell=cell, bidirectional=bidirectional)
    src, src_mask, _ = batch()
    with torch.no_grad():
        _, finals = model.encoder(src, src_mask)
        state = model.init_state(model.encode(src, src_mask))
    assert set(state) == ({"h0", "h1", "c0", "c1"} if cell == "lstm" else {"h0", "h1"})
    for layer, final in enumerate(finals):
        for name, part in zip("hc", final):
            assert part.shape == (3, 8)  # both directions concatenated give `hidden`
            torch.testing.assert_close(state[f"{name}{layer}"], part, rtol=0, atol=0)


def test_without_context_the_source_reaches_the_decoder_only_through_its_initial_state():
    model = make_model()
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        assert set(memory) == {"src_mask", "init_h0", "init_c0", "init_h1", "init_c1"}
        state = model.init_state(memory)
        first, _, _ = model.step(tgt_in[:, 0], state, memory)
        second, _, _ = model.step(tgt_in[:, 0], state, {"src_mask": src_mask})  # the step reads no memory
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_every_step_context_is_the_top_encoder_state_and_feeds_every_step():
    model = make_model(context="every-step")
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        _, finals = model.encoder(src, src_mask)
        memory = model.encode(src, src_mask)
        torch.testing.assert_close(memory["context"], finals[-1][0], rtol=0, atol=0)
        state = model.init_state(memory)
        _, state, _ = model.step(tgt_in[:, 0], state, memory)
        log_probs, _, _ = model.step(tgt_in[:, 1], state, memory)
        changed, _, _ = model.step(tgt_in[:, 1], state, memory | {"context": memory["context"] + 1})
    assert not torch.allclose(log_probs, changed)  # the same state, another c: another prediction


def test_every_step_output_is_chos_maxout_deep_output():
    model = make_model(context="every-step", decoder_layers=1, encoder_layers=1)
    src, src_mask, tgt_in = batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        h, c = memory["init_h0"], memory["init_c0"]
        embedded = model.tgt_embed(tgt_in[:, 0])  # E y_0 (B, E)
        context = memory["context"]  # c (B, H)
        _, (h, _) = model.decoder.layers[0](torch.cat([embedded, context], -1).unsqueeze(1),
                                            (h.unsqueeze(0), c.unsqueeze(0)))  # h_1 = g(y_0, h_0, c)
        readout = model.readout
        pre = readout.state_proj(h[0]) + readout.embed_proj(embedded) + readout.context_proj(context)  # (B, 2E)
        expected = F.log_softmax(model.output(maxout(pre)), dim=-1)
        log_probs, _, _ = model.step(tgt_in[:, 0], model.init_state(memory), memory)
    torch.testing.assert_close(log_probs, expected, rtol=0, atol=1e-6)


def test_output_tying_needs_matching_sizes_without_context():
    with pytest.raises(NmtkitError, match="embed_dim == hidden"):
        make_model(embed_dim=6, tie_output=True)
    tied = make_model(embed_dim=6, context="every-step", tie_output=True)  # the deep output has embed_dim units
    assert tied.output.weight is tied.tgt_embed.weight
    assert_step_equals_forward(tied)


def test_shared_embeddings_only_with_a_shared_vocabulary():
    config = Seq2SeqConfig(embed_dim=8, hidden=8, share_embeddings=True)
    shared = build_model(config, VOCAB, VOCAB, True)
    assert shared.encoder.embedding is shared.tgt_embed
    separate = build_model(config, VOCAB + 2, VOCAB, False)
    assert separate.encoder.embedding is not separate.tgt_embed
    assert separate.encoder.embedding.num_embeddings == VOCAB + 2
