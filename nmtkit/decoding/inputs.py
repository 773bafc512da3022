"""Input formats of `nmtkit translate` (`--input-format`): each input line is one request.

- `text`: the line is the source sentence.
- `tsv`: `source<TAB>phrase<TAB>phrase...` (the format of fairseq's `--constraints`): each field after the source
  is a target-language word or phrase that the translation must contain.
- `jsonl`: one JSON object per line, `{"text": source, "constraints": [phrase, ...], "negative": [phrase, ...],
  "prefix": target prefix, "tgt_lang": language}`, and the field of each registered restriction
  (`nmtkit.decoding.builtin_restrictions`, e.g. `"no_repeat_ngram": 3`); every key but "text" may be left out (or
  null); other keys are errors. `tgt_lang` chooses a multilingual model's target language for this line (default:
  `--tgt-lang`).
- `html`: the line is an HTML or XML fragment whose text is translated and markup kept (`nmtkit.symbols.markup`, through
  `Translator.translate_html`, not a request of its own).

A bad line is an error naming the input and the line (`<input>:<line>: ...`), never a guess.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nmtkit.config.sections import MAX_LINE_BYTES
from nmtkit.data.lines import bounded_lines
from nmtkit.decoding.builtin_restrictions import RESTRICTIONS
from nmtkit.errors import NmtkitError

KEYS = ("text", "constraints", "negative", "prefix", "tgt_lang")


@dataclass(frozen=True)
class Request:
    """A line to translate and what its translation must (not) contain or start with, in target-language text."""

    text: str
    constraints: tuple[str, ...] = ()
    negative: tuple[str, ...] = ()
    prefix: str = ""
    tgt_lang: str = ""  # a multilingual model's target language ("" = the translator's default)
    restrictions: tuple[tuple[str, object], ...] = ()  # (field, value) of the registered restrictions it asks for

    @property
    def constrained(self) -> bool:
        return bool(self.constraints or self.negative or self.prefix or self.restrictions)


def _shown(value: object) -> str:
    """`value` as JSON in an error message: at most 40 characters, whatever its size or depth."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except RecursionError:
        text = f"a {type(value).__name__} nested too deeply"
    return text if len(text) <= 40 else text[:37] + "..."


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {_shown(value)}")
    if "\n" in value or "\r" in value:
        raise ValueError(f"{what} holds a line break; each output line is one input line")
    return value


def _phrase(value: object, what: str) -> str:
    if not _string(value, what).strip():
        raise ValueError(f"{what} is empty; a constraint is a word or phrase")
    return value


def _phrases(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f'"{key}" must be a list of strings, not {_shown(value)}')
    return tuple(_phrase(item, f'"{key}"[{index}]') for index, item in enumerate(value))


def parse_text(line: str) -> Request:
    return Request(line)


def parse_tsv(line: str) -> Request:
    text, *phrases = line.split("\t")
    return Request(text, tuple(_phrase(phrase, f"field {index}") for index, phrase in enumerate(phrases, 2)))


def parse_jsonl(line: str) -> Request:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:  # `"[" * 10**5`: json's parser recurses; a request is at most two levels deep
        raise ValueError("invalid request: JSON nested too deeply") from None
    except ValueError:  # a number of more digits than Python converts (4,300 by default)
        raise ValueError("invalid JSON (a number too long to read)") from None
    return parse_record(record)


def parse_record(record: object) -> Request:
    """A request from a JSON object {"text": ..., "constraints": [...], ...} (a jsonl line, or a server request's
    sentence); ValueError says what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object such as {{\"text\": \"...\"}}, got {_shown(record)}")
    unknown = sorted(set(record) - set(KEYS) - set(RESTRICTIONS))
    if unknown:
        raise ValueError(f'unknown key "{unknown[0]}"; the keys are {", ".join((*KEYS, *RESTRICTIONS))}')
    if "text" not in record:
        raise ValueError('missing "text" (the source sentence)')
    prefix, tgt_lang = record.get("prefix"), record.get("tgt_lang")
    return Request(_string(record["text"], '"text"'), _phrases(record.get("constraints"), "constraints"),
                   _phrases(record.get("negative"), "negative"), "" if prefix is None else _string(prefix, '"prefix"'),
                   "" if tgt_lang is None else _string(tgt_lang, '"tgt_lang"'), _restrictions(record))


def _restrictions(record: dict) -> tuple[tuple[str, object], ...]:
    """The registered restrictions' fields that `record` sets, each value checked by its restriction."""
    asked = []
    for field, entry in RESTRICTIONS.items():
        if record.get(field) is not None:
            try:
                asked.append((field, entry.check(record[field])))
            except ValueError as error:
                raise ValueError(f'"{field}": {error}') from None
    return tuple(asked)


PARSERS: dict[str, Callable[[str], Request]] = {"text": parse_text, "tsv": parse_tsv, "jsonl": parse_jsonl}


FORMATS = (*PARSERS, "html")


def check_format(input_format: str) -> None:
    if input_format not in FORMATS:
        raise NmtkitError(f"unknown --input-format {input_format!r}; use one of {', '.join(FORMATS)}")


def parse_requests(lines: list[str], input_format: str, source: str, first_line: int = 1) -> list[Request]:
    """One request per line (newlines already stripped); a bad line is an NmtkitError `<source>:<line>: ...`."""
    check_format(input_format)
    parse, requests = PARSERS[input_format], []
    for number, line in enumerate(lines, first_line):
        try:
            requests.append(parse(line))
        except ValueError as error:
            raise NmtkitError(f"{source}:{number}: {error}") from None
    return requests


def open_lines(path: Path | None, max_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Text lines of a file or stdin, each with its newline; invalid UTF-8 is replaced (a warning names the line
    later) rather than fatal. A line of more than `max_bytes` bytes is an error naming it, found with at most that
    much of it read (`nmtkit.data.lines`): a line so long is beyond any model's positions, and cutting it instead
    would translate a line the user did not write."""
    if path is None:
        return _decoded(sys.stdin.buffer, "<stdin>", max_bytes)
    try:
        file = open(path, "rb")  # opened here, not in the generator: a missing file is an error at once
    except OSError as error:
        raise NmtkitError(f"cannot read {path}: {error.strerror}") from error
    return _decoded(file, str(path), max_bytes, close=True)


def _decoded(file: BinaryIO, source: str, max_bytes: int, close: bool = False) -> Iterator[str]:
    try:
        for raw in bounded_lines(file, max_bytes, source,
                                 "leave it out (no model translates a line this long), or raise --max-line-bytes"):
            yield raw.decode("utf-8", errors="replace")
    finally:
        if close:
            file.close()
