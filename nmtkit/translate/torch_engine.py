"""The PyTorch engine: a checkpoint (or an ensemble, or an average of checkpoints) searched by `nmtkit.decoding.search`,
with lexical constraints and prefixes (`nmtkit.decoding.constraints`), the placeholder guarantee
(`nmtkit.decoding.placeholder_guard`) and word alignments from its attention."""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from nmtkit.align.attention import align_translations, teacher_forced_attention
from nmtkit.align.links import format_pharaoh
from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.config.sections import DecodeConfig
from nmtkit.data.dataset import encode_sources
from nmtkit.decoding.constraints import ConstraintEncoder, Constraints, constrained_limits
from nmtkit.decoding.ensemble import load_models
from nmtkit.decoding.hypotheses import Hypothesis, LengthPenalty
from nmtkit.decoding.inputs import Request
from nmtkit.decoding.placeholder_guard import ReservedIds, SymbolGuard
from nmtkit.decoding.rescoring import token_log_probs
from nmtkit.decoding.search import Sampler, argmax_choice, beam_search, greedy_search, max_lengths
from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import pick_device, set_threads
from nmtkit.runtime.precision import decoding_timings, describe, dtype_name, fastest
from nmtkit.translate.engine import Capabilities, override_decode

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


def load_engine(paths: list[Path], device: str, threads: int | None, average: int, decode: dict) -> TorchEngine:
    """The engine of `Translator.load` for checkpoints: `decode` overrides the checkpoint's own decode settings."""
    if threads is not None:
        set_threads(threads)
    torch_device = pick_device(device)
    loaded = load_models(paths, torch_device, average)
    return TorchEngine(loaded, override_decode(loaded.config.decode, decode), torch_device)


class TorchEngine:
    """A loaded checkpoint searched by nmtkit's own search, in `decode.dtype` on `device`."""

    name = "PyTorch"
    capabilities = Capabilities(constraints=True, alignments=True, guards_placeholders=True)

    def __init__(self, loaded: LoadedModel, decode: DecodeConfig, device: torch.device):
        self.loaded, self.decode, self.device = loaded, decode, device
        if device.type == "cpu" and decode.dtype != "float32":
            advise_on_precision(loaded, getattr(torch, decode.dtype), device)
        loaded.model.to(getattr(torch, decode.dtype))
        self.max_source = (loaded.model.max_length() or 1024) - 1  # EOS takes a position
        generator = torch.Generator(device).manual_seed(decode.seed)
        self.sampler = Sampler(decode.temperature, decode.top_k, decode.top_p, generator, decode.epsilon)

    def with_decode(self, decode: DecodeConfig) -> TorchEngine:
        """This engine with other search settings (the same dtype: the model is shared), and the same random
        numbers' generator."""
        if decode.dtype != self.decode.dtype:
            raise NmtkitError("with_decode keeps the model's precision; load the model again for another dtype")
        variant = copy.copy(self)
        variant.decode = decode
        variant.sampler = Sampler(decode.temperature, decode.top_k, decode.top_p, self.sampler.generator,
                                  decode.epsilon)
        return variant

    @property
    def length_penalty(self) -> LengthPenalty:
        decode = self.decode
        return LengthPenalty(decode.length_penalty, decode.alpha, decode.beta, decode.word_penalty,
                             decode.coverage_penalty)

    @functools.cached_property
    def constraint_encoder(self) -> ConstraintEncoder:
        return ConstraintEncoder(self.loaded.tgt_subword)

    def encode_constraints(self, request: Request) -> Constraints:
        """The line's constraints and prefix in target ids, with the registered restrictions it asks for."""
        constraints = self.constraint_encoder.encode(request.constraints, request.negative, request.prefix)
        return replace(constraints, requested=request.restrictions) if request.restrictions else constraints

    @functools.cached_property
    def reserved(self) -> ReservedIds | None:
        return ReservedIds.of(self.loaded.src_subword, self.loaded.tgt_subword)

    def _guard(self, sources: list[list[int]]) -> SymbolGuard | None:
        """The placeholder guard of a batch: what its sources' ids hold of the reserved symbols."""
        if not self.decode.guard_placeholders or self.reserved is None:
            return None
        return self.reserved.guard(sources, self.device)

    def search(self, sources: list[list[int]], constraints: list[Constraints | None] | None,
               check: Callable[[], None] | None) -> list[list[Hypothesis]]:
        """See `Engine.search`: lines with `constraints` are searched by beam search, even with `--beam 1`; a guard
        (`decode.guard_placeholders`) keeps each source's placeholder symbols, in every search. Beam search runs
        without it first and searches again under it only the lines whose hypotheses break its rule (`kept`): where
        the model keeps its symbols by itself, the guarantee changes nothing."""
        guard = self._guard(sources)
        beam = constraints is not None or not (self.decode.sample or self.decode.beam <= 1)
        if guard is None or not guard.active or not beam:
            return self._search(sources, constraints, check, guard)
        found = self._search(sources, constraints, check, None)
        again = [row for row, hyps in enumerate(found) if not all(guard.kept(row, hyp.tokens) for hyp in hyps)]
        if again:
            redo = self._search([sources[row] for row in again],
                                None if constraints is None else [constraints[row] for row in again], check,
                                guard.take(torch.tensor(again, device=guard.present.device)))
            for row, hyps in zip(again, redo):
                found[row] = hyps
        return found

    def _search(self, sources: list[list[int]], constraints: list[Constraints | None] | None,
                check: Callable[[], None] | None, guard: SymbolGuard | None) -> list[list[Hypothesis]]:
        src, src_mask = encode_sources(sources)
        src, src_mask = src.to(self.device), src_mask.to(self.device)
        limit = max_lengths(src_mask, self.decode.max_len_a, self.decode.max_len_b, self.max_source)
        needs = constraints if guard is None else guard.constraints(constraints)  # room for phrases and symbols
        if needs is not None:
            limit = constrained_limits(limit, needs, self.max_source)
        if constraints is None and (self.decode.sample or self.decode.beam <= 1):
            choose = self.sampler if self.decode.sample else argmax_choice
            found = greedy_search(self.loaded.model, src, src_mask, limit, choose, self.decode.min_len, check, guard)
            return [[hyp] for hyp in found]
        try:
            nbest = beam_search(self.loaded.model, src, src_mask, limit, self.decode.beam, self.length_penalty,
                                self.decode.min_len, self.decode.stop_finished, constraints,
                                None if constraints is None else self.constraint_encoder.word_ends, check, guard)
        except ValueError as error:  # a search option this model cannot serve
            raise NmtkitError(str(error)) from error
        return [hyps[: self.decode.nbest] for hyps in nbest]

    def token_log_probs(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[float]]:
        return token_log_probs(self.loaded.model, sources, targets, self.device, self.decode.batch_tokens)

    def align(self, lines: list[str], translations: list[str]) -> list[str]:
        links = align_translations(self.loaded, lines, translations, self.device)
        return [format_pharaoh(pair) for pair in links]

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[list[float]]]:
        model = self.loaded.model
        if not model.has_attention:
            return [[] for _ in sources]
        with model.chosen_attention(None, None):
            return [matrix.tolist() for matrix in teacher_forced_attention(model, sources, targets, self.device)]
