"""nmtkit serve's limits, in-process: every request option and the constraints have a limit that a 400 names, numbers
are finite on the way in and out, a body holds no more JSON than a request may and a sentence no more characters or
bytes than the caps (refused before any work), a translation over the time budget is stopped between its steps and a
request's preparation between its sentences, and the search's step check (`check`) is called once per decoding step
and stops it by raising."""

from __future__ import annotations

import asyncio
import json
import math
import time
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from scaling import assert_linear

from nmtkit.config.sections import DecodeConfig
from nmtkit.decoding.inputs import Request
from nmtkit.decoding.search import beam_search, greedy_search
from nmtkit.errors import NmtkitError
from nmtkit.serve.app import ServeConfig, Service, answer, make_app
from nmtkit.serve.requests import MAX_DEPTH, BadRequest, RequestLimits, max_values, parse_body, parse_request
from nmtkit.translate import Translator
from nmtkit.translate.ctranslate2_engine import CTranslate2Engine
from nmtkit.translate.engine import Capabilities
from nmtkit.translate.masking import PlaceholderCounts


class StepTranslator:
    """Stands in for a Translator: each line takes `steps` decoding steps of `step_seconds` (the first word of a
    line says how many steps, default 1), calling the step check before each, as the real search does; a line
    "nan" gets a NaN score; a line "slow" takes `step_seconds` to encode. `encoded` keeps the lines encoded."""

    max_source = 50
    capabilities = Capabilities(constraints=True)
    placeholder_counts = PlaceholderCounts()

    def __init__(self, options: dict | None = None, step_check=None, step_seconds: float = 0.01):
        self.options, self.step_check, self.step_seconds = options or {}, step_check, step_seconds
        self.decode = DecodeConfig(**{"beam": 1, **self.options})
        self.steps_taken, self.encoded = [], []  # shared by the variants

    def with_decode(self, **options) -> StepTranslator:
        variant = StepTranslator(options, self.step_check, self.step_seconds)
        variant.steps_taken, variant.encoded = self.steps_taken, self.encoded
        return variant

    def with_step_check(self, check) -> StepTranslator:
        variant = self.with_decode(**self.options)
        variant.step_check = check
        return variant

    def encode(self, requests: list[Request], where: str, first: int, masked: list | None = None) -> list[list[str]]:
        for request in requests:
            self.encoded.append(request.text)
            if request.text == "slow":
                time.sleep(self.step_seconds)
        return [request.text.split() for request in requests]

    def mask(self, requests: list[Request]) -> list[None]:
        return [None] * len(requests)

    def translate_requests(self, requests: list[Request], first_line: int = 1, sources: list | None = None,
                           masked: list | None = None) -> list[list[tuple[str, float]]]:
        steps = max(int(words[0]) if (words := request.text.split()) and words[0].isdigit() else 1
                    for request in requests)
        for _ in range(steps):
            self.step_check()
            self.steps_taken.append(time.monotonic())
            time.sleep(self.step_seconds)
        return [[(request.text.upper(), math.nan if request.text == "nan" else -1.0)] for request in requests]


def run_service(config: ServeConfig, scenario, translator: StepTranslator | None = None) -> StepTranslator:
    translator = translator or StepTranslator()

    async def main():
        async with TestClient(TestServer(make_app(Service(translator, config)))) as client:
            await scenario(client)

    asyncio.run(main())
    return translator


async def post(client, body: dict | bytes) -> tuple[int, dict]:
    response = await (client.post("/translate", data=body) if isinstance(body, bytes) else
                      client.post("/translate", json=body))
    return response.status, await response.json()


@pytest.mark.parametrize(("body", "message"), [
    (b'{"sentences": ["a"], "alpha": NaN}', "NaN is not a JSON number"),
    (b'{"sentences": ["a"], "max_len_a": Infinity}', "Infinity is not a JSON number"),
    (b'{"sentences": ["a"], "alpha": -Infinity}', "-Infinity is not a JSON number"),
    (b'{"sentences": ["a"], "max_len_a": 1e999}', "the number 1e999 is out of range"),
    (b'{"sentences": ["a"], "max_len_b": ' + b"9" * 5000 + b"}", "not valid JSON"),
])
def test_numbers_json_lacks_are_refused_as_they_are_read(body, message):
    with pytest.raises(BadRequest, match=message) as error:
        parse_body(body, RequestLimits())
    assert error.value.status == 400


def test_confidence_names_are_capped_before_they_are_split():
    with pytest.raises(BadRequest, match="field 'confidence' has 400000 characters; it names estimators, in at most"):
        parse_request({"sentences": ["a"], "confidence": "mean," * 80000}, RequestLimits())
    assert parse_request({"sentences": ["a"], "confidence": "mean,min,q10,prob"}, RequestLimits())[1] == \
        {"confidence": "mean,min,q10,prob"}


@pytest.mark.parametrize(("options", "message"), [
    ({"min_len": 100000, "max_len_a": 100000}, "min_len is 100000: this service allows at most 512 "
                                               "(--max-output-tokens)"),
    ({"max_len_a": 1e39}, "max_len_a is 1e+39: this service allows at most 512 (--max-output-tokens)"),
    ({"max_len_b": -10**40}, "max_len_b is -100000000000000000000000000000000000...: this service allows at most "
                             "512 (--max-output-tokens)"),
    ({"alpha": 1e300}, "alpha is 1e+300: this service allows at most 10.0 (--max-alpha)"),
    ({"beam": 16, "nbest": 17}, "nbest is 17: this service allows at most 16 (--max-beam)"),
    ({"mbr": 17}, "mbr is 17: this service allows at most 16 (--max-beam)"),
])
def test_every_number_option_has_a_limit_that_the_error_names(options, message):
    with pytest.raises(BadRequest) as error:
        parse_request({"sentences": ["a"], **options}, RequestLimits())
    assert str(error.value) == message and error.value.status == 400


@pytest.mark.parametrize("body", [b'{"sentences": ["a \\ud800 b"]}',
                                  b'{"sentences": [{"text": "a", "prefix": "\\udfff"}]}'])
def test_half_a_surrogate_pair_is_refused_as_no_character(body):
    with pytest.raises(BadRequest, match="sentence 0: .*surrogates not allowed"):
        parse_request(parse_body(body, RequestLimits()), RequestLimits())
    whole_pair = parse_body(b'{"sentences": ["\\ud83d\\ude00"]}', RequestLimits())
    assert parse_request(whole_pair, RequestLimits())[0] == [Request("\U0001f600")]


def sentence(constraints: int = 0, size: int = 1, prefix: str = "") -> dict:
    return {"text": "a", "constraints": ["x" * size] * constraints, "prefix": prefix}


@pytest.mark.parametrize(("sentences", "flag"), [
    ([sentence(constraints=3)], "--max-constraints"),
    ([sentence(constraints=1, size=8)], "--max-constraint-bytes"),
    ([sentence(prefix="é" * 4)], "--max-constraint-bytes"),  # bytes, not characters
    ([sentence(constraints=2)] * 3, "--max-request-constraints"),
    ([sentence(constraints=1, size=4), sentence(prefix="abcd"), sentence(constraints=2, size=2)],
     "--max-request-constraint-bytes"),
])
def test_constraints_and_prefixes_are_limited_per_sentence_and_per_request(sentences, flag):
    limits = RequestLimits(max_constraints=2, max_constraint_bytes=6, max_request_constraints=5,
                           max_request_constraint_bytes=10)
    assert parse_request({"sentences": [sentence(constraints=2, size=3), sentence(constraints=2, size=2)]}, limits)
    with pytest.raises(BadRequest, match=f"this service allows at most .*{flag}"):
        parse_request({"sentences": sentences}, limits)


def test_a_limit_below_its_floor_is_a_config_error():
    with pytest.raises(NmtkitError, match="--max-output-tokens"):
        ServeConfig(max_output_tokens=0)
    with pytest.raises(NmtkitError, match="--time-budget"):
        ServeConfig(time_budget=math.inf)


def test_each_sentences_output_limit_is_checked_with_the_servers_own_settings():
    async def scenario(client):
        # 4 words + EOS: 1.5 * 5 + 10 = 17 output subwords at most, within 17; 5 words: 19
        assert await post(client, {"sentences": ["a b c d"]}) == (200, {"translations": ["A B C D"]})
        status, body = await post(client, {"sentences": ["a", "a b c d e"]})
        assert status == 400 and body["error"] == ("sentence 1 may get 19 output subwords (max_len_a 1.5 x 6 source "
                                                   "subwords + max_len_b 10): this service allows at most 17 "
                                                   "(--max-output-tokens)")
        assert (await post(client, {"sentences": ["a b c d e"], "max_len_a": 1.0}))[0] == 200

    run_service(ServeConfig(max_output_tokens=17, batch_wait_ms=1), scenario)


def test_a_non_finite_score_is_a_json_500_not_an_invalid_answer():
    async def scenario(client):
        response = await client.post("/translate", json={"sentences": ["nan"], "scores": True})
        assert response.status == 500 and await response.json() == {"error": "internal error (see the server log)"}
        assert await post(client, {"sentences": ["fine"], "scores": True}) == (200, {"translations": ["FINE"],
                                                                                     "scores": [-1.0]})

    run_service(ServeConfig(batch_wait_ms=1), scenario)


def test_a_translation_over_the_time_budget_is_stopped_and_the_worker_serves_the_next():
    budget = 0.3

    async def scenario(client):
        started = time.monotonic()
        status, body = await post(client, {"sentences": ["1000 steps"]})
        stopped_after = time.monotonic() - started
        assert status == 503 and "time budget (0.3 s, --time-budget)" in body["error"]
        assert budget <= stopped_after < budget + 1.0
        started = time.monotonic()
        assert await post(client, {"sentences": ["2 steps"]}) == (200, {"translations": ["2 STEPS"]})
        assert time.monotonic() - started < budget

    translator = run_service(ServeConfig(time_budget=budget, batch_wait_ms=1), scenario)
    steps = translator.steps_taken
    assert 2 < len(steps) - 2 < 1000 and steps[-3] - steps[0] < budget + 0.05  # it stopped within a step or so


@pytest.mark.parametrize("beam", [1, 3])
def test_the_search_calls_its_check_before_each_step_and_a_raise_stops_it(tiny_transformer, source_batch, beam):
    _, src, src_mask = source_batch
    max_len = torch_lengths(src, 7)
    calls = []

    def search(check):
        if beam == 1:
            return greedy_search(tiny_transformer, src, src_mask, max_len, min_len=7, check=check)
        return beam_search(tiny_transformer, src, src_mask, max_len, beam, min_len=7, check=check)

    found = search(lambda: calls.append(1))
    assert len(calls) == 7  # min_len 7 = the length limit: every sentence runs 7 steps
    assert all(len(hyp.tokens) == 6 for hyps in found for hyp in (hyps if beam > 1 else [hyps]))

    class Stop(Exception):
        pass

    def stop_at_third():
        calls.append(1)
        if len(calls) == 3:
            raise Stop

    calls.clear()
    with pytest.raises(Stop):
        search(stop_at_third)
    assert len(calls) == 3


def torch_lengths(src, length: int):
    import torch

    return torch.full((src.size(0),), length, dtype=torch.long)



def test_a_ctranslate2_engine_checks_before_each_call():
    """A CTranslate2 call cannot be interrupted: the check comes before each batch's call."""
    engine = CTranslate2Engine.__new__(CTranslate2Engine)  # no model: its search of a group is a stand-in
    engine.decode, engine.options, engine.max_source = DecodeConfig(beam=1, min_len=1), {"beam_size": 1}, 50
    engine_calls = []
    engine._search_group = lambda sources, limit: engine_calls.append(sources) or [[] for _ in sources]
    budget_left = [1]

    def check():
        if not budget_left[0]:
            raise TimeoutError
        budget_left[0] -= 1

    assert engine.search([[5, 6]], None, check) == [[]] and engine_calls == [[[5, 6]]]
    with pytest.raises(TimeoutError):
        engine.search([[7]], None, check)
    assert engine_calls == [[[5, 6]]]


def test_the_translator_hands_its_step_check_to_its_engine():
    seen = []
    engine = SimpleNamespace(decode=DecodeConfig(), loaded=SimpleNamespace(tags={}, placeholders=None),
                             search=lambda sources, constraints, check: seen.append(check) or [[]] * len(sources))
    translator = Translator(engine)

    def check():
        pass

    checked = translator.with_step_check(check)
    assert checked.search([[5]]) == [[]] and translator.search([[5]]) == [[]]
    assert seen == [check, None] and translator.step_check is None  # with_step_check made a copy


def test_a_sentence_over_the_character_or_byte_cap_is_refused_before_any_work():
    async def scenario(client):
        assert await post(client, {"sentences": ["a" * 10, "é" * 6]}) == (200, {"translations": ["A" * 10, "É" * 6]})
        status, body = await post(client, {"sentences": ["a", "a" * 11]})
        assert (status, body["error"]) == (413, "sentence 1 has 11 characters: this service allows at most 10 "
                                                 "(--max-sentence-chars)")
        status, body = await post(client, {"sentences": [{"text": "é" * 7}]})  # 7 characters, 14 bytes
        assert (status, body["error"]) == (413, "sentence 0 has 14 UTF-8 bytes: this service allows at most 12 "
                                                 "(--max-sentence-bytes)")
        status, body = await post(client, {"sentences": ["a"] * 3 + ["%" + "0" * (1 << 20)]})
        assert status == 413 and "--max-sentence-chars" in body["error"]

    translator = run_service(ServeConfig(max_sentence_chars=10, max_sentence_bytes=12, batch_wait_ms=1), scenario)
    assert translator.encoded == ["a" * 10, "é" * 6]  # the refused requests were not encoded, not even in part
    with pytest.raises(NmtkitError, match="--max-sentence-chars"):
        ServeConfig(max_sentence_chars=0)


def test_preparing_a_request_past_the_time_budget_is_a_503_between_its_sentences():
    budget = 0.3

    async def scenario(client):
        started = time.monotonic()
        status, body = await post(client, {"sentences": ["slow"] * 50})  # 50 x 0.1 s to encode
        assert status == 503 and "preparing the request ran past this service's time budget (0.3 s, " \
                                 "--time-budget)" in body["error"]
        assert budget <= time.monotonic() - started < budget + 1.0
        assert await post(client, {"sentences": ["fine"]}) == (200, {"translations": ["FINE"]})

    translator = run_service(ServeConfig(time_budget=budget, batch_wait_ms=1), scenario,
                             StepTranslator(step_seconds=0.1))
    assert 3 <= translator.encoded.count("slow") <= 5 and translator.steps_taken  # stopped within a sentence


def test_a_sentence_over_the_subword_limit_stops_the_encoding_there():
    async def scenario(client):
        status, body = await post(client, {"sentences": ["a b", "a b c d", "c"]})
        assert (status, body["error"]) == (413, "sentence 1 has 4 subwords; at most 3")

    assert run_service(ServeConfig(max_tokens=3), scenario).encoded == ["a b", "a b c d"]


def body_of(values: int, depth: int = 1) -> bytes:
    """A body whose "sentences" holds `values` strings, nested `depth` arrays deep."""
    return b'{"sentences": ' + b"[" * depth + b", ".join([b'"a"'] * values) + b"]" * depth + b"}"


def test_a_body_holds_no_more_json_values_and_nesting_than_a_request_may():
    limits = RequestLimits(max_sentences=4, max_request_constraints=2)
    most = max_values(limits)
    assert parse_body(body_of(most - 1), limits)  # the array counts too
    with pytest.raises(BadRequest, match="more JSON values than any request .*--max-sentences") as error:
        parse_body(body_of(most), limits)
    assert error.value.status == 413
    assert parse_body(body_of(1, MAX_DEPTH - 1), limits)
    for body in (body_of(1, MAX_DEPTH), b"[" * 100_000, b'{"a": ' * 100_000):
        with pytest.raises(BadRequest, match=f"nests objects and arrays more than {MAX_DEPTH} deep"):
            parse_body(body, limits)
    sentences = [{"text": "a", "constraints": ["b"], "negative": ["c"], "prefix": "d", "tgt_lang": "e"}] * 4
    full = {"sentences": sentences, "scores": True, **{name: 1 for name in ("beam", "nbest", "alpha", "min_len",
                                                                             "max_len_a", "max_len_b")},
            "length_penalty": "x", "tgt_lang": "y"}
    with pytest.raises(BadRequest, match="--max-request-constraints"):  # 8 phrases: parsed, refused by its rule
        parse_request(parse_body(json.dumps(full).encode(), limits), limits)


def depth(value) -> int:
    """How many objects and arrays deep `value` nests."""
    if isinstance(value, (list, dict)):
        return 1 + max(map(depth, value.values() if isinstance(value, dict) else value), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(), lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=40)


@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES, indent=st.sampled_from([None, 0, 2]))
def test_a_body_within_the_limits_reads_as_json_loads_reads_it(value, indent):
    raw = json.dumps({"sentences": [value]}, indent=indent).encode()
    if depth(value) + 2 <= MAX_DEPTH:
        assert parse_body(raw, RequestLimits()) == json.loads(raw)
    else:
        with pytest.raises(BadRequest, match="nests objects and arrays"):
            parse_body(raw, RequestLimits())



@pytest.mark.parametrize("family", [
    lambda n: b'{"sentences": ["' + b"a" * n + b'"]}',  # one huge line
    lambda n: b'{"sentences": ["' + b"\\u00e9" * n + b'"]}',  # escapes
    lambda n: b'{"sentences": [' + b" " * n + b'"a"]}',  # a long run of one character
    lambda n: b'{"beam": 1' + b"0" * n + b"}",  # a number of too many digits
    lambda n: b'{"sentences": [' + b", ".join([b'"a"'] * n) + b"]}",  # many values
    lambda n: b'{"sentences": [' + b", ".join([b'{"text": "a"}'] * n) + b"]}",  # many objects
])
def test_reading_a_body_takes_linear_time(family):
    def read(raw: bytes) -> None:
        try:
            parse_body(raw, RequestLimits(max_sentences=1 << 22))
        except BadRequest:
            pass

    assert_linear(read, family)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.lists(st.text(), min_size=1, max_size=3), max_size=5), nbest=st.integers(1, 3),
       scores=st.booleans(), score=st.floats(-1e6, 0))
def test_the_answer_is_written_as_json_dumps_writes_it(texts, nbest, scores, score):
    results = [[(text, score) for text in hyps] for hyps in texts]
    expected = {"translations": [hyps[0][0] for hyps in results]}
    if scores:
        expected["scores"] = [hyps[0][1] for hyps in results]
    if nbest > 1:
        expected["nbest"] = [[{"translation": text, "score": value} for text, value in hyps] for hyps in results]
    assert json.loads(answer(results, nbest, scores)) == expected
    with pytest.raises(ValueError):
        answer([[("a", math.nan)]], 1, True)


def test_the_body_cap_is_a_setting():
    async def scenario(client):
        assert (await post(client, {"sentences": ["a b"]}))[0] == 200
        status, body = await post(client, b'{"sentences": ["' + b"a" * 100 + b'"]}')
        assert (status, body["error"]) == (413, "the body is larger than 64 bytes (--max-body-bytes)")

    run_service(ServeConfig(max_body_bytes=64, batch_wait_ms=1), scenario)
    with pytest.raises(NmtkitError, match="--max-body-bytes must be at least 1"):
        ServeConfig(max_body_bytes=0)
