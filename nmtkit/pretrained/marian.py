"""OPUS-MT's MarianMTModel (Junczys-Dowmunt et al. 2018, "Marian: Fast Neural Machine Translation in C++"; Tiedemann
and Thottingal 2020, "OPUS-MT") as an nmtkit Transformer.

transformers' Marian is a post-norm Transformer without final stack norms, with Marian's sinusoidal layout (sines
in the first half, cosines in the second), embeddings scaled by sqrt(d) when scale_embedding is set, one embedding
matrix for both sides and the output, and a fixed `final_logits_bias`. Its decoder starts from the padding
token's embedding, and generation bans the padding token (bad_words_ids).

The tokenizer segments the source with source.spm and the target with target.spm, and maps pieces to ids with one
vocab.json (<unk> for a piece it lacks); a source may start with a target-language token `>>fra<<` (multilingual
OPUS-MT models), which becomes nmtkit's tag of language "fra" (the piece `<2fra>`, so that prepare's multilingual
corpora find it). In nmtkit's layout BOS is a row of its own, a copy
of the decoder's start row whose output bias is NEVER, so that it is never predicted and leaves the
log-probabilities of the other pieces as they were.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from nmtkit.data.subword import BOS, EOS, PAD, UNK
from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import Transformer, TransformerConfig
from nmtkit.pretrained.imported import Imported
from nmtkit.pretrained.layers import (
    Weights,
    check_positions,
    common_settings,
    copy,
    copy_layers,
    piece_ids,
    read_json,
    required,
    setting,
)
from nmtkit.pretrained.vocab import layout, nmtkit_proto

LANGUAGE_TOKEN = re.compile(r">>([^<>\s]{1,30})<<")
NEVER = -1e4  # an output bias that keeps a piece out of every softmax (exp(-1e4) is 0 in float32 and float16)


def import_marian(directory: Path, config: dict, weights: Weights, generation: dict) -> Imported:
    if config.get("share_encoder_decoder_embeddings", True) is not True or (directory / "target_vocab.json").exists():
        raise NmtkitError("this Marian model has separate source and target vocabularies (target_vocab.json); "
                          "nmtkit imports Marian models with one vocab.json")
    vocab_path = required(directory, "vocab.json", "the Marian tokenizer's vocabulary")
    vocab = piece_ids(read_json(vocab_path), vocab_path)
    pad = setting(config, "pad_token_id", int)
    start = setting(config, "decoder_start_token_id", int, pad)
    if "<unk>" not in vocab:
        raise NmtkitError(f"{vocab_path} has no <unk>")
    vocab = {tag_piece(piece): index for piece, index in vocab.items()}
    codes = {piece for piece in vocab if piece.startswith("<2") and piece.endswith(">")}
    embedding = weights.take("model.shared.weight", "model.encoder.embed_tokens.weight")
    order = layout(vocab, {PAD: pad, UNK: vocab["<unk>"], BOS: start, EOS: setting(config, "eos_token_id", int)},
                   "<s>", codes, embedding.size(0))
    src_proto, src_rest = nmtkit_proto(required(directory, "source.spm", "the source SentencePiece model")
                                       .read_bytes(), order.pieces, order.control, directory / "source.spm", True)
    tgt_proto, tgt_rest = nmtkit_proto(required(directory, "target.spm", "the target SentencePiece model")
                                       .read_bytes(), order.pieces, order.control, directory / "target.spm")
    tie = setting(config, "tie_word_embeddings", bool, True)
    model_config = TransformerConfig(**common_settings(config), norm="post", positions="sinusoidal_split",
                                     share_embeddings=True, tie_output=tie, output_bias=True,
                                     suppress_pad=[pad] in generation.get("bad_words_ids", []))
    model = Transformer(model_config, len(order.pieces) + len(src_rest), len(order.pieces), src_proto == tgt_proto)
    set_weights(model, weights, torch.tensor(order.rows), len(src_rest), tie)
    check_positions(model, weights)
    tokenizer = read_json(directory / "tokenizer_config.json") if (directory / "tokenizer_config.json").is_file() \
        else {}
    langs = tuple(value if isinstance(value, str) else None
                  for value in (tokenizer.get("source_lang"), tokenizer.get("target_lang")))
    notes = [f"{len(src_rest)} pieces of source.spm are not in vocab.json: they read <unk>'s embedding, as the "
             "tokenizer gives <unk> for them"] if src_rest else []
    notes += [f"{len(tgt_rest)} pieces of target.spm are not in vocab.json: left out (the model cannot write them; "
              "target text segments around them)"] if tgt_rest else []
    tags = {piece[2:-1]: index for index, piece in enumerate(order.pieces) if piece in codes}
    return Imported(model, src_proto, tgt_proto, tags, langs, notes=notes)


def tag_piece(piece: str) -> str:
    """A language token `>>fra<<` as nmtkit names the tag of language fra (`<2fra>`); other pieces unchanged."""
    found = LANGUAGE_TOKEN.fullmatch(piece)
    return piece if found is None else f"<2{found.group(1)}>"


@torch.no_grad()
def set_weights(model: Transformer, weights: Weights, rows: torch.Tensor, unknown: int, tie: bool) -> None:
    """The embeddings in nmtkit's order (`rows`; the source's `unknown` pieces after them read <unk>'s row), the
    output layer and its bias, the layers."""
    embedding = weights.take("model.shared.weight", "model.encoder.embed_tokens.weight")
    copy(model.tgt_embed.weight, embedding[rows], "the embeddings")
    if model.src_embed is not model.tgt_embed:
        source_rows = torch.cat([rows, rows[UNK].repeat(unknown)])
        copy(model.src_embed.weight, embedding[source_rows], "the embeddings")
    if not tie:
        copy(model.output.weight, weights.take("lm_head.weight")[rows], "the output layer")
    bias = weights.take("final_logits_bias").reshape(-1)[rows].clone()
    bias[BOS] = NEVER
    copy(model.logits_bias, bias, "final_logits_bias")
    copy_layers(model, weights)
