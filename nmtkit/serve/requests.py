"""What one POST /translate request of `nmtkit serve` may be: its JSON body, its fields, and the limits on what it
asks for (`RequestLimits`, part of `nmtkit.serve.config.ServeConfig`), each refused with a 4xx `BadRequest` that
names the limit and its command-line flag.

Numbers are those JSON allows: NaN, Infinity and numbers too large for a float are refused as they are read, and a
body holds no more values, nested no deeper, than a request may (`parse_body`). Each sentence is capped in characters
and UTF-8 bytes before anything reads it: masking and subword encoding cost time in a sentence's length.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import math
from contextlib import contextmanager
from dataclasses import dataclass

from nmtkit.config.sections import option
from nmtkit.decoding.confidence import parse_estimators
from nmtkit.decoding.hypotheses import length_limits
from nmtkit.decoding.inputs import Request, parse_record
from nmtkit.errors import NmtkitError

# the search options a request may set, with their JSON types (a bool is not a number here); and "confidence", the
# estimators of each translation's confidence to answer with ("mean,min": `translate --confidence`), not a search's
REQUEST_OPTIONS = {"beam": int, "nbest": int, "length_penalty": str, "alpha": float, "min_len": int,
                   "max_len_a": float, "max_len_b": int, "tgt_lang": str, "mbr": int, "mbr_candidates": str,
                   "mbr_utility": str, "confidence": str}
MAX_CONFIDENCE_CHARS = 64  # "mean,min,q10,prob" and room: a longer value is refused before it is split
MAX_DEPTH = 4  # objects and arrays a request nests: {"sentences": [{"constraints": ["..."]}]}


@dataclass
class RequestLimits:
    """How much one request may ask for (the service's part of `ServeConfig`)."""

    max_sentences: int = option(256, "most sentences in one request")
    max_sentence_chars: int = option(
        4096, "most characters in one sentence (far more than a real one; a model of 1,024 positions reads about "
        "4,000): a longer one is refused before it is masked or encoded, which bounds how long one step of "
        "preparing a request can hold the server")
    max_sentence_bytes: int = option(
        12288, "most UTF-8 bytes in one sentence (3 a character: the text of any script within "
        "--max-sentence-chars fits, emoji aside)")
    max_beam: int = option(16, "largest beam (and nbest, and number of MBR candidates) a request may ask for")
    max_output_tokens: int = option(
        512, "most target subwords a request may ask for in one translation: its min_len, |max_len_b|, |max_len_a| "
        "and, for each sentence, max_len_a * (source subwords + 1) + max_len_b (at most what the model's positions "
        "allow) must be within it; it also bounds a CTranslate2 call, which the time budget cannot interrupt")
    max_alpha: float = option(10.0, "largest |alpha| (length-penalty exponent) a request may ask for")
    max_constraints: int = option(32, "most constraints and negative phrases in one sentence")
    max_constraint_bytes: int = option(
        2048, "most UTF-8 bytes of one sentence's constraints, negative phrases and prefix together")
    max_request_constraints: int = option(256, "most constraints and negative phrases in one request")
    max_request_constraint_bytes: int = option(
        65536, "most UTF-8 bytes of constraints, negative phrases and prefixes in one request")

    def __post_init__(self):
        if min(self.max_sentences, self.max_sentence_chars, self.max_sentence_bytes, self.max_beam,
               self.max_output_tokens) < 1:
            raise NmtkitError("--max-sentences, --max-sentence-chars, --max-sentence-bytes, --max-beam and "
                              "--max-output-tokens must be at least 1")
        if min(self.max_constraints, self.max_constraint_bytes, self.max_request_constraints,
               self.max_request_constraint_bytes) < 0:
            raise NmtkitError("--max-constraints, --max-constraint-bytes, --max-request-constraints and "
                              "--max-request-constraint-bytes must be at least 0")
        if not 0 <= self.max_alpha < math.inf:
            raise NmtkitError("--max-alpha must be a number of at least 0")


class BadRequest(Exception):
    """A client error: answered with `status` and a JSON {"error": message}."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def within(value: float, limit: float, what: str, flag: str, status: int = 400) -> None:
    if value > limit:
        raise BadRequest(f"{what}: this service allows at most {limit} (--{flag})", status)


def finite_number(text: str) -> float:
    """A JSON number with a fraction or an exponent, as json.loads reads it, refused where float has no room for
    it (1e999 would be Infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise BadRequest(f"the number {text[:40]} is out of range")
    return value


def no_constant(name: str) -> float:
    raise BadRequest(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


class BodyDecoder(json.JSONDecoder):
    """`json.loads` for a request body that reads objects and arrays in Python (`json.scanner.py_make_scanner`;
    strings and numbers are still read in C), counting the values as it goes: the C reader reads a whole body in
    one call that holds the GIL, up to half a second for 4 MB of empty arrays, and so stalls the event loop from any
    thread. Refuses (BadRequest) a value beyond `max_values` before reading it, a container nested beyond MAX_DEPTH,
    and numbers JSON lacks."""

    def __init__(self, max_values: int):
        super().__init__(parse_float=finite_number, parse_constant=no_constant)
        self.values_left, self.depth = max_values, 0
        self.parse_object, self.parse_array = self.read_object, self.read_array
        self.scan_once = json.scanner.py_make_scanner(self)

    def read_object(self, s_and_end, strict, scan_once, *hooks):
        with self.nested():
            return json.decoder.JSONObject(s_and_end, strict, self.counted(scan_once), *hooks)

    def read_array(self, s_and_end, scan_once):
        with self.nested():
            return json.decoder.JSONArray(s_and_end, self.counted(scan_once))

    @contextmanager
    def nested(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise BadRequest(f"the body nests objects and arrays more than {MAX_DEPTH} deep, as no request does")
        try:
            yield
        finally:
            self.depth -= 1

    def counted(self, scan_once):
        def scan(string: str, index: int):
            self.values_left -= 1
            if self.values_left < 0:
                raise BadRequest("the body holds more JSON values than any request within this service's limits "
                                 "(--max-sentences, --max-request-constraints)", 413)
            return scan_once(string, index)

        return scan


def max_values(limits: RequestLimits) -> int:
    """The most JSON values a request within `limits` holds: its fields, and for each sentence an object of its
    five keys' values, and its constraints and negative phrases."""
    return 1 + 2 + len(REQUEST_OPTIONS) + limits.max_sentences * (1 + 5) + limits.max_request_constraints


def parse_body(raw: bytes, limits: RequestLimits) -> object:
    """The JSON of a request body, or BadRequest; numbers are finite; no more values than a request within
    `limits` holds (`BodyDecoder`)."""
    try:
        return BodyDecoder(max_values(limits)).decode(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise BadRequest("the body is not UTF-8") from error
    except ValueError as error:  # json.JSONDecodeError, or an integer of more digits than Python reads
        raise BadRequest(f"the body is not valid JSON: {error}") from error


def check_option(name: str, value) -> None:
    kind = REQUEST_OPTIONS[name]
    valid = isinstance(value, str) if kind is str else (
        isinstance(value, (int, float)) and not isinstance(value, bool) and (kind is float or isinstance(value, int)))
    if not valid:
        expected = {str: "a string", int: "an integer", float: "a number"}[kind]
        raise BadRequest(f"field {name!r} must be {expected}, got {json.dumps(value)}")


def parse_sentence(index: int, sentence: object, limits: RequestLimits) -> Request:
    """A sentence of a request: a string, or an object with "text" and the keys of `translate --input-format jsonl`
    (constraints, negative, prefix, tgt_lang); its text within `limits`' characters and bytes (413)."""
    try:
        if isinstance(sentence, str):
            if "\n" in sentence or "\r" in sentence:
                raise ValueError("a sentence is one line: it may not contain a line break")
            request = Request(sentence)
        else:
            request = parse_record(sentence)
        within(len(request.text), limits.max_sentence_chars, f"sentence {index} has {len(request.text)} characters",
               "max-sentence-chars", 413)
        for text in (request.text, *request.constraints, *request.negative, request.prefix, request.tgt_lang):
            text.encode("utf-8")  # JSON may escape half of a UTF-16 surrogate pair ("\ud800"): no character
    except ValueError as error:  # UnicodeEncodeError included
        raise BadRequest(f"sentence {index}: {error}") from error
    size = len(request.text.encode("utf-8"))
    within(size, limits.max_sentence_bytes, f"sentence {index} has {size} UTF-8 bytes", "max-sentence-bytes", 413)
    return request


def check_limits(options: dict, limits: RequestLimits) -> None:
    """BadRequest, naming the limit, for a search option beyond what this service allows."""
    bounds = {"beam": (limits.max_beam, "max-beam"), "nbest": (limits.max_beam, "max-beam"),
              "mbr": (limits.max_beam, "max-beam"),
              "min_len": (limits.max_output_tokens, "max-output-tokens"),
              "max_len_a": (limits.max_output_tokens, "max-output-tokens"),
              "max_len_b": (limits.max_output_tokens, "max-output-tokens"), "alpha": (limits.max_alpha, "max-alpha")}
    for name, (limit, flag) in bounds.items():
        if name in options:
            shown = str(options[name])
            within(abs(options[name]), limit, f"{name} is {shown if len(shown) <= 40 else shown[:37] + '...'}", flag)


def check_constraints(sentences: list[Request], limits: RequestLimits) -> None:
    """BadRequest, naming the limit, for too many or too long constraints and prefixes in a sentence or in the
    request (a constrained search's memory grows with sentences x beam x constraints squared)."""
    counts = [len(sentence.constraints) + len(sentence.negative) for sentence in sentences]
    sizes = [sum(len(text.encode())
                 for text in (*sentence.constraints, *sentence.negative, sentence.prefix)) for sentence in sentences]
    for index, (count, size) in enumerate(zip(counts, sizes)):
        within(count, limits.max_constraints, f"sentence {index} has {count} constraints and negative phrases",
               "max-constraints")
        within(size, limits.max_constraint_bytes, f"sentence {index} has {size} bytes of constraints, negative "
               "phrases and prefix", "max-constraint-bytes")
    within(sum(counts), limits.max_request_constraints,
           f"the request has {sum(counts)} constraints and negative phrases", "max-request-constraints")
    within(sum(sizes), limits.max_request_constraint_bytes,
           f"the request has {sum(sizes)} bytes of constraints, negative phrases and prefixes",
           "max-request-constraint-bytes")


def check_output_lengths(lengths: list[int], max_len_a: float, max_len_b: int, max_source: int,
                         limits: RequestLimits) -> None:
    """BadRequest, naming the limit, for a sentence of `lengths` source subwords whose output length limit
    (`length_limits`, its EOS counted in the source, at most `max_source`) is above `max_output_tokens`."""
    outputs = length_limits([length + 1 for length in lengths], max_len_a, max_len_b, max_source)
    for index, (length, output) in enumerate(zip(lengths, outputs)):
        within(output, limits.max_output_tokens, f"sentence {index} may get {output} output subwords (max_len_a "
               f"{max_len_a:g} x {length + 1} source subwords + max_len_b {max_len_b})", "max-output-tokens")


def parse_request(body: object, limits: RequestLimits) -> tuple[list[Request], dict, bool]:
    """(sentences, search options, whether to return scores) of a /translate body, or BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object such as {"sentences": ["..."]}')
    unknown = sorted(set(body) - {"sentences", "scores", *REQUEST_OPTIONS})
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; known: sentences, scores, {', '.join(REQUEST_OPTIONS)}")
    if "sentences" not in body:
        raise BadRequest('missing field "sentences" (a list of strings)')
    sentences = body["sentences"]
    if not isinstance(sentences, list):
        raise BadRequest('field "sentences" must be a list of strings (or objects with "text")')
    if len(sentences) > limits.max_sentences:
        raise BadRequest(f"{len(sentences)} sentences in one request; at most {limits.max_sentences}", 413)
    sentences = [parse_sentence(index, sentence, limits) for index, sentence in enumerate(sentences)]
    check_constraints(sentences, limits)
    scores = body.get("scores", False)
    if not isinstance(scores, bool):
        raise BadRequest(f'field "scores" must be true or false, got {json.dumps(scores)}')
    options = {name: value for name, value in body.items() if name in REQUEST_OPTIONS}
    for name, value in options.items():
        check_option(name, value)
    check_limits(options, limits)
    if "confidence" in options:
        if len(options["confidence"]) > MAX_CONFIDENCE_CHARS:
            raise BadRequest(f"field 'confidence' has {len(options['confidence'])} characters; it names estimators, "
                             f"in at most {MAX_CONFIDENCE_CHARS}")
        try:
            parse_estimators(options["confidence"])
        except NmtkitError as error:
            raise BadRequest(str(error).replace("--confidence", "field 'confidence'")) from error
    return sentences, options, scores
