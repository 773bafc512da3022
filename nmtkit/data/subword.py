"""SentencePiece subword models (bpe, unigram, char, word), kept as serialized bytes.

Keeping the model as bytes lets a checkpoint embed it, so a checkpoint alone is enough to translate.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable

import sentencepiece as spm

from nmtkit.config import DataConfig

PAD, UNK, BOS, EOS = 0, 1, 2, 3


class Subword:
    """A trained SentencePiece model: text <-> subword ids."""

    def __init__(self, proto: bytes):
        self.proto = proto
        self.processor = spm.SentencePieceProcessor(model_proto=proto)

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, lines: list[str]) -> list[list[int]]:
        return self.processor.encode(lines, out_type=int)

    def decode(self, ids: list[list[int]]) -> list[str]:
        return self.processor.decode(ids)

    def pieces(self, line: str) -> list[str]:
        return self.processor.encode(line, out_type=str)


def train_subword(lines: Iterable[str], config: DataConfig, vocab_size: int) -> Subword:
    """Train SentencePiece on `lines` (prepare samples them down to `config.max_sentences`)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),  # SentencePiece keeps what it reads
        model_writer=model,
        model_type=config.subword,
        vocab_size=vocab_size,
        character_coverage=config.character_coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        hard_vocab_limit=False,
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )
    return Subword(model.getvalue())
