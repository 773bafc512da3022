"""A request's job, from its body to its answer, in the service's request threads (never on the event loop): the body
read and checked, its sentences masked and encoded a sentence at a time within the time budget, and the answer
written as JSON a sentence at a time. Threads share Python's interpreter lock, and a call into C holds it until it
returns: the per-sentence caps, checked before any work, bound each such call."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.serve.config import ServeConfig
from nmtkit.serve.requests import BadRequest, check_output_lengths, parse_body, parse_request
from nmtkit.translate import Translator
from nmtkit.translate.masking import MaskedLine
from nmtkit.translate.translator import constraints_refusal

log = logging.getLogger(__name__)
dumps = functools.partial(json.dumps, allow_nan=False)  # NaN and Infinity are not JSON: a 500, never such an answer


@dataclass
class Job:
    """One request's sentences (and their source ids, `Translator.encode`) waiting for the worker; `done` gets their
    (text, score) hypotheses."""

    sentences: list[Request]
    sources: list[list[int]]
    masked: list[MaskedLine]  # the sentences with their placeholders masked (`Translator.encode`'s input)
    options: dict
    tokens: int
    done: asyncio.Future | None = field(default=None, repr=False)  # made on the event loop, once prepared


def prepare_job(variant: Callable[[dict], Translator], config: ServeConfig, max_tokens: int,
                gone: threading.Event, raw: bytes, deadline: float) -> tuple[Job, bool]:
    """A request body's job for the worker, and whether to answer with scores; BadRequest for a body, a field or a
    limit the request breaks. `variant`: the translator for a request's search options."""
    sentences, options, scores = parse_request(parse_body(raw, config), config)
    try:
        translator = variant(options)
        sources, masked = encode_sentences(translator, sentences, config, max_tokens, gone, deadline)
    except NmtkitError as error:
        raise BadRequest(str(error)) from error
    lengths = [len(ids) for ids in sources]
    check_output_lengths(lengths, translator.decode.max_len_a, translator.decode.max_len_b, translator.max_source,
                         config)
    return Job(sentences, sources, masked, options, sum(lengths)), scores


def encode_sentences(translator: Translator, sentences: list[Request], config: ServeConfig, max_tokens: int,
                     gone: threading.Event, deadline: float = math.inf) -> tuple[list[list[int]], list[MaskedLine]]:
    """The sentences' source ids (`Translator.encode`: masked, then subwords) and masked lines (which the
    translation restores), a sentence at a time, so that no call into C holds the interpreter lock for more than
    one capped sentence; BadRequest for a sentence over `max_tokens` (413) and once past `deadline` or `gone` (503);
    NmtkitError for what the translator cannot serve (constraints its search cannot follow, no target language for
    a multilingual model)."""
    if any(sentence.constrained for sentence in sentences):
        refusal = constraints_refusal(translator.engine)
        if refusal:
            raise NmtkitError(refusal)
    sources, masked = [], []
    for index, sentence in enumerate(sentences):
        if time.monotonic() > deadline or gone.is_set():
            log.warning("preparing a request stopped at sentence %d of %d: over the time budget of %g s", index,
                        len(sentences), config.time_budget)
            raise BadRequest(f"preparing the request ran past this service's time budget ({config.time_budget:g} "
                             "s, --time-budget): send fewer or shorter sentences", 503)
        masked += translator.mask([sentence])
        ids = translator.encode([sentence], "sentence", index, masked[-1:])[0]
        if len(ids) > max_tokens:
            raise BadRequest(f"sentence {index} has {len(ids)} subwords; at most {max_tokens}", 413)
        sources.append(ids)
    return sources, masked


def answer(results: list[list[tuple[str, float]]], nbest: int, scores: bool,
           rated: list[dict[str, float]] | None = None) -> bytes:
    """The JSON answer {"translations": [...], "scores": [...], "confidence": [{...}], "nbest": [[...]]}, written a
    sentence at a time: one `json.dumps` of a whole answer holds the interpreter lock throughout (0.4 s for 256
    sentences of 16 hypotheses of 3,000 characters each). ValueError for a score that is not a JSON number."""
    fields = {"translations": [dumps(hyps[0][0]) for hyps in results]}
    if scores:
        fields["scores"] = [dumps(hyps[0][1]) for hyps in results]
    if rated is not None:
        fields["confidence"] = [dumps(values) for values in rated]
    if nbest > 1:
        fields["nbest"] = [dumps([{"translation": text, "score": score} for text, score in hyps]) for hyps in results]
    return ("{" + ", ".join(f'"{name}": [{", ".join(values)}]' for name, values in fields.items()) + "}").encode()
