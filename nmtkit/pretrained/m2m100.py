"""M2M100ForConditionalGeneration (Fan et al. 2020, "Beyond English-Centric Multilingual Machine Translation"; NLLB
Team 2022, "No Language Left Behind", which transformers runs with the same class) as an nmtkit Transformer.

transformers' M2M100 is a pre-norm Transformer with final layer norms on both stacks, ReLU, embeddings scaled by
sqrt(d), tensor2tensor's sinusoidal layout starting at row padding id + 1 = 2, and one embedding matrix for both
sides and the output. Its source is `[source language] text </s>` and its decoder reads `</s> [target language]`
before the target (decoder_start_token_id, then forced_bos_token_id). nmtkit's multilingual source starts with
the target language's tag instead: the Transformer option language_tags=decoder moves that tag to the decoder and
puts `source_token` (the source language chosen at import) in its place, so the model reads what it was trained
on.

Vocabulary: fairseq's dictionary (<s> 0, <pad> 1, </s> 2, <unk> 3, the SentencePiece pieces, the language tokens,
`<mask>` and M2M100's "madeup words"), from vocab.json (M2M100Tokenizer) or tokenizer.json (NLLB's), the added
tokens from tokenizer.json or tokenizer_config.json; segmentation from sentencepiece.bpe.model. Language tokens
`__de__` (M2M100) and `deu_Latn` (NLLB) become the tags of languages "de" and "deu_Latn", the pieces `<2de>` and
`<2deu_Latn>` as nmtkit names its tags (so that prepare's multilingual corpora find them).
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
    common_settings,
    copy,
    copy_layers,
    piece_ids,
    read_json,
    required,
    setting,
)
from nmtkit.pretrained.vocab import layout, nmtkit_proto

# M2M100Tokenizer's language lists (tokenizer_config.json's language_codes), whose tokens follow vocab.json in this
# order; fairseq's M2M100 dictionaries list them so (transformers' FAIRSEQ_LANGUAGE_CODES)
LANGUAGE_CODES = {
    "m2m100": "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi "
              "hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns "
              "oc or pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh "
              "zu".split(),
    "wmt21": "en ha is ja cs ru zh de".split(),
}
LANGUAGE_TOKEN = re.compile(r"__([a-z]{2,3})__|([a-z]{3}_[A-Z][a-z]{3})")


def language(token: str) -> str | None:
    """The language a language token names: `__de__` -> de, `deu_Latn` -> deu_Latn; None for another token."""
    found = LANGUAGE_TOKEN.fullmatch(token)
    return None if found is None else found.group(1) or found.group(2)


def import_m2m100(directory: Path, config: dict, weights: Weights, generation: dict, src_lang: str | None) -> Imported:
    vocab = full_vocab(directory)
    pad, bos, eos = (setting(config, key, int) for key in ("pad_token_id", "bos_token_id", "eos_token_id"))
    if setting(config, "decoder_start_token_id", int, eos) != eos:
        raise NmtkitError("config.json's decoder_start_token_id is not its eos_token_id, as M2M100 and NLLB have it")
    if "<unk>" not in vocab:
        raise NmtkitError(f"{directory}'s vocabulary has no <unk>")
    vocab = {f"<2{language(piece)}>" if language(piece) else piece: index for piece, index in vocab.items()}
    codes = {piece for piece in vocab if piece.startswith("<2") and piece.endswith(">")}
    embedding = weights.take("model.shared.weight", "model.encoder.embed_tokens.weight")
    names = {index: piece for piece, index in vocab.items()}
    order = layout(vocab, {PAD: pad, UNK: vocab["<unk>"], BOS: bos, EOS: eos}, names.get(bos, "<s>"),
                   codes | {"<mask>"}, embedding.size(0))
    proto, left = nmtkit_proto(required(directory, "sentencepiece.bpe.model", "the SentencePiece model").read_bytes(),
                               order.pieces, order.control, directory / "sentencepiece.bpe.model")
    tags = {piece[2:-1]: index for index, piece in enumerate(order.pieces) if piece in codes}
    if src_lang not in tags:
        raise NmtkitError(f"{'unknown source language ' + repr(src_lang) if src_lang else 'no source language'}: an "
                          f"M2M100/NLLB model reads one at the start of each source; give --src-lang, one of "
                          f"{', '.join(sorted(tags)[:8])}{', ...' if len(tags) > 8 else ''}")
    model_config = TransformerConfig(**common_settings(config), norm="pre", positions="sinusoidal_t2t",
                                     position_offset=pad + 1, share_embeddings=True, tie_output=True,
                                     language_tags="decoder", source_token=tags[src_lang])
    model = Transformer(model_config, len(order.pieces), len(order.pieces), True)
    set_weights(model, weights, torch.tensor(order.rows))
    notes = [f"{len(left)} pieces of sentencepiece.bpe.model are not in the vocabulary: left out"] if left else []
    return Imported(model, proto, proto, tags, (src_lang, None), notes=notes)


def full_vocab(directory: Path) -> dict[str, int]:
    """Pieces to ids: vocab.json or tokenizer.json's model vocabulary, with the added tokens (language tokens,
    <mask>) of tokenizer.json or tokenizer_config.json, or, when they list no language token, M2M100Tokenizer's
    language list after the vocabulary."""
    if (directory / "vocab.json").is_file():
        vocab = dict(piece_ids(read_json(directory / "vocab.json"), directory / "vocab.json"))
    elif (directory / "tokenizer.json").is_file():
        model = read_json(directory / "tokenizer.json").get("model")
        if not (isinstance(model, dict) and isinstance(model.get("vocab"), dict) and model["vocab"]):
            raise NmtkitError(f"{directory / 'tokenizer.json'} has no vocabulary of pieces and ids (NLLB's is a BPE "
                              "model's)")
        vocab = dict(piece_ids(model["vocab"], directory / "tokenizer.json"))
    else:
        raise NmtkitError(f"{directory} has neither vocab.json (M2M100) nor tokenizer.json (NLLB)")
    added = added_tokens(directory)
    if not any(language(token) for token in added):  # M2M100Tokenizer: its language list follows the vocabulary
        codes = language_list(directory)
        added.update({f"__{code}__": len(vocab) + index for index, code in enumerate(codes)})
    for token, index in added.items():
        if vocab.setdefault(token, index) != index:
            raise NmtkitError(f"{directory}: token {token!r} has two ids ({vocab[token]} and {index})")
    return vocab


def added_tokens(directory: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    if (directory / "tokenizer.json").is_file():
        for entry in read_json(directory / "tokenizer.json").get("added_tokens") or []:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) and type(entry.get("id")) is int:
                found[entry["content"]] = entry["id"]
    if (directory / "tokenizer_config.json").is_file():
        decoder = read_json(directory / "tokenizer_config.json").get("added_tokens_decoder") or {}
        for index, entry in decoder.items() if isinstance(decoder, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) and str(index).isdigit():
                found.setdefault(entry["content"], int(index))
    return found


def language_list(directory: Path) -> list[str]:
    """M2M100Tokenizer's language codes: tokenizer_config.json's language_codes (m2m100 when absent)."""
    config = read_json(directory / "tokenizer_config.json") if (directory / "tokenizer_config.json").is_file() else {}
    name = config.get("language_codes", "m2m100")
    if name not in LANGUAGE_CODES:
        raise NmtkitError(f"{directory}/tokenizer_config.json: language_codes {name!r} is not one M2M100Tokenizer "
                          f"knows ({', '.join(LANGUAGE_CODES)})")
    return LANGUAGE_CODES[name]


@torch.no_grad()
def set_weights(model: Transformer, weights: Weights, rows: torch.Tensor) -> None:
    embedding = weights.take("model.shared.weight", "model.encoder.embed_tokens.weight")
    copy(model.tgt_embed.weight, embedding[rows], "the embeddings")
    for norm, name in ((model.encoder_norm, "model.encoder.layer_norm"),
                       (model.decoder_norm, "model.decoder.layer_norm")):
        copy(norm.weight, weights.take(f"{name}.weight"), name)
        copy(norm.bias, weights.take(f"{name}.bias"), name)
    copy_layers(model, weights)
