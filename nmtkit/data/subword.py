"""SentencePiece subword models (bpe, unigram, char, word), kept as serialized bytes.

Keeping the model as bytes lets a checkpoint embed it, so a checkpoint alone is enough to translate. New models
normalize nothing (`identity`, spaces kept as they are) and fall back to UTF-8 bytes for unseen characters, so that
decoding gives back exactly the text a user wrote, in any script; models trained with an NFKC rule (nmtkit's
default before) keep working as they were trained.
"""

from __future__ import annotations

import functools
import io
import logging
import os
from collections.abc import Iterable, Sequence

import sentencepiece as spm

from nmtkit.config import DataConfig

log = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = 0, 1, 2, 3
BYTE_FALLBACK_MIN_VOCAB = 1024  # the 256 byte pieces take at most a quarter of the vocabulary


class Subword:
    """A trained SentencePiece model: text <-> subword ids."""

    def __init__(self, proto: bytes):
        self.proto = proto
        self.processor = spm.SentencePieceProcessor(model_proto=proto)

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, lines: list[str], alpha: float = 0.0, seed: int = 0) -> list[list[int]]:
        """Subword ids of `lines`; with `alpha` > 0 a segmentation sampled for each line (BPE-dropout with
        probability `alpha` for bpe models, unigram sampling with smoothing `alpha`), the same text either way.
        `seed` reseeds SentencePiece's generator for the threads a batch call starts; threads it reuses keep their
        state, so the same call need not give the same sample twice: a caller wanting new samples passes a new seed."""
        if alpha > 0:
            spm.set_random_generator_seed(seed)
            return self.processor.encode(lines, out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1)
        return self.processor.encode(lines, out_type=int)

    def decode(self, ids: list[list[int]]) -> list[str]:
        return self.processor.decode(ids)

    def pieces(self, line: str) -> list[str]:
        return self.processor.encode(line, out_type=str)

    def spans(self, lines: list[str]) -> list[list[tuple[int, int]]]:
        """Where each subword piece of each line comes from: (begin, end) UTF-8 byte offsets into the line as given,
        before normalization (SentencePiece's own alignment, so a normalization that changes lengths cannot
        shift them). A piece of several bytes of one character may have an empty span."""
        return [[(piece.begin, piece.end) for piece in text.pieces]
                for text in self.processor.encode(lines, out_type="proto")]

    @functools.cached_property
    def settings(self) -> dict:
        """The normalization rule and byte fallback this model was trained with, read from the model itself."""
        from sentencepiece import sentencepiece_model_pb2  # protobuf: imported only where a model is inspected

        model = sentencepiece_model_pb2.ModelProto.FromString(self.proto)
        return {"normalization": model.normalizer_spec.name or "nmt_nfkc",
                "byte_fallback": model.trainer_spec.byte_fallback,
                "exact_spaces": not model.normalizer_spec.remove_extra_whitespaces}


def train_subword(lines: Iterable[str], config: DataConfig, vocab_size: int,
                  control_symbols: Sequence[str] = (), user_symbols: Sequence[str] = ()) -> Subword:
    """Train SentencePiece on `lines` (prepare samples them down to `config.max_sentences`). `control_symbols`
    (a multilingual model's language tags) get ids of their own that no text encodes to and that decode to nothing;
    `user_symbols` (masked placeholders) are one piece each wherever the text has them, never normalized.

    With the `identity` rule the text is taken as it is, spaces included (`remove_extra_whitespaces` off), so
    that decoding gives back every byte; the NFKC rules collapse spaces as SentencePiece always did."""
    byte_fallback = config.byte_fallback and vocab_size >= BYTE_FALLBACK_MIN_VOCAB
    if config.byte_fallback and not byte_fallback:
        log.info("byte fallback off: a vocabulary of %d has no room for 256 byte pieces (needs %d or more)",
                 vocab_size, BYTE_FALLBACK_MIN_VOCAB)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),  # SentencePiece keeps what it reads
        model_writer=model,
        model_type=config.subword,
        vocab_size=vocab_size,
        character_coverage=config.character_coverage,
        normalization_rule_name=config.normalization,
        remove_extra_whitespaces=config.normalization != "identity",
        byte_fallback=byte_fallback,
        control_symbols=list(control_symbols),
        user_defined_symbols=list(user_symbols),
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        hard_vocab_limit=False,
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )
    return Subword(model.getvalue())
