"""Streaming batched translation: read lines, translate them in length-sorted batches, write in input order.

Exactly one output line per input line: an empty line gives an empty line, and every chunk of
`buffer_size` lines is written and flushed as soon as it is translated. Lines may carry constraints (a `Request`
read from tsv or jsonl input, see `nmtkit.decoding.inputs`): they are searched with them, batched with the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from nmtkit.decoding.confidence import format_confidences, parse_estimators
from nmtkit.decoding.inputs import parse_requests
from nmtkit.errors import NmtkitError
from nmtkit.symbols.markup import MarkupStats
from nmtkit.translate.translator import Translator, translate_html


def format_hypotheses(hyps: list[tuple[str, float]], line_index: int, nbest: int, scores: bool,
                      alignment: str | None = None, confidence: dict[str, float] | None = None) -> str:
    """One output line, or `i ||| hypothesis ||| score` lines (Moses n-best format, 0-based i) when nbest > 1.

    `confidence` (estimator -> value) is appended to a one-best line as ` ||| mean=-0.3127 min=-2.0410`, then
    `alignment` (Pharaoh links of the best hypothesis) as ` ||| i-j ...`."""
    if nbest > 1:
        return "".join(f"{line_index} ||| {text} ||| {score:.4f}\n" for text, score in hyps)
    text, score = hyps[0]
    fields = [text] + ([f"{score:.4f}"] if scores else []) + \
        ([format_confidences(confidence)] if confidence is not None else []) + \
        ([alignment] if alignment is not None else [])
    return " ||| ".join(fields) + "\n"


def translate_html_stream(translator: Translator, lines: Iterator[str], skip: str) -> Iterator[str]:
    """Translate HTML or XML fragments, a line each, chunk by chunk (`Translator.translate_html`; `skip`: element
    names to keep untranslated, comma-separated); says at the end how many segments were translated and repaired."""
    stats = MarkupStats()
    while chunk := [line.rstrip("\r\n") for line in islice(lines, translator.decode.buffer_size)]:
        yield "".join(f"{text}\n" for text in translate_html(translator, chunk, skip.split(","), stats))
    stats.report()


def translate_stream(translator: Translator, lines: Iterable[str], scores: bool = False,
                     alignment: bool = False, input_format: str = "text", source: str = "<stdin>",
                     html_skip: str = "", first_line: int = 1, confidence: str = "") -> Iterator[str]:
    """Translate an iterable of lines chunk by chunk; yields each chunk's formatted output in input order.

    Lines are read as `input_format` (`nmtkit.decoding.inputs`; `source` names the input in errors); `html` input goes
    to `translate_html_stream` with `html_skip`. With `alignment`, each best translation is followed by ` ||| i-j ...`
    word links (source word first), taken from the model's attention when it is teacher-forced on its own
    translation. `confidence` names estimators (`nmtkit.decoding.confidence`, comma-separated) of each best
    translation's confidence, appended as ` ||| mean=... min=...`. `first_line` numbers the first line (a resumed
    run's, in warnings and n-best lists). At the end, how many lines lost or broke their placeholders (and were
    repaired) is logged."""
    iterator = iter(lines)
    estimators = parse_estimators(confidence) if confidence else []
    if estimators and (alignment or translator.decode.nbest > 1 or input_format == "html"):
        raise NmtkitError("--confidence rates one translation a line: no --alignment, --nbest or --input-format html")
    if html_skip and input_format != "html":
        raise NmtkitError("--html-skip applies to --input-format html")
    if input_format == "html":
        if scores or alignment or translator.decode.nbest > 1:
            raise NmtkitError("--input-format html prints one translation a line: no --nbest, --scores or --alignment")
        yield from translate_html_stream(translator, iterator, html_skip)
        return
    while chunk := [line.rstrip("\r\n") for line in islice(iterator, translator.decode.buffer_size)]:
        requests = parse_requests(chunk, input_format, source, first_line)
        links: list[str | None] = [None] * len(chunk)
        rated: list[dict[str, float] | None] = [None] * len(chunk)
        if alignment:
            results, links = translator.translate_aligned(requests, first_line)
        elif estimators:
            results, rated = translator.translate_confident(requests, estimators, first_line)
        else:
            results = translator.translate_requests(requests, first_line)
        yield "".join(format_hypotheses(hyps, first_line - 1 + index, translator.decode.nbest, scores, links[index],
                                        rated[index]) for index, hyps in enumerate(results))
        first_line += len(chunk)
    translator.placeholder_counts.report()
