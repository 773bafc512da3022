"""Convert an nmtkit Transformer checkpoint into an OpenNMT-py 3.5.1 checkpoint that `onmt_translate` loads.

Both toolkits build the same pre-norm Transformer (layer norm before each sub-layer, a final layer norm after
each stack; OpenNMT-py 3.5.1 has no post-norm), so the conversion renames the parameters (`onmt_name`) and
settles the conventions that differ:
- vocabulary: OpenNMT-py looks its specials up by name (onmt/constants.py `DefaultTokens`) and puts them first,
  in its `default_specials` order <unk> <blank> <s> </s> (onmt/opts.py); nmtkit has pad 0, unk 1, bos 2, eos 3.
  The OpenNMT vocabulary is these four names followed by the other SentencePiece pieces in nmtkit id order, and
  the rows of the embedding and output matrices are permuted so that every token keeps its vector.
- output layer: nmtkit's has no bias (and is tied to the target embedding); OpenNMT's generator gets a zero bias.
- positions: both add sin on even and cos on odd dimensions from position 0 to embeddings scaled by sqrt(d)
  (onmt/modules/embeddings.py `SinusoidalInterleaved`); OpenNMT computes the table in float32 and nmtkit in
  float64, so nmtkit's table is stored as OpenNMT's `pe` buffer to remove last-bit differences.
- layer norm epsilon: nmtkit uses torch's 1e-5, OpenNMT defaults to 1e-6: `norm_eps` is set to 1e-5.
- source EOS: nmtkit appends EOS to every source sentence; OpenNMT-py 3.5.1 adds nothing to the source
  (onmt/inputters/text_utils.py `numericalize`), so each source line must end with `</s>` (`source_line`).

The checkpoint holds what onmt/models/model_saver.py saves: "model" and "generator" state dicts, "vocab" (token
lists) and "opt", the options of a training run of this architecture (an argparse.Namespace: with torch >= 2.6,
run onmt_translate with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, as OpenNMT-py 3.5.1 calls torch.load without
weights_only).

Usage: python benchmarks/onmt_convert.py MODEL.pt OUT.pt   (nmtkit's interpreter; OpenNMT-py is not imported)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch
from torch import Tensor

from nmtkit.checkpoint.payload import load_checkpoint
from nmtkit.config.run import build_config
from nmtkit.data.subword import BOS, EOS, PAD, UNK, Subword
from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import GATED, TransformerConfig
from nmtkit.modules.embeddings import sinusoidal_table

# nmtkit id -> OpenNMT-py token, in OpenNMT's default_specials order (which gives them OpenNMT ids 0-3)
ONMT_SPECIALS = {UNK: "<unk>", PAD: "<blank>", BOS: "<s>", EOS: "</s>"}
ONMT_MAX_POSITIONS = 5000  # onmt/modules/embeddings.py PositionalEncoding max_len
LINEAR_NAMES = {"query": "linear_query", "key": "linear_keys", "value": "linear_values", "out": "final_linear",
                "inner": "w_1", "outer": "w_2"}
_ATTENTION, _FFN, _LEAF = r"(query|key|value|out)\.(weight|bias)", r"(inner|outer)\.(weight|bias)", r"(weight|bias)"
# (nmtkit name, OpenNMT-py name): onmt/encoders/transformer.py, onmt/decoders/transformer.py,
# onmt/modules/multi_headed_attn.py, position_ffn.py (its layer_norm is the pre-norm of the FFN sub-layer),
# embeddings.py and model_builder.py (the generator)
RENAMES = [
    (r"src_embed\.weight", "encoder.embeddings.make_embedding.emb_luts.0.weight"),
    (r"tgt_embed\.weight", "decoder.embeddings.make_embedding.emb_luts.0.weight"),
    (rf"encoder\.(\d+)\.attention\.{_ATTENTION}", "encoder.transformer.{}.self_attn.{}.{}"),
    (rf"encoder\.(\d+)\.attention_block\.norm\.{_LEAF}", "encoder.transformer.{}.layer_norm.{}"),
    (rf"encoder\.(\d+)\.feed_forward\.{_FFN}", "encoder.transformer.{}.feed_forward.{}.{}"),
    (rf"encoder\.(\d+)\.feed_forward_block\.norm\.{_LEAF}", "encoder.transformer.{}.feed_forward.layer_norm.{}"),
    (rf"decoder\.(\d+)\.self_attention\.{_ATTENTION}", "decoder.transformer_layers.{}.self_attn.{}.{}"),
    (rf"decoder\.(\d+)\.blocks\.0\.norm\.{_LEAF}", "decoder.transformer_layers.{}.layer_norm_1.{}"),
    (rf"decoder\.(\d+)\.cross_attention\.{_ATTENTION}", "decoder.transformer_layers.{}.context_attn.{}.{}"),
    (rf"decoder\.(\d+)\.blocks\.1\.norm\.{_LEAF}", "decoder.transformer_layers.{}.layer_norm_2.{}"),
    (rf"decoder\.(\d+)\.feed_forward\.{_FFN}", "decoder.transformer_layers.{}.feed_forward.{}.{}"),
    (rf"decoder\.(\d+)\.blocks\.2\.norm\.{_LEAF}", "decoder.transformer_layers.{}.feed_forward.layer_norm.{}"),
    (rf"encoder_norm\.{_LEAF}", "encoder.layer_norm.{}"),
    (rf"decoder_norm\.{_LEAF}", "decoder.layer_norm.{}"),
    (r"output\.weight", "generator.weight"),
]
SRC_EMBEDDING, TGT_EMBEDDING = RENAMES[0][1], RENAMES[1][1]
# nmtkit activation -> OpenNMT-py's pos_ffn_activation_fn (position_ffn.py: "silu" and "gated-gelu" are gated,
# act(w_1 x) * w_3 x, where nmtkit's `inner` holds w_1's rows and then w_3's)
ONMT_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swiglu": "silu", "geglu": "gated-gelu"}


def onmt_name(name: str) -> str:
    """OpenNMT-py's name of the nmtkit Transformer parameter `name` (see RENAMES)."""
    for pattern, template in RENAMES:
        match = re.fullmatch(pattern, name)
        if match:
            return template.format(*(LINEAR_NAMES.get(group, group) for group in match.groups()))
    raise ValueError(f"nmtkit parameter {name} has no OpenNMT-py counterpart")


def vocabulary_rows(vocab_size: int) -> list[int]:
    """The nmtkit id of each OpenNMT-py id: the four specials first (ONMT_SPECIALS order), then the other ids."""
    return list(ONMT_SPECIALS) + [index for index in range(vocab_size) if index not in ONMT_SPECIALS]


def onmt_tokens(pieces: list[str]) -> list[str]:
    """OpenNMT-py's vocabulary (token of each OpenNMT id) for the SentencePiece `pieces` in nmtkit id order."""
    tokens = [ONMT_SPECIALS.get(row, pieces[row]) for row in vocabulary_rows(len(pieces))]
    if len(set(tokens)) != len(tokens):
        raise ValueError("a SentencePiece piece is spelled like an OpenNMT-py special (<unk> <blank> <s> </s>)")
    return tokens


def subword_pieces(subword: Subword) -> list[str]:
    return [subword.processor.id_to_piece(index) for index in range(subword.vocab_size)]


def nmtkit_to_onmt_tokens(subword: Subword) -> dict[int, str]:
    """nmtkit id -> OpenNMT-py token, to write source lines and read output lines."""
    return dict(zip(vocabulary_rows(subword.vocab_size), onmt_tokens(subword_pieces(subword))))


def source_line(ids: list[int], tokens: dict[int, str]) -> str:
    """One OpenNMT-py source line for the nmtkit source `ids` (without EOS): the tokens and the EOS nmtkit appends."""
    return " ".join([tokens[index] for index in ids] + [ONMT_SPECIALS[EOS]])


def check_convertible(config) -> None:
    """OpenNMT-py 3.5.1 has only pre-norm layers, sinusoidal (or relative) positions, and no gated ReLU."""
    if not isinstance(config, TransformerConfig):
        raise ValueError(f"only nmtkit Transformers convert, not {config.name!r}")
    if config.norm != "pre" or config.positions != "sinusoidal":
        raise ValueError(f"OpenNMT-py 3.5.1 has no {config.norm}-norm / {config.positions}-position Transformer")
    if config.activation not in ONMT_ACTIVATIONS:
        raise ValueError(f"OpenNMT-py 3.5.1 has no {config.activation} feed-forward layer")


def onmt_options(config: TransformerConfig, joint: bool) -> dict:
    """The options of an onmt_train run of this architecture (names as in benchmarks/train_speed.py), after
    ArgumentParser.update_model_opts; options not given take their onmt/opts.py model_opts defaults on loading."""
    d_model = config.d_model
    return {
        "model_task": "seq2seq", "model_type": "text", "encoder_type": "transformer", "decoder_type": "transformer",
        "enc_layers": config.encoder_layers, "dec_layers": config.decoder_layers, "heads": config.heads,
        "hidden_size": d_model, "enc_hid_size": d_model, "dec_hid_size": d_model, "word_vec_size": d_model,
        "src_word_vec_size": d_model, "tgt_word_vec_size": d_model, "transformer_ff": config.ffn,
        "dropout": [config.dropout], "attention_dropout": [config.attention_dropout],
        "pos_ffn_activation_fn": ONMT_ACTIVATIONS[config.activation], "position_encoding": True,
        "position_encoding_type": "SinusoidalInterleaved", "max_relative_positions": 0,
        "self_attn_type": "scaled-dot", "add_qkvbias": True, "add_ffnbias": True, "layer_norm": "standard",
        "norm_eps": 1e-5, "share_vocab": joint, "share_embeddings": config.share_embeddings and joint,
        "share_decoder_embeddings": config.tie_output, "copy_attn": False,
        "freeze_word_vecs_enc": False, "freeze_word_vecs_dec": False, "optim": "adam", "model_dtype": "fp32",
        "world_size": 1, "gpu_ranks": [], "parallel_mode": "data_parallel",
    }


def position_buffer(d_model: int) -> Tensor:
    """nmtkit's sinusoidal table in OpenNMT's `pe` layout (max_len, 1, dim)."""
    return sinusoidal_table(ONMT_MAX_POSITIONS, d_model).unsqueeze(1)


def onmt_weights(state: dict[str, Tensor], src_rows: list[int], tgt_rows: list[int], d_model: int,
                 gated: bool = False) -> dict:
    """nmtkit's state dict under OpenNMT-py names, vocabulary rows permuted, zero generator bias, `pe` buffers;
    `gated`: each feed-forward `inner` split into w_1 and w_3."""
    weights = {onmt_name(name): value.float() for name, value in state.items()}
    if gated:
        for name in [name for name in weights if re.search(r"feed_forward\.w_1\.", name)]:
            weights[name], weights[name.replace(".w_1.", ".w_3.")] = weights[name].chunk(2, dim=0)
    weights[SRC_EMBEDDING] = weights[SRC_EMBEDDING][src_rows]
    weights[TGT_EMBEDDING] = weights[TGT_EMBEDDING][tgt_rows]
    weights["generator.weight"] = weights["generator.weight"][tgt_rows]
    weights["generator.bias"] = torch.zeros(len(tgt_rows))
    for side in ("encoder", "decoder"):
        weights[f"{side}.embeddings.make_embedding.pe.pe"] = position_buffer(d_model)
    return weights


def convert(payload: dict) -> dict:
    """An OpenNMT-py 3.5.1 checkpoint (onmt/models/model_saver.py layout) for an nmtkit checkpoint payload."""
    config = build_config(payload["config"]).model
    check_convertible(config)
    joint = payload["subword"]["joint"]
    src = Subword(payload["subword"]["src"])
    tgt = src if joint else Subword(payload["subword"]["tgt"])
    weights = onmt_weights(payload["model"], vocabulary_rows(src.vocab_size), vocabulary_rows(tgt.vocab_size),
                           config.d_model, gated=config.activation in GATED)
    generator = {name.split(".", 1)[1]: weights.pop(name) for name in ("generator.weight", "generator.bias")}
    vocab = {"src": onmt_tokens(subword_pieces(src)), "tgt": onmt_tokens(subword_pieces(tgt)),
             "data_task": "seq2seq", "decoder_start_token": ONMT_SPECIALS[BOS]}
    return {"model": weights, "generator": generator, "vocab": vocab,
            "opt": argparse.Namespace(**onmt_options(config, joint))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="nmtkit checkpoint (model.pt)")
    parser.add_argument("out", type=Path, help="OpenNMT-py checkpoint to write")
    args = parser.parse_args()
    try:
        torch.save(convert(load_checkpoint(args.model)), args.out)
    except (NmtkitError, ValueError) as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
