"""Small random Hugging Face checkpoints built with transformers' own classes and save_pretrained, with tiny
SentencePiece models trained here: a MarianMTModel as OPUS-MT lays it out (source.spm, target.spm, vocab.json) and
an M2M100ForConditionalGeneration as M2M100Tokenizer lays it out (sentencepiece.bpe.model, vocab.json, language
tokens after the vocabulary). Their weights are random and then perturbed (layer norms, biases, final_logits_bias
away from their initial values) so that a weight put in the wrong place shows."""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

SOURCE = ["the house is small .", "the cat sat on the mat .", "a small cat saw the house !",
          "where is the cat ?", "houses and cats are small .", "the mat is red and the house is blue ."] * 4
TARGET = ["das haus ist klein .", "die katze sass auf der matte .", "eine kleine katze sah das haus !",
          "wo ist die katze ?", "haeuser und katzen sind klein .", "die matte ist rot und das haus ist blau ."] * 4
TEXTS = ["the small house .", "where is the red mat ?", "cats !", "a house and a cat sat on the blue mat ."]
M2M_LANGS = ["en", "ha", "is", "ja", "cs", "ru", "zh", "de"]  # M2M100Tokenizer's "wmt21" list, in its order
MADEUP_WORDS = 2



def train_spm(lines: list[str], vocab_size: int, model_type: str = "unigram", **options) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   model_type=model_type, hard_vocab_limit=False, minloglevel=2, **options)
    return model.getvalue()


def perturb(model: torch.nn.Module, seed: int) -> None:
    """Every parameter and buffer moved by noise, so that no weight keeps its initial value (ones, zeros)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, value in [*model.named_parameters(), *model.named_buffers()]:
            if value.is_floating_point() and "embed_positions" not in name:
                value.add_(torch.randn(value.shape, generator=generator) * 0.3)


def marian_dir(directory: Path, eos_boost: float, seed: int = 0, languages: tuple[str, ...] = (),
               drop_source_piece: bool = False) -> Path:
    """A MarianMTModel checkpoint (post-norm, swish, scaled embeddings, one vocab.json over two SentencePiece
    models, pad as the decoder's start, bad_words_ids banning pad); `languages` adds `>>xx<<` tokens. `eos_boost`
    is added to EOS's logit: random models then end hypotheses before the length limit (at 4, most beam
    hypotheses; at 2, greedy search writes a few tokens first). `drop_source_piece` leaves out of vocab.json a
    piece that source.spm writes for TEXTS[0] and target.spm lacks (the tokenizer gives <unk> for it)."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    source, target = train_spm(SOURCE, 40), train_spm(TARGET, 44)
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)
    pieces = ["</s>", "<unk>", *(f">>{lang}<<" for lang in languages)]
    for proto in (source, target):
        processor = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())
                   if processor.id_to_piece(i) not in pieces]
    if drop_source_piece:
        written = spm.SentencePieceProcessor(model_proto=source).encode(TEXTS[0], out_type=str)
        target_pieces = spm.SentencePieceProcessor(model_proto=target)
        pieces.remove(next(piece for piece in written if target_pieces.piece_to_id(piece) == target_pieces.unk_id()))
    vocab = {piece: index for index, piece in enumerate([*pieces, "<pad>"])}
    (directory / "vocab.json").write_text(json.dumps(vocab))
    pad = vocab["<pad>"]
    config = MarianConfig(vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
                          encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48,
                          activation_function="swish", scale_embedding=True, max_position_embeddings=64,
                          pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    perturb(model, seed)
    with torch.no_grad():  # as OPUS-MT's converter leaves it: the padding (decoder start) row is zero
        model.model.shared.weight[pad].zero_()
        model.final_logits_bias[0, 0] += eos_boost
    model.generation_config = GenerationConfig(bad_words_ids=[[pad]], pad_token_id=pad, eos_token_id=0,
                                               decoder_start_token_id=pad, forced_eos_token_id=0, num_beams=4,
                                               max_length=64)
    model.save_pretrained(directory)
    MarianTokenizer(str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json"),
                    source_lang="en", target_lang="de").save_pretrained(directory)
    return directory


def m2m100_dir(directory: Path, eos_boost: float, seed: int = 0) -> Path:
    """An M2M100ForConditionalGeneration checkpoint (pre-norm, relu, final layer norms, positions from row 2) with
    M2M100Tokenizer's files: sentencepiece.bpe.model, vocab.json in fairseq's order, language tokens after it.
    `eos_boost` as for `marian_dir`."""
    from transformers import M2M100Tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    proto = train_spm(SOURCE + TARGET, 60, "bpe")
    (directory / "sentencepiece.bpe.model").write_bytes(proto)
    processor = spm.SentencePieceProcessor(model_proto=proto)
    pieces = ["<s>", "<pad>", "</s>", "<unk>", *(processor.id_to_piece(i) for i in range(3, len(processor)))]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    (directory / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = M2M100Tokenizer(str(directory / "vocab.json"), str(directory / "sentencepiece.bpe.model"),
                                language_codes="wmt21", num_madeup_words=MADEUP_WORDS)
    tokenizer.save_pretrained(directory)
    return save_m2m100(directory, len(vocab) + len(M2M_LANGS) + MADEUP_WORDS, eos_boost, seed)


def save_m2m100(directory: Path, rows: int, eos_boost: float, seed: int) -> Path:
    """A random M2M100ForConditionalGeneration of `rows` embedding rows, saved into `directory`."""
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

    config = M2M100Config(vocab_size=rows, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48,
                          max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                          decoder_start_token_id=2, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(config).eval()
    perturb(model, seed)
    with torch.no_grad():  # EOS's logit raised by eos_boost, the others' moved by less
        eos = model.model.shared.weight[2]
        model.model.decoder.layer_norm.bias += eos_boost * eos / eos.dot(eos)
    model.generation_config = GenerationConfig(pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                               decoder_start_token_id=2, num_beams=4, max_length=64)
    model.save_pretrained(directory)
    return directory

NLLB_LANGS = ["eng_Latn", "deu_Latn", "fra_Latn"]


def nllb_dir(directory: Path, eos_boost: float, seed: int = 0) -> Path:
    """An M2M100ForConditionalGeneration checkpoint with NllbTokenizer's files: tokenizer.json (fairseq's ids: the
    SentencePiece ids + 1 after <s> <pad> </s> <unk>, the language tokens as added tokens), tokenizer_config.json,
    and sentencepiece.bpe.model beside them as NLLB's published checkpoints ship it. `eos_boost` as for
    `marian_dir`."""
    from transformers import NllbTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sentencepiece.bpe.model").write_bytes(train_spm(SOURCE + TARGET, 60, "bpe"))
    tokenizer = NllbTokenizer.from_pretrained(directory, extra_special_tokens=NLLB_LANGS)
    tokenizer.save_pretrained(directory)
    return save_m2m100(directory, len(tokenizer), eos_boost, seed)
