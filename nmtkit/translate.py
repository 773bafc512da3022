"""Streaming batched translation: read lines, translate them in length-sorted batches, write in input order.

Exactly one output line per input line: an empty line gives an empty line, and every chunk of
`buffer_size` lines is written and flushed as soon as it is translated. Lines may carry constraints (a `Request`
read from tsv or jsonl input, see `nmtkit.inputs`): they are searched with them, batched with the others.

The PyTorch parts (the model, its search, alignments) are imported by the methods that use them, so that
translating with an exported model (`ExportedTranslator`, CTranslate2) never imports torch: it starts in 0.3 s
instead of 2.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from nmtkit.config import DecodeConfig, from_dict, to_dict
from nmtkit.ct2 import CTranslate2Search, ExportedModel, load_exported
from nmtkit.data.batching import token_batches
from nmtkit.data.subword import UNK
from nmtkit.data.tags import tag_ids
from nmtkit.errors import NmtkitError
from nmtkit.hypotheses import Hypothesis, LengthPenalty
from nmtkit.inputs import Request, parse_requests

if TYPE_CHECKING:
    import torch

    from nmtkit.checkpoint import LoadedModel
    from nmtkit.constraints import ConstraintEncoder, Constraints

log = logging.getLogger(__name__)


def advise_on_precision(loaded: LoadedModel, dtype: torch.dtype, device: torch.device) -> None:
    """Warn when a CPU runs this model's decoding no faster in `dtype` than in float32 (measured, not read from the
    CPU flags: some CPUs that list AVX512-BF16 run bf16 matrix products slower than float32)."""
    from nmtkit.precision import decoding_timings, describe, dtype_name, fastest

    timings = decoding_timings(loaded.model, loaded.src_subword.vocab_size, dtype, device)
    if fastest(timings) is None:
        log.warning("%s is no faster than float32 on this CPU for this model (measured: %s): translating in float32 "
                    "(without --bf16/--fp16) will be as fast or faster", dtype_name(dtype), describe(timings))
    else:
        log.info("%s measured faster than float32 here: %s", dtype_name(dtype), describe(timings))


def check_tgt_lang(decode: DecodeConfig, tags: dict[str, int]) -> None:
    """An error for a decode.tgt_lang that a multilingual model lacks."""
    lang = decode.tgt_lang
    if lang and tags and lang not in tags:
        raise NmtkitError(f"unknown --tgt-lang {lang!r}; this model translates into {', '.join(sorted(tags))}")


def check_corpus_tag(decode: DecodeConfig, loaded: LoadedModel | ExportedModel) -> None:
    """An error for a decode.tag (corpus tag) that the model was not trained with."""
    tag_ids(decode.tag, loaded.src_subword, loaded.tags)


class Translator:
    """A loaded model plus decoding settings; translates lists of lines."""

    step_check: Callable[[], None] | None = None  # see `with_step_check`

    def __init__(self, loaded: LoadedModel, decode: DecodeConfig, device: torch.device):
        import torch

        from nmtkit.search import Sampler

        self.loaded, self.decode, self.device = loaded, decode, device
        if device.type == "cpu" and decode.dtype != "float32":
            advise_on_precision(loaded, getattr(torch, decode.dtype), device)
        loaded.model.to(getattr(torch, decode.dtype))
        self.max_source = (loaded.model.max_length() or 1024) - 1  # EOS takes a position
        check_tgt_lang(decode, loaded.tags)
        check_corpus_tag(decode, loaded)
        generator = torch.Generator(device).manual_seed(decode.seed)
        self.sampler = Sampler(decode.temperature, decode.top_k, decode.top_p, generator)

    @classmethod
    def load(cls, path: str | Path | list[str | Path], device: str = "auto", threads: int | None = None,
             average: int = 0, inter_threads: int = 1, **decode) -> Translator:
        """A Translator for a checkpoint (a list of several: an ensemble) or a directory written by `nmtkit export`
        (translated by CTranslate2). Keyword options are DecodeConfig fields (beam=5, nbest=2, ...) and override
        the model's own decode settings; `threads` CPU threads (0: all cores; None: torch's setting as it is);
        `average` N averages the last N checkpoint_<step>.pt of the checkpoint's run; `inter_threads` N (exported
        directories only) searches N batches at once, each with threads/N threads."""
        paths = [Path(item) for item in (path if isinstance(path, (list, tuple)) else [path])]
        if any(item.is_dir() for item in paths):
            if len(paths) > 1 or average:
                raise NmtkitError("an exported directory translates alone: no ensemble, no --average")
            exported = load_exported(paths[0])
            return ExportedTranslator(exported, override_decode(exported.decode, decode), device, threads or 0,
                                      inter_threads)
        if inter_threads != 1:
            raise NmtkitError("--inter-threads applies to a directory written by nmtkit export (CTranslate2); a "
                              "checkpoint uses --threads")
        from nmtkit.ensemble import load_models
        from nmtkit.runtime import pick_device, set_threads

        if threads is not None:
            set_threads(threads)
        torch_device = pick_device(device)
        loaded = load_models(paths, torch_device, average)
        return cls(loaded, override_decode(loaded.config.decode, decode), torch_device)

    def with_decode(self, **overrides) -> Translator:
        """This translator with other search settings (DecodeConfig fields other than dtype); the model is shared."""
        from nmtkit.search import Sampler

        variant = copy.copy(self)
        variant.decode = override_decode(self.decode, overrides)
        check_tgt_lang(variant.decode, self.loaded.tags)
        check_corpus_tag(variant.decode, self.loaded)
        if variant.decode.dtype != self.decode.dtype:
            raise NmtkitError("with_decode keeps the model's precision; load the model again for another dtype")
        variant.sampler = Sampler(variant.decode.temperature, variant.decode.top_k, variant.decode.top_p,
                                  self.sampler.generator)
        return variant

    def with_step_check(self, check: Callable[[], None]) -> Translator:
        """This translator calling `check` before each decoding step (an exported model: before each batch, as a
        CTranslate2 call cannot be interrupted); `check` stops the translation by raising (`nmtkit serve`'s time
        budget)."""
        variant = copy.copy(self)
        variant.step_check = check
        return variant

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

    @functools.cached_property
    def constraint_encoder(self) -> ConstraintEncoder:
        from nmtkit.constraints import ConstraintEncoder

        return ConstraintEncoder(self.loaded.tgt_subword)

    def search(self, sources: list[list[int]],
               constraints: list[Constraints | None] | None = None) -> list[list[Hypothesis]]:
        """Translate a batch of subword-id sequences; up to `decode.nbest` hypotheses each, best first. Lines with
        `constraints` are searched with them, by beam search even with `--beam 1`."""
        from nmtkit.constraints import constrained_limits
        from nmtkit.data.dataset import encode_sources
        from nmtkit.search import argmax_choice, beam_search, greedy_search, max_lengths

        src, src_mask = encode_sources(sources)
        src, src_mask = src.to(self.device), src_mask.to(self.device)
        limit = max_lengths(src_mask, self.decode.max_len_a, self.decode.max_len_b, self.max_source)
        if constraints is not None:
            limit = constrained_limits(limit, constraints, self.max_source)
        elif self.decode.sample or self.decode.beam <= 1:
            choose = self.sampler if self.decode.sample else argmax_choice
            found = greedy_search(self.loaded.model, src, src_mask, limit, choose, self.decode.min_len,
                                  self.step_check)
            return [[hyp] for hyp in found]
        try:
            nbest = beam_search(self.loaded.model, src, src_mask, limit, self.decode.beam, self.length_penalty,
                                self.decode.min_len, self.decode.stop_finished, constraints,
                                None if constraints is None else self.constraint_encoder.word_ends, self.step_check)
        except ValueError as error:  # a search option this model cannot serve
            raise NmtkitError(str(error)) from error
        return [hyps[: self.decode.nbest] for hyps in nbest]

    def _constraints(self, request: Request, number: int) -> Constraints | None:
        if not request.constrained:
            return None
        if self.decode.sample:
            raise NmtkitError(f"line {number}: constraints and prefixes need beam search; --sample draws each "
                              "token freely")
        constraints = self.constraint_encoder.encode(request.constraints, request.negative, request.prefix)
        if any(UNK in phrase for phrase in (*constraints.positive, *constraints.negative, constraints.forced)):
            log.warning("line %d: a constraint or the prefix holds characters the target vocabulary cannot write "
                        "(they become the unknown piece)", number)
        return constraints

    def source_tag(self, request: Request, where: str) -> list[int]:
        """The tags that start the source: a multilingual model's target-language tag (Johnson et al. 2017; none for
        a model of one target language, which refuses another language), then the corpus tag of `--tag`, if any
        (`nmtkit.data.tags`). `where` ("line 3") starts an error."""
        return self.language_tag(request, where) + tag_ids(self.decode.tag, self.loaded.src_subword, self.loaded.tags)

    def language_tag(self, request: Request, where: str) -> list[int]:
        lang, tags = request.tgt_lang or self.decode.tgt_lang, self.loaded.tags
        if not tags:
            model_lang = self.loaded.langs[1]
            if lang and model_lang and lang != model_lang:
                raise NmtkitError(f"{where}: target language {lang!r}: this model translates into "
                                  f"{model_lang} only (--tgt-lang is for multilingual models)")
            return []
        if lang not in tags:
            what = (f"unknown target language {lang!r}" if lang else
                    "a multilingual model needs a target language (--tgt-lang, or tgt_lang)")
            raise NmtkitError(f"{where}: {what}; this model translates into {', '.join(sorted(tags))}")
        return [tags[lang]]

    def translate_nbest(self, lines: list[str], first_line: int = 1) -> list[list[tuple[str, float]]]:
        """(text, score) hypotheses per line, best first; an empty line gives one empty hypothesis."""
        return self.translate_requests([Request(line) for line in lines], first_line)

    def translate_requests(self, requests: list[Request], first_line: int = 1) -> list[list[tuple[str, float]]]:
        """(text, score) hypotheses per request, best first, meeting its constraints where they can be met (a
        warning names the lines where they cannot); an empty text gives one empty hypothesis."""
        for index, request in enumerate(requests):
            if "\ufffd" in request.text:
                log.warning("line %d: invalid UTF-8 replaced by U+FFFD", first_line + index)
        ids = self.loaded.src_subword.encode([request.text for request in requests])  # the text as written
        ids = [self._truncate(self.source_tag(request, f"line {first_line + index}") + seq, first_line + index)
               for index, (request, seq) in enumerate(zip(requests, ids))]
        constraints = [self._constraints(request, first_line + index) for index, request in enumerate(requests)]
        outputs: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in requests]
        todo = [index for index, request in enumerate(requests) if request.text.strip()]
        lengths = [len(ids[index]) for index in todo]
        batches = [[todo[position] for position in batch]  # no target yet: source lengths
                   for batch in token_batches(lengths, lengths, self.batch_budget)]
        searched = self.search_batches([[ids[row] for row in rows] for rows in batches],
                                       [[constraints[row] for row in rows] for rows in batches])
        for rows, found in zip(batches, searched):
            decoded = iter(self.loaded.tgt_subword.decode([hyp.tokens for hyps in found for hyp in hyps]))
            for row, hyps in zip(rows, found):  # one decode call per batch: each call has a fixed cost
                if not hyps[0].constraints_met:
                    log.warning("line %d: its constraints cannot all be met within the length limit; translated "
                                "without them", first_line + row)
                outputs[row] = [(next(decoded), hyp.score) for hyp in hyps]
        return outputs

    @property
    def batch_budget(self) -> int:
        """Source tokens per batch, padding included (`decode.batch_tokens`)."""
        return self.decode.batch_tokens

    def search_batches(self, batches: list[list[list[int]]],
                       constraints: list[list[Constraints | None]]) -> Iterator[list[list[Hypothesis]]]:
        """`search` of each batch, in order (a batch without constraints is searched without them)."""
        for sources, wanted in zip(batches, constraints):
            yield self.search(sources, wanted if any(wanted) else None)

    def alignments(self, lines: list[str], translations: list[str]) -> list[str]:
        """Pharaoh links between each line's words and its translation's words."""
        from nmtkit.align.attention import align_translations
        from nmtkit.align.links import format_pharaoh

        links = align_translations(self.loaded, lines, translations, self.device)
        return [format_pharaoh(pair) for pair in links]

    def translate(self, lines: list[str], first_line: int = 1) -> list[str]:
        """The best translation of each line; empty lines stay empty."""
        return [hyps[0][0] for hyps in self.translate_nbest(lines, first_line)]


class ExportedTranslator(Translator):
    """A directory written by `nmtkit export` behind the same interface: nmtkit's subword models, batching,
    truncation and output format; the search runs in CTranslate2 (`nmtkit.ct2`). The PyTorch set-up of
    `Translator.__init__` does not apply."""

    # tokens per batch of a one-thread worker on int8 weights: 1,000 (as 2,000 at --inter-threads 2) against the
    # default 3,000 took 15.2 s against 15.9 s for the Acts verses (int8 export, beam 5, medians of 5 alternating
    # whole commands on an Intel Xeon family 6 model 85); float32 weights are as fast or faster in large batches
    single_thread_int8_batch = 1000

    def __init__(self, exported: ExportedModel, decode: DecodeConfig, device: str = "auto", threads: int = 0,
                 inter_threads: int = 1):
        self.loaded, self.decode = exported, decode
        check_tgt_lang(decode, exported.tags)
        check_corpus_tag(decode, exported)
        self.engine = CTranslate2Search(exported, decode, device, threads, inter_threads)
        self.device, self.max_source = self.engine.device, self.engine.max_source

    @property
    def workers(self) -> int:
        """Batches searched at once: `--inter-threads`, or one when sampling (see `search_batches`)."""
        return 1 if self.decode.sample else self.engine.inter_threads

    @property
    def batch_budget(self) -> int:
        """`decode.batch_tokens` shared by the batches searched at once: N workers search N batches of 1/N of it
        each, so that as many tokens are in flight (and as much memory) as with one worker, and a chunk of lines
        is cut into N times as many batches, which keeps the workers busier. A worker of one CPU thread searches
        int8 weights fastest in small batches, and gets at most `single_thread_int8_batch` tokens (the speed of
        each batch size is in docs/export-serve.md)."""
        budget = max(1, self.decode.batch_tokens // self.workers)
        single_thread_int8 = (self.device == "cpu" and self.engine.intra_threads == 1
                              and self.loaded.quantization.startswith("int8"))
        return min(budget, self.single_thread_int8_batch) if single_thread_int8 else budget

    def search_batches(self, batches: list[list[list[int]]],
                       constraints: list[list[Constraints | None]]) -> Iterator[list[list[Hypothesis]]]:
        """With several CTranslate2 workers, that many batches are searched at once (each batch as it would be
        alone, so the results do not change); sampling stays one batch at a time, in order, for its random
        numbers."""
        if self.workers == 1 or len(batches) == 1:
            yield from super().search_batches(batches, constraints)
            return
        with ThreadPoolExecutor(self.workers) as pool:  # CTranslate2 releases the GIL while it searches
            yield from pool.map(self.search, batches, [wanted if any(wanted) else None for wanted in constraints])

    def search(self, sources: list[list[int]],
               constraints: list[Constraints | None] | None = None) -> list[list[Hypothesis]]:
        if constraints is not None:
            raise NmtkitError("CTranslate2 has no constrained search: translate lines with constraints or a prefix "
                              "with the checkpoint")
        if self.step_check is not None:
            self.step_check()
        return self.engine(sources)

    def with_decode(self, **overrides) -> Translator:
        variant = copy.copy(self)
        variant.decode = override_decode(self.decode, overrides)
        check_tgt_lang(variant.decode, self.loaded.tags)
        check_corpus_tag(variant.decode, self.loaded)
        variant.engine = self.engine.with_decode(variant.decode)
        return variant

    def alignments(self, lines: list[str], translations: list[str]) -> list[str]:
        raise NmtkitError("--alignment reads the model's attention in PyTorch: translate with the checkpoint")


def override_decode(defaults: DecodeConfig, overrides: dict) -> DecodeConfig:
    """`defaults` with `overrides` (DecodeConfig field -> value) applied and validated; unknown names are errors."""
    return from_dict(DecodeConfig, {**to_dict(defaults), **overrides}, "decode.")


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
                     alignment: bool = False, input_format: str = "text", source: str = "<stdin>") -> Iterator[str]:
    """Translate an iterable of lines chunk by chunk; yields each chunk's formatted output in input order.

    Lines are read as `input_format` (`nmtkit.inputs`; `source` names the input in errors). With `alignment`, each
    best translation is followed by ` ||| i-j ...` word links (source word first), taken from the model's attention
    when it is teacher-forced on its own translation."""
    iterator = iter(lines)
    first_line = 1
    while chunk := [line.rstrip("\r\n") for line in islice(iterator, translator.decode.buffer_size)]:
        requests = parse_requests(chunk, input_format, source, first_line)
        results = translator.translate_requests(requests, first_line)
        texts = [request.text for request in requests]
        links = translator.alignments(texts, [hyps[0][0] for hyps in results]) if alignment else [None] * len(chunk)
        yield "".join(format_hypotheses(hyps, first_line - 1 + index, translator.decode.nbest, scores, links[index])
                      for index, hyps in enumerate(results))
        first_line += len(chunk)
