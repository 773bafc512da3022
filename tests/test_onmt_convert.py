"""Tests for benchmarks/onmt_convert.py that need no OpenNMT-py install: names, vocabulary rows, weights.

That onmt_translate loads a converted checkpoint and gives nmtkit's greedy outputs is checked by hand with
OpenNMT-py 3.5.1 (see the script's docstring); ONMT_NAMES below is the state dict of its one-layer model.
"""

import random
import re

import pytest
import torch
from scripts import load_script

from nmtkit.checkpoint.payload import make_payload
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import BOS, EOS, PAD, UNK, train_subword
from nmtkit.modules.embeddings import sinusoidal_table
from nmtkit.registry import build_model

onmt_convert = load_script("benchmarks/onmt_convert.py", "onmt_convert")

WORDS = "the a cat dog sees eats runs big small red fish bird tree house".split()
ONE_LAYER = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32, "max_positions": 64}
_ATTENTION = [f"{name}.{leaf}" for name in ("linear_keys", "linear_values", "linear_query", "final_linear")
              for leaf in ("weight", "bias")]
_FFN = [f"feed_forward.{name}.{leaf}" for name in ("w_1", "w_2", "layer_norm") for leaf in ("weight", "bias")]
# OpenNMT-py 3.5.1 NMTModel.state_dict() (generator under "generator.") of a one-layer Transformer
ONMT_NAMES = {
    "encoder.embeddings.make_embedding.emb_luts.0.weight", "encoder.embeddings.make_embedding.pe.pe",
    *(f"encoder.transformer.0.self_attn.{name}" for name in _ATTENTION),
    *(f"encoder.transformer.0.{name}" for name in _FFN),
    "encoder.transformer.0.layer_norm.weight", "encoder.transformer.0.layer_norm.bias",
    "encoder.layer_norm.weight", "encoder.layer_norm.bias",
    "decoder.embeddings.make_embedding.emb_luts.0.weight", "decoder.embeddings.make_embedding.pe.pe",
    *(f"decoder.transformer_layers.0.{kind}.{name}" for kind in ("self_attn", "context_attn") for name in _ATTENTION),
    *(f"decoder.transformer_layers.0.{name}" for name in _FFN),
    *(f"decoder.transformer_layers.0.layer_norm_{index}.{leaf}" for index in (1, 2) for leaf in ("weight", "bias")),
    "decoder.layer_norm.weight", "decoder.layer_norm.bias", "generator.weight", "generator.bias",
}


@pytest.fixture(scope="module")
def subword():
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(50)]
    return train_subword(lines, DataConfig(subword="word", vocab_size=30), 30)


def tiny_payload(subword, **model) -> dict:
    config = build_config({"model": {**ONE_LAYER, **model}})
    torch.manual_seed(0)
    network = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    return make_payload(config, network, (subword, subword))


def test_vocabulary_rows_put_opennmt_specials_first_and_keep_every_id():
    rows = onmt_convert.vocabulary_rows(9)
    assert rows[:4] == [UNK, PAD, BOS, EOS]  # OpenNMT-py default_specials: <unk> <blank> <s> </s>
    assert sorted(rows) == list(range(9))
    assert rows[4:] == list(range(4, 9))


def test_onmt_tokens_rename_the_specials_and_keep_the_pieces():
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "▁the", "▁cat"]
    assert onmt_convert.onmt_tokens(pieces) == ["<unk>", "<blank>", "<s>", "</s>", "▁the", "▁cat"]


def test_onmt_tokens_reject_a_piece_spelled_like_a_special():
    with pytest.raises(ValueError, match="spelled like"):
        onmt_convert.onmt_tokens(["<pad>", "<unk>", "<s>", "</s>", "<blank>"])


def test_source_line_writes_tokens_and_the_eos_nmtkit_appends(subword):
    tokens = onmt_convert.nmtkit_to_onmt_tokens(subword)
    ids = subword.encode(["the cat"])[0]
    assert onmt_convert.source_line(ids, tokens) == " ".join(subword.pieces("the cat") + ["</s>"])
    assert tokens[UNK] == "<unk>" and tokens[PAD] == "<blank>"


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize(("share", "tie"), [(True, True), (False, True), (False, False)])
def test_every_nmtkit_parameter_matches_exactly_one_rename(make_transformer, layers, share, tie):
    state = make_transformer(encoder_layers=layers, decoder_layers=layers, share_embeddings=share,
                             tie_output=tie).state_dict()
    for name in state:
        assert sum(bool(re.fullmatch(pattern, name)) for pattern, _ in onmt_convert.RENAMES) == 1, name
    names = [onmt_convert.onmt_name(name) for name in state]
    assert len(set(names)) == len(names) == len(state)


def test_unknown_parameter_is_an_error():
    with pytest.raises(ValueError, match="no OpenNMT-py counterpart"):
        onmt_convert.onmt_name("encoder.0.attention.gate.weight")


def test_converted_names_are_those_of_opennmt(subword):
    checkpoint = onmt_convert.convert(tiny_payload(subword))
    names = set(checkpoint["model"]) | {f"generator.{name}" for name in checkpoint["generator"]}
    assert names == ONMT_NAMES


def test_each_token_keeps_its_vector_and_the_generator_has_no_bias(subword):
    payload = tiny_payload(subword)
    checkpoint = onmt_convert.convert(payload)
    state, model = payload["model"], checkpoint["model"]
    tokens = checkpoint["vocab"]["src"]
    for onmt_id, nmtkit_id in enumerate(onmt_convert.vocabulary_rows(subword.vocab_size)):
        assert tokens[onmt_id] == onmt_convert.nmtkit_to_onmt_tokens(subword)[nmtkit_id]
        torch.testing.assert_close(model[onmt_convert.SRC_EMBEDDING][onmt_id], state["src_embed.weight"][nmtkit_id])
        torch.testing.assert_close(checkpoint["generator"]["weight"][onmt_id], state["output.weight"][nmtkit_id])
    assert not checkpoint["generator"]["bias"].any()
    assert checkpoint["vocab"]["tgt"] == tokens


def test_positions_and_options_follow_nmtkit(subword):
    checkpoint = onmt_convert.convert(tiny_payload(subword, activation="gelu"))
    pe = checkpoint["model"]["decoder.embeddings.make_embedding.pe.pe"]
    assert pe.shape == (onmt_convert.ONMT_MAX_POSITIONS, 1, 16)
    torch.testing.assert_close(pe[:64, 0], sinusoidal_table(64, 16), rtol=0, atol=0)
    opt = checkpoint["opt"]
    assert (opt.norm_eps, opt.pos_ffn_activation_fn, opt.add_qkvbias, opt.add_ffnbias) == (1e-5, "gelu", True, True)
    assert opt.share_embeddings and opt.share_decoder_embeddings and opt.enc_layers == 1


@pytest.mark.parametrize("activation, onmt_activation", [("swiglu", "silu"), ("geglu", "gated-gelu")])
def test_gated_feed_forward_splits_into_w_1_and_w_3(subword, activation, onmt_activation):
    """OpenNMT-py's gated layers (position_ffn.py) compute act(w_1 x) * w_3 x; nmtkit's `inner` is w_1 over w_3."""
    payload = tiny_payload(subword, activation=activation)
    checkpoint = onmt_convert.convert(payload)
    assert checkpoint["opt"].pos_ffn_activation_fn == onmt_activation
    model, ffn = checkpoint["model"], ONE_LAYER["ffn"]
    gates = {name for name in model if ".w_3." in name}
    assert gates == {name.replace(".w_1.", ".w_3.") for name in ONMT_NAMES if ".w_1." in name}
    for side, onmt_side in (("encoder", "encoder.transformer"), ("decoder", "decoder.transformer_layers")):
        for leaf in ("weight", "bias"):
            inner = payload["model"][f"{side}.0.feed_forward.inner.{leaf}"]
            torch.testing.assert_close(model[f"{onmt_side}.0.feed_forward.w_1.{leaf}"], inner[:ffn], rtol=0, atol=0)
            torch.testing.assert_close(model[f"{onmt_side}.0.feed_forward.w_3.{leaf}"], inner[ffn:], rtol=0, atol=0)


@pytest.mark.parametrize("model", [{"norm": "post"}, {"positions": "learned"}, {"activation": "reglu"}])
def test_what_opennmt_lacks_does_not_convert(subword, model):
    with pytest.raises(ValueError, match="OpenNMT-py 3.5.1 has no"):
        onmt_convert.convert(tiny_payload(subword, **model))
