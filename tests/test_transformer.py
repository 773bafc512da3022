"""Tests for nmtkit/models/transformer.py: shapes, step == forward, padding invariance, embedding sharing."""

from __future__ import annotations

import pytest
import torch
from model_checks import assert_step_matches_forward

from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS
from nmtkit.models.transformer import TransformerConfig
from nmtkit.modules.dropout import Dropout

VARIANTS = [(norm, positions) for norm in ("pre", "post") for positions in ("sinusoidal", "learned")]


def target_inputs(targets: list[list[int]]) -> torch.Tensor:
    return pad_sequences(targets, [BOS], [])  # (B, T) BOS + target, PAD-padded


def test_forward_shapes(make_transformer):
    model = make_transformer(src_vocab=13, tgt_vocab=11, shared_vocab=False)
    src, src_mask = encode_sources([[4, 5, 6], [7, 8, 9, 10, 12]])  # (2, 6)
    tgt_in = target_inputs([[4, 5], [6, 7, 8, 9]])  # (2, 5)
    logits, attention = model(src, src_mask, tgt_in, need_attention=True)
    assert logits.shape == (2, 5, 11)
    assert attention.shape == (2, 5, 6)
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 5))
    assert torch.all(attention[0, :, 4:] == 0)
    _, no_attention = model(src, src_mask, tgt_in)
    assert no_attention is None


@pytest.mark.parametrize("norm, positions", VARIANTS)
def test_incremental_decoding_equals_forward(make_transformer, source_batch, norm, positions):
    model = make_transformer(norm=norm, positions=positions)
    _, src, src_mask = source_batch
    tgt_in = torch.tensor([[BOS, 4, 9, 5, 11, 6], [BOS, 7, 7, 10, 4, 8], [BOS, 6, 5, 4, 9, 9]])
    assert_step_matches_forward(model, src, src_mask, tgt_in)


@pytest.mark.parametrize("norm, positions", VARIANTS)
def test_padding_does_not_change_a_sentence(make_transformer, norm, positions):
    model = make_transformer(norm=norm, positions=positions)
    short_src, long_src = [4, 5, 6], [7, 8, 9, 10, 11, 4, 5]
    short_tgt, long_tgt = [9, 10, 4], [5, 6, 7, 8, 9, 10, 11]
    with torch.no_grad():
        alone_logits, alone_attention = model(*encode_sources([short_src]), target_inputs([short_tgt]),
                                              need_attention=True)
        batch_logits, batch_attention = model(*encode_sources([long_src, short_src]),
                                              target_inputs([long_tgt, short_tgt]), need_attention=True)
    length, src_length = len(short_tgt) + 1, len(short_src) + 1
    torch.testing.assert_close(batch_logits[1, :length], alone_logits[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(batch_attention[1, :length, :src_length], alone_attention[0], rtol=0, atol=1e-5)
    assert torch.all(batch_attention[1, :, src_length:] == 0)


def test_eval_mode_is_deterministic_and_train_mode_uses_dropout(tiny_transformer, source_batch):
    _, src, src_mask = source_batch
    tgt_in = target_inputs([[4, 5], [6], [7, 8]])
    with torch.no_grad():
        first, _ = tiny_transformer(src, src_mask, tgt_in)
        second, _ = tiny_transformer(src, src_mask, tgt_in)
        torch.testing.assert_close(first, second, rtol=0, atol=0)
        tiny_transformer.train()
        dropped, _ = tiny_transformer(src, src_mask, tgt_in)
    assert not torch.allclose(first, dropped)


def test_activation_dropout_is_off_by_default_takes_dropout_at_minus_one_and_is_set_on_its_own(make_transformer,
                                                                                              source_batch):
    def rates(model):
        return {name: module.p for name, module in model.named_modules() if isinstance(module, Dropout)}

    def feed_forward_rates(model):
        return {rate for name, rate in rates(model).items() if name.endswith("feed_forward.dropout")}

    assert TransformerConfig().activation_dropout == 0.0  # the Bible recipe's
    assert set(rates(make_transformer(dropout=0.3, activation_dropout=-1.0)).values()) == {0.3}
    own = rates(make_transformer(dropout=0.3, activation_dropout=0.0))
    feed_forward = {name for name in own if name.endswith("feed_forward.dropout")}
    assert len(feed_forward) == 4  # the tiny model has 2 + 2 layers
    assert {own[name] for name in feed_forward} == {0.0}
    assert {rate for name, rate in own.items() if name not in feed_forward} == {0.3}
    assert feed_forward_rates(make_transformer(dropout=0.3, activation_dropout=0.2)) == {0.2}
    # only the activations dropped: training mode changes the output, and with both rates 0 it does not
    _, src, src_mask = source_batch
    tgt_in = target_inputs([[4, 5], [6], [7, 8]])
    with torch.no_grad():
        for rate, changes in ((0.5, True), (0.0, False)):
            model = make_transformer(dropout=0.0, activation_dropout=rate)
            kept, _ = model(src, src_mask, tgt_in)
            dropped, _ = model.train()(src, src_mask, tgt_in)
            assert (not torch.allclose(kept, dropped)) == changes


def test_separate_vocabularies_get_separate_embeddings(make_transformer):
    model = make_transformer(src_vocab=13, tgt_vocab=11, shared_vocab=False, share_embeddings=True)
    assert model.src_embed is not model.tgt_embed
    assert model.src_embed.num_embeddings == 13
    assert model.tgt_embed.num_embeddings == 11
    assert model.output.weight is model.tgt_embed.weight


def test_shared_vocabulary_shares_embeddings(make_transformer):
    model = make_transformer(shared_vocab=True, share_embeddings=True)
    assert model.src_embed is model.tgt_embed
    unshared = make_transformer(shared_vocab=True, share_embeddings=False, tie_output=False)
    assert unshared.src_embed is not unshared.tgt_embed
    assert unshared.output.weight is not unshared.tgt_embed.weight


def test_sequence_longer_than_max_positions_is_an_error(make_transformer):
    model = make_transformer(max_positions=8)
    src, src_mask = encode_sources([list(range(4, 12)) + [4]])  # 10 tokens with EOS
    with pytest.raises(ValueError, match="max_positions"):
        model.encode(src, src_mask)


@pytest.mark.parametrize("activation, function", [("reglu", torch.relu), ("geglu", torch.nn.functional.gelu),
                                                  ("swiglu", torch.nn.functional.silu)])
def test_gated_feed_forward_is_act_of_one_half_times_the_other(make_transformer, source_batch, activation, function):
    model = make_transformer(activation=activation)
    feed_forward = model.encoder[0].feed_forward
    ffn, d_model = model.config.ffn, model.config.d_model
    assert feed_forward.inner.weight.shape == (2 * ffn, d_model) and feed_forward.outer.weight.shape == (d_model, ffn)
    x = torch.randn(3, 5, d_model)
    w, v = feed_forward.inner.weight[:ffn], feed_forward.inner.weight[ffn:]
    b, c = feed_forward.inner.bias[:ffn], feed_forward.inner.bias[ffn:]
    expected = feed_forward.outer(function(x @ w.T + b) * (x @ v.T + c))
    with torch.no_grad():
        torch.testing.assert_close(feed_forward(x)[0], expected)
    _, src, src_mask = source_batch
    tgt_in = torch.tensor([[BOS, 4, 9, 5], [BOS, 7, 7, 10], [BOS, 6, 5, 4]])
    assert_step_matches_forward(model, src, src_mask, tgt_in)
