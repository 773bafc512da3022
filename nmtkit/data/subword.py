"""SentencePiece subword models (bpe, unigram, char, word), kept as serialized bytes.

Keeping the model as bytes lets a checkpoint embed it, so a checkpoint alone is enough to translate. New models
normalize nothing (`identity`, spaces kept as they are) and fall back to UTF-8 bytes for unseen characters, so that
decoding gives back exactly the text a user wrote, in any script; models trained with an NFKC rule (nmtkit's
default before) keep working as they were trained.
"""

from __future__ import annotations

import functools
import io
import itertools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence

import sentencepiece as spm

from nmtkit.config.sections import DataConfig
from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = 0, 1, 2, 3
BYTE_FALLBACK_MIN_VOCAB = 1024  # the 256 byte pieces take at most a quarter of the vocabulary
SPECIAL_PIECES, BYTE_PIECES = 4, 256  # PAD, UNK, BOS, EOS; byte fallback's pieces
MAX_SENTENCE_BYTES = 4192  # SentencePiece's max_sentence_length: it learns from no longer line (nor an empty one)


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


def uses_byte_fallback(config: DataConfig, vocab_size: int) -> bool:
    return config.byte_fallback and vocab_size >= BYTE_FALLBACK_MIN_VOCAB


def check_room(config: DataConfig, vocab_size: int, control_symbols: Sequence[str] = (),
               user_symbols: Sequence[str] = ()) -> None:
    """An error, before any text is read, for a vocabulary that the pieces SentencePiece reserves would fill
    (its trainers fail on it with an internal check: `vocab_size >= 0`). Its word trainer counts each user symbol
    twice."""
    twice = config.subword == "word"
    parts = {"special pieces (padding, unknown, start, end)": SPECIAL_PIECES, "tags": len(control_symbols),
             "for the placeholder symbols (data.placeholders" + (", counted twice by a word model)" if twice else ")"):
             len(user_symbols) * (2 if twice else 1),
             "byte pieces (data.byte_fallback)": BYTE_PIECES if uses_byte_fallback(config, vocab_size) else 0}
    reserved = sum(parts.values())
    if vocab_size <= reserved:
        listed = ", ".join(f"{count} {what}" for what, count in parts.items() if count)
        raise NmtkitError(f"data.vocab_size {vocab_size} leaves no piece for text: {listed} take {reserved}; give a "
                          f"vocabulary of more than {reserved}")


def learnable(lines: Iterable[str]) -> Iterator[str]:
    """`lines` without those SentencePiece skips (empty, or longer than MAX_SENTENCE_BYTES); an error before
    training when no line is left (its trainer fails on it with an internal check: `!sentences_.empty()`)."""
    sampled = 0

    def kept() -> Iterator[str]:
        nonlocal sampled
        for line in lines:
            sampled += 1
            if line and (len(line) * 4 <= MAX_SENTENCE_BYTES or len(line.encode()) <= MAX_SENTENCE_BYTES):
                yield line

    remaining = kept()
    first = next(remaining, None)
    if first is None:
        raise NmtkitError(f"no line to learn subwords from: the {sampled} training line(s) sampled are empty or "
                          f"longer than {MAX_SENTENCE_BYTES} bytes (SentencePiece learns from none of those)")
    return itertools.chain([first], remaining)


def trainer_error(error: RuntimeError, config: DataConfig, vocab_size: int) -> NmtkitError:
    """A one-line error for a failure of SentencePiece's trainer (a vocabulary too small for the text's characters,
    or another internal check)."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    if found := re.search(r"smaller than required_chars\. [0-9]+ vs ([0-9]+)", message):
        return NmtkitError(f"data.vocab_size {vocab_size} is too small for this text: its characters (at "
                           f"data.character_coverage {config.character_coverage}) and the reserved pieces need "
                           f"{found.group(1)}; raise data.vocab_size to {found.group(1)} or more, or lower "
                           "data.character_coverage")
    reason = re.sub(r"^[A-Z_]+: (src/\S+ )?", "", message)
    return NmtkitError(f"SentencePiece could not learn a {config.subword} model of {vocab_size} pieces: {reason}")


def train_subword(lines: Iterable[str], config: DataConfig, vocab_size: int,
                  control_symbols: Sequence[str] = (), user_symbols: Sequence[str] = ()) -> Subword:
    """Train SentencePiece on `lines` (prepare samples them down to `config.max_sentences`). `control_symbols`
    (a multilingual model's language tags) get ids of their own that no text encodes to and that decode to nothing;
    `user_symbols` (masked placeholders) are one piece each wherever the text has them, never normalized.

    With the `identity` rule the text is taken as it is, spaces included (`remove_extra_whitespaces` off), so
    that decoding gives back every byte; the NFKC rules collapse spaces as SentencePiece always did."""
    check_room(config, vocab_size, control_symbols, user_symbols)
    byte_fallback = uses_byte_fallback(config, vocab_size)
    if config.byte_fallback and not byte_fallback:
        log.info("byte fallback off: a vocabulary of %d has no room for 256 byte pieces (needs %d or more)",
                 vocab_size, BYTE_FALLBACK_MIN_VOCAB)
    model = io.BytesIO()
    try:
        run_trainer(learnable(lines), model, config, vocab_size, byte_fallback, control_symbols, user_symbols)
    except RuntimeError as error:
        raise trainer_error(error, config, vocab_size) from error
    return Subword(model.getvalue())


def run_trainer(lines: Iterator[str], model: io.BytesIO, config: DataConfig, vocab_size: int, byte_fallback: bool,
                control_symbols: Sequence[str], user_symbols: Sequence[str]) -> None:
    """SentencePiece's trainer on `lines`, writing its model to `model`."""
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines,  # SentencePiece keeps what it reads
        model_writer=model,
        max_sentence_length=MAX_SENTENCE_BYTES,
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
