"""The translation pipeline, over any engine (`nmtkit.translate.engine`): each request's text to subword ids (with a
multilingual model's target-language tag, truncated to what the model reads), length-sorted batches, the engine's
search, and the hypotheses back to text. Placeholders are masked before the subwords and checked, repaired and
restored after decoding (`masking.py`, `repair.py`).

This module imports no torch: translating with an exported model (CTranslate2) starts in 0.3 s instead of 2.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from nmtkit.config.sections import DecodeConfig
from nmtkit.data.batching import token_batches
from nmtkit.data.subword import UNK
from nmtkit.data.tags import tag_ids
from nmtkit.decoding.confidence import confidences
from nmtkit.decoding.hypotheses import Hypothesis
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.symbols.markup import MarkupStats, translate_fragments
from nmtkit.symbols.placeholders import reserved_symbols
from nmtkit.translate.engine import Capabilities, Engine, LoadedFiles, check_tags, override_decode
from nmtkit.translate.html_text import TextPlaceholders
from nmtkit.translate.masking import MaskedLine, Masking, PlaceholderCounts

if TYPE_CHECKING:
    from nmtkit.decoding.constraints import Constraints

log = logging.getLogger(__name__)


def source_tag(lang: str, loaded: LoadedFiles, where: str) -> list[int]:
    """The tag of target language `lang` that starts a multilingual model's source (Johnson et al. 2017); none for a
    model of one target language, which refuses another language. `where` ("line 3") starts an error."""
    if not loaded.tags:
        model_lang = loaded.langs[1]
        if lang and model_lang and lang != model_lang:
            raise NmtkitError(f"{where}: target language {lang!r}: this model translates into "
                              f"{model_lang} only (--tgt-lang is for multilingual models)")
        return []
    if lang not in loaded.tags:
        what = (f"unknown target language {lang!r}" if lang else
                "a multilingual model needs a target language (--tgt-lang, or tgt_lang)")
        raise NmtkitError(f"{where}: {what}; this model translates into {', '.join(sorted(loaded.tags))}")
    return [loaded.tags[lang]]


def engine_for(paths: list[Path], device: str, threads: int | None, average: int, inter_threads: int,
               decode: dict) -> Engine:
    """The engine for `Translator.load`: CTranslate2 for a directory written by `nmtkit export`, PyTorch for
    checkpoints; each engine's module is imported only when it is needed (an export never imports torch)."""
    if any(item.is_dir() for item in paths):
        if len(paths) > 1 or average:
            raise NmtkitError("an exported directory translates alone: no ensemble, no --average")
        from nmtkit.translate.ctranslate2_engine import load_engine
        return load_engine(paths[0], device, threads or 0, inter_threads, decode)
    if inter_threads > 1:
        raise NmtkitError("--inter-threads applies to a directory written by nmtkit export (CTranslate2); a "
                          "checkpoint uses --threads")
    from nmtkit.translate.torch_engine import load_engine
    return load_engine(paths, device, threads, average, decode)


class Translator:
    """An engine plus the pipeline around its search; translates lists of lines."""

    step_check: Callable[[], None] | None = None  # see `with_step_check`

    def __init__(self, engine: Engine):
        check_tags(engine.decode, engine.loaded)
        self.engine = engine
        self.masking = Masking(engine.decode.placeholders, engine.loaded, PlaceholderCounts())

    @classmethod
    def load(cls, path: str | Path | list[str | Path], device: str = "auto", threads: int | None = None,
             average: int = 0, inter_threads: int = 0, **decode) -> Translator:
        """A Translator for a checkpoint (a list of several: an ensemble) or a directory written by `nmtkit export`
        (by CTranslate2). Keyword options are DecodeConfig fields (beam=5, ...) over the model's own; `threads` CPU
        threads (0: all; None: torch's as it is); `average` N averages the run's last N checkpoint_<step>.pt;
        `inter_threads` N (exports only): N batches at once, threads/N threads each (0: `CTranslate2Model`'s)."""
        paths = [Path(item) for item in (path if isinstance(path, (list, tuple)) else [path])]
        return cls(engine_for(paths, device, threads, average, inter_threads, decode))

    @property
    def decode(self) -> DecodeConfig:
        return self.engine.decode

    @property
    def loaded(self) -> LoadedFiles:
        return self.engine.loaded

    @property
    def capabilities(self) -> Capabilities:
        return self.engine.capabilities

    @property
    def placeholder_counts(self) -> PlaceholderCounts:
        """The lines translated that hold placeholders, and those repaired, over this translator's life."""
        return self.masking.counts

    @property
    def max_source(self) -> int:
        """The longest source the model reads, in subwords (EOS excluded)."""
        return self.engine.max_source

    def with_decode(self, **overrides) -> Translator:
        """This translator with other search settings (DecodeConfig fields other than dtype); the model is shared."""
        decode = override_decode(self.decode, overrides)
        check_tags(decode, self.loaded)
        variant = copy.copy(self)
        variant.engine = self.engine.with_decode(decode)
        if decode.placeholders != self.decode.placeholders:
            variant.masking = Masking(decode.placeholders, self.loaded, self.masking.counts)
        return variant

    def with_step_check(self, check: Callable[[], None]) -> Translator:
        """This translator calling `check` before each decoding step (an engine that cannot stop between steps,
        such as CTranslate2: before each batch); `check` stops the translation by raising (`nmtkit serve`'s time
        budget)."""
        variant = copy.copy(self)
        variant.step_check = check
        return variant

    def encode(self, requests: list[Request], where: str = "line", first: int = 1,
               masked: list[MaskedLine] | None = None) -> list[list[int]]:
        """Each request's source ids, not truncated: its target-language tag (`source_tag`; errors name `where` and
        the request's number from `first`), the `--tag` corpus tag if any, and the subwords of its text with
        placeholders masked (`masked`: the requests' `Masking.mask`, when the caller has it)."""
        masked = self.mask(requests) if masked is None else masked
        ids = self.loaded.src_subword.encode([line.text for line in masked])
        corpus_tag = tag_ids(self.decode.tag, self.loaded.src_subword, self.loaded.tags)  # after the language tag
        return [source_tag(request.tgt_lang or self.decode.tgt_lang, self.loaded, f"{where} {first + index}")
                + corpus_tag + seq for index, (request, seq) in enumerate(zip(requests, ids))]

    def mask(self, requests: list[Request]) -> list[MaskedLine]:
        """The requests' texts with their placeholders masked (`Masking.mask`), as `encode` reads them."""
        return [self.masking.mask(request.text) for request in requests]

    def translate_nbest(self, lines: list[str], first_line: int = 1) -> list[list[tuple[str, float]]]:
        """(text, score) hypotheses per line, best first; an empty line gives one empty hypothesis."""
        return self.translate_requests([Request(line) for line in lines], first_line)

    def translate_requests(self, requests: list[Request], first_line: int = 1, sources: list[list[int]] | None = None,
                           masked: list[MaskedLine] | None = None) -> list[list[tuple[str, float]]]:
        """(text, score) hypotheses per request, best first, meeting its constraints where they can be met (a
        warning names the lines where they cannot) and holding its placeholders (see `masking.py`); an empty text
        gives one empty hypothesis. `sources` and `masked`: the requests' ids from `encode` and their masked lines,
        when the caller has them already (both, or `masked` alone)."""
        masked = self.mask(requests) if masked is None else masked
        return restored(self.masking, masked, self._translate_masked(requests, masked, first_line, sources))

    def _translate_masked(self, requests: list[Request], masked: list[MaskedLine], first_line: int,
                          sources: list[list[int]] | None) -> list[list[tuple[str, float]]]:
        """`translate_requests`' hypotheses, masked, each checked (and repaired where it fails)."""
        for index, request in enumerate(requests):
            if "\ufffd" in request.text:
                log.warning("line %d: invalid UTF-8 replaced by U+FFFD", first_line + index)
        sources = self.encode(requests, "line", first_line, masked) if sources is None else sources
        ids = [truncated(seq, self.max_source, first_line + index) for index, seq in enumerate(sources)]
        constraints = [request_constraints(self.engine, request, first_line + index)
                       for index, request in enumerate(requests)]
        outputs: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in requests]
        todo = [index for index, request in enumerate(requests) if request.text.strip()]
        lengths = [len(ids[index]) for index in todo]
        batches = [[todo[position] for position in batch]  # no target yet: source lengths
                   for batch in token_batches(lengths, lengths, self.batch_budget)]
        searched = search_batches(self.search, self.workers,
                                  [[ids[row] for row in rows] for rows in batches],
                                  [[constraints[row] for row in rows] for rows in batches])
        for rows, found in zip(batches, searched):
            decoded = iter(self.loaded.tgt_subword.decode([hyp.tokens for hyps in found for hyp in hyps]))
            for row, hyps in zip(rows, found):  # one decode call per batch: each call has a fixed cost
                if not hyps[0].constraints_met:
                    log.warning("line %d: its constraints cannot all be met within the length limit; translated "
                                "without them", first_line + row)
                outputs[row] = [(one_line(next(decoded), first_line + row), hyp.score) for hyp in hyps]
            checked = self.masking.keep(self.engine, [masked[row] for row in rows], [ids[row] for row in rows], found,
                                        [outputs[row] for row in rows])
            for row, hyps in zip(rows, checked):
                outputs[row] = hyps
        return outputs

    @property
    def batch_budget(self) -> int:
        """Source tokens per batch, padding included: `decode.batch_tokens` shared by the N batches N workers
        search at once (as many tokens in flight, and as much memory, as with one; more batches keep the workers
        busier), at most the engine's own cap (`Capabilities.batch_tokens`)."""
        budget = max(1, self.decode.batch_tokens // self.workers)
        return min(budget, self.capabilities.batch_tokens or budget)

    @property
    def workers(self) -> int:
        """Batches searched at once: the engine's workers, or one under MBR (its utilities set torch's threads)."""
        return 1 if self.decode.mbr else self.capabilities.workers

    def search(self, sources: list[list[int]],
               constraints: list[Constraints | None] | None = None) -> list[list[Hypothesis]]:
        """Translate a batch of subword-id sequences; up to `decode.nbest` hypotheses each, best first. Lines with
        `constraints` are searched with them, by beam search even with `--beam 1`. Under MBR (`decode.mbr`), the
        one candidate it chooses (`nmtkit.translate.mbr_search`)."""
        if self.decode.mbr:
            from nmtkit.translate.mbr_search import mbr_search
            return mbr_search(self.engine, self.loaded.tgt_subword, sources, constraints, self.step_check)
        return self.engine.search(sources, constraints, self.step_check)

    def translate_aligned(self, requests: list[Request],
                          first_line: int = 1) -> tuple[list[list[tuple[str, float]]], list[str]]:
        """`translate_requests`, and the Pharaoh links between each line's words and its best translation's, from
        the model's attention when it is teacher-forced on its own (masked) translation; word indices are those of
        the original text and translation (`masking.word_map`)."""
        if not self.capabilities.alignments:
            raise NmtkitError("--alignment reads the model's attention in PyTorch: translate with the checkpoint")
        masked = self.mask(requests)
        found = self._translate_masked(requests, masked, first_line, None)
        best = [hyps[0][0] for hyps in found]
        links = [self.masking.original_links(pairs, line, text)
                 for pairs, line, text in zip(self.engine.align([line.text for line in masked], best), masked, best)]
        return restored(self.masking, masked, found), links

    def translate_confident(self, requests: list[Request], estimators: list[str], first_line: int = 1,
                            sources: list[list[int]] | None = None, masked: list[MaskedLine] | None = None,
                            ) -> tuple[list[list[tuple[str, float]]], list[dict[str, float]]]:
        """`translate_requests` (`sources` and `masked` as there), and the confidence in each best translation: the
        named `estimators` (`nmtkit.decoding.confidence`) of the token log-probabilities the model gives it when
        teacher-forced on its source and on the translation (masked, segmented anew), so that a line gets the same
        confidence in any batch; an empty line gets certainty (0 log-probability)."""
        masked = self.mask(requests) if masked is None else masked
        sources = self.encode(requests, "line", first_line, masked) if sources is None else sources
        found = self._translate_masked(requests, masked, first_line, sources)
        rows = [row for row, request in enumerate(requests) if request.text.strip()]
        targets = self.loaded.tgt_subword.encode([found[row][0][0] for row in rows])
        log_probs = dict(zip(rows, self.engine.token_log_probs([sources[row][: self.max_source] for row in rows],
                                                               [target[: self.max_source] for target in targets])))
        return restored(self.masking, masked, found), [confidences(log_probs.get(row, []), estimators)
                                                       for row in range(len(requests))]

    def translate(self, lines: list[str], first_line: int = 1) -> list[str]:
        """The best translation of each line; empty lines stay empty."""
        return [hyps[0][0] for hyps in self.translate_nbest(lines, first_line)]


def restored(masking: Masking, masked: list[MaskedLine],
             found: list[list[tuple[str, float]]]) -> list[list[tuple[str, float]]]:
    """The hypotheses `found` for the `masked` lines with their placeholders' original text."""
    return [[(masking.restore(text, line), score) for text, score in hyps] for line, hyps in zip(masked, found)]


LINE_BREAKS = str.maketrans({"\n": " ", "\r": " "})


def one_line(text: str, number: int) -> str:
    """A translation on one line: a line break the model wrote (SentencePiece's byte pieces spell any character,
    and a sampled translation does write them) would break one output line per input line in every reader, so it
    is written as a space, with a warning naming the line."""
    if "\n" not in text and "\r" not in text:
        return text
    log.warning("line %d: the model wrote a line break; written as a space", number)
    return text.translate(LINE_BREAKS)


def truncated(ids: list[int], max_source: int, number: int) -> list[int]:
    """`ids` cut to the `max_source` subwords the model reads, with a warning naming line `number`."""
    if len(ids) > max_source:
        log.warning("line %d: %d subwords, truncated to %d", number, len(ids), max_source)
        return ids[:max_source]
    return ids


def constraints_refusal(engine: Engine) -> str | None:
    """Why `engine` cannot follow constraints and prefixes, None when it can: the one policy of translate (each line)
    and serve (each request)."""
    if engine.decode.sample or (engine.decode.mbr and engine.decode.mbr_candidates == "sample"):
        return "constraints, prefixes and restrictions need beam search; sampling draws each token freely"
    if not engine.capabilities.constraints:
        return (f"{engine.name} has no constrained search: translate lines with constraints, a prefix or a "
                "restriction with the checkpoint")
    return None


def request_constraints(engine: Engine, request: Request, number: int) -> Constraints | None:
    """The constraints and prefix of line `number` as ids, None for an unconstrained one; an engine or a search that
    cannot take them is an error (`constraints_refusal`)."""
    if not request.constrained:
        return None
    refusal = constraints_refusal(engine)
    if refusal:
        raise NmtkitError(f"line {number}: {refusal}")
    constraints = engine.encode_constraints(request)
    if any(UNK in phrase for phrase in (*constraints.positive, *constraints.negative, constraints.forced)):
        log.warning("line %d: a constraint or the prefix holds characters the target vocabulary cannot write "
                    "(they become the unknown piece)", number)
    return constraints


def search_batches(search: Callable, workers: int, batches: list[list[list[int]]],
                   constraints: list[list[Constraints | None]]) -> Iterator[list[list[Hypothesis]]]:
    """`search` of each batch, in order (a batch without constraints is searched without them); an engine of
    `workers` workers searches that many batches at once, each as it would be alone, so the results do not change."""
    wanted = [batch if any(batch) else None for batch in constraints]
    if workers == 1 or len(batches) == 1:
        yield from map(search, batches, wanted)
        return
    with ThreadPoolExecutor(workers) as pool:  # the engine releases the GIL while it searches
        yield from pool.map(search, batches, wanted)


def translate_html(translator: Translator, fragments: list[str], skip: Iterable[str] = (),
                   stats: MarkupStats | None = None) -> list[str]:
    """The best translation of each HTML or XML fragment, its markup kept (`nmtkit.symbols.markup`): inline tags go
    through the model as tag symbols when its vocabulary has them (trained with placeholders), else the text between
    them is translated piece by piece; `skip` names elements to keep untranslated besides script, style, code, pre and
    textarea; `stats` counts the segments translated and repaired. With a placeholder rule in force, the placeholders
    inside the text go through the model as symbols too (`html_text.py`)."""
    loaded = translator.loaded
    symbols = all(subword.processor.piece_to_id(symbol) != UNK for symbol in reserved_symbols()
                  for subword in (loaded.src_subword, loaded.tgt_subword))
    unmasked = copy.copy(translator)  # markup.py masks the tags itself: its pieces hold symbols, not text to mask
    unmasked.masking = Masking("none", loaded, translator.masking.counts)
    patterns = translator.masking.patterns
    return translate_fragments(fragments, unmasked.translate, symbols, skip, stats,
                               lambda markup_placeholders: TextPlaceholders.of(patterns, markup_placeholders))
