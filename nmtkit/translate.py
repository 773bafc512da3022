"""Streaming batched translation: read lines, translate them in length-sorted batches, write in input order.

Exactly one output line per input line: an empty line gives an empty line, and every chunk of
`buffer_size` lines is written and flushed as soon as it is translated.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from itertools import islice

import torch

from nmtkit.align.attention import align_translations
from nmtkit.align.links import format_pharaoh
from nmtkit.checkpoint import LoadedModel
from nmtkit.config import DecodeConfig
from nmtkit.data.dataset import encode_sources, token_batches
from nmtkit.errors import NmtkitError
from nmtkit.precision import decoding_timings, describe, dtype_name, fastest
from nmtkit.search import (
    Hypothesis,
    LengthPenalty,
    Sampler,
    argmax_choice,
    beam_search,
    greedy_search,
    max_lengths,
)

log = logging.getLogger(__name__)


def advise_on_precision(loaded: LoadedModel, dtype: torch.dtype, device: torch.device) -> None:
    """Warn when a CPU runs this model's decoding no faster in `dtype` than in float32 (measured, not read from the
    CPU flags: some CPUs that list AVX512-BF16 run bf16 matrix products slower than float32)."""
    timings = decoding_timings(loaded.model, loaded.src_subword.vocab_size, dtype, device)
    if fastest(timings) is None:
        log.warning("%s is no faster than float32 on this CPU for this model (measured: %s): translating in float32 "
                    "(without --bf16/--fp16) will be as fast or faster", dtype_name(dtype), describe(timings))
    else:
        log.info("%s measured faster than float32 here: %s", dtype_name(dtype), describe(timings))


class Translator:
    """A loaded model plus decoding settings; translates lists of lines."""

    def __init__(self, loaded: LoadedModel, decode: DecodeConfig, device: torch.device):
        self.loaded, self.decode, self.device = loaded, decode, device
        if device.type == "cpu" and decode.dtype != "float32":
            advise_on_precision(loaded, getattr(torch, decode.dtype), device)
        loaded.model.to(getattr(torch, decode.dtype))
        self.max_source = (loaded.model.max_length() or 1024) - 1  # EOS takes a position
        generator = torch.Generator(device).manual_seed(decode.seed)
        self.sampler = Sampler(decode.temperature, decode.top_k, decode.top_p, generator)

    def _truncate(self, ids: list[int], number: int) -> list[int]:
        if len(ids) > self.max_source:
            log.warning("line %d: %d subwords, truncated to %d", number, len(ids), self.max_source)
            return ids[: self.max_source]
        return ids

    @property
    def length_penalty(self) -> LengthPenalty:
        decode = self.decode
        return LengthPenalty(decode.length_penalty, decode.alpha, decode.beta, decode.word_penalty,
                             decode.coverage_penalty)

    def search(self, sources: list[list[int]]) -> list[list[Hypothesis]]:
        """Translate a batch of subword-id sequences; up to `decode.nbest` hypotheses each, best first."""
        src, src_mask = encode_sources(sources)
        src, src_mask = src.to(self.device), src_mask.to(self.device)
        limit = max_lengths(src_mask, self.decode.max_len_a, self.decode.max_len_b, self.max_source)
        if self.decode.sample or self.decode.beam <= 1:
            choose = self.sampler if self.decode.sample else argmax_choice
            found = greedy_search(self.loaded.model, src, src_mask, limit, choose, self.decode.min_len)
            return [[hyp] for hyp in found]
        try:
            nbest = beam_search(self.loaded.model, src, src_mask, limit, self.decode.beam, self.length_penalty,
                                self.decode.min_len, self.decode.stop_finished)
        except ValueError as error:  # a search option this model cannot serve
            raise NmtkitError(str(error)) from error
        return [hyps[: self.decode.nbest] for hyps in nbest]

    def translate_nbest(self, lines: list[str], first_line: int = 1) -> list[list[tuple[str, float]]]:
        """(text, score) hypotheses per line, best first; an empty line gives one empty hypothesis."""
        for index, line in enumerate(lines):
            if "\ufffd" in line:
                log.warning("line %d: invalid UTF-8 replaced by U+FFFD", first_line + index)
        ids = self.loaded.src_subword.encode(lines)  # the text as written: the subword model normalizes, if at all
        ids = [self._truncate(seq, first_line + index) for index, seq in enumerate(ids)]
        outputs: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in lines]
        todo = [index for index, line in enumerate(lines) if line.strip()]
        lengths = [len(ids[index]) for index in todo]
        for batch in token_batches(lengths, lengths, self.decode.batch_tokens):  # no target yet: source lengths
            rows = [todo[position] for position in batch]
            found = self.search([ids[row] for row in rows])
            decoded = iter(self.loaded.tgt_subword.decode([hyp.tokens for hyps in found for hyp in hyps]))
            for row, hyps in zip(rows, found):  # one decode call per batch: each call has a fixed cost
                outputs[row] = [(next(decoded), hyp.score) for hyp in hyps]
        return outputs

    def alignments(self, lines: list[str], translations: list[str]) -> list[str]:
        """Pharaoh links between each line's words and its translation's words."""
        links = align_translations(self.loaded, lines, translations, self.device)
        return [format_pharaoh(pair) for pair in links]

    def translate(self, lines: list[str], first_line: int = 1) -> list[str]:
        """The best translation of each line; empty lines stay empty."""
        return [hyps[0][0] for hyps in self.translate_nbest(lines, first_line)]


def format_hypotheses(hyps: list[tuple[str, float]], line_index: int, nbest: int, scores: bool,
                      alignment: str | None = None) -> str:
    """One output line, or `i ||| hypothesis ||| score` lines (Moses n-best format, 0-based i) when nbest > 1.

    `alignment` (Pharaoh links of the best hypothesis) is appended as ` ||| i-j ...` to a one-best line."""
    if nbest > 1:
        return "".join(f"{line_index} ||| {text} ||| {score:.4f}\n" for text, score in hyps)
    text, score = hyps[0]
    fields = [text] + ([f"{score:.4f}"] if scores else []) + ([alignment] if alignment is not None else [])
    return " ||| ".join(fields) + "\n"


def translate_stream(translator: Translator, lines: Iterable[str], scores: bool = False,
                     alignment: bool = False) -> Iterator[str]:
    """Translate an iterable of lines chunk by chunk; yields each chunk's formatted output in input order.

    With `alignment`, each best translation is followed by ` ||| i-j ...` word links (source word first),
    taken from the model's attention when it is teacher-forced on its own translation."""
    iterator = iter(lines)
    first_line = 1
    while chunk := [line.rstrip("\r\n") for line in islice(iterator, translator.decode.buffer_size)]:
        results = translator.translate_nbest(chunk, first_line)
        links = translator.alignments(chunk, [hyps[0][0] for hyps in results]) if alignment else [None] * len(chunk)
        yield "".join(format_hypotheses(hyps, first_line - 1 + index, translator.decode.nbest, scores, links[index])
                      for index, hyps in enumerate(results))
        first_line += len(chunk)
