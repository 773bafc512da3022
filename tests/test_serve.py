"""nmtkit serve: a real server process on a free loopback port, concurrent clients, every 4xx, and SIGTERM.

Every answer is compared with `nmtkit translate` on the same lines (each line translates alone as in a batch, so
what the server batched together must not matter). The model is a tiny Transformer trained in seconds.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import TestClient, TestServer
from letter_task import letter_lines, letter_task, train_tiny
from serve_process import Server
from typer.testing import CliRunner

from nmtkit.cli import app
from nmtkit.config.sections import DecodeConfig
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.export.command import export_model
from nmtkit.serve.app import BadRequest, ServeConfig, Service, make_app
from nmtkit.serve.requests import parse_request
from nmtkit.translate.engine import Capabilities
from nmtkit.translate.masking import PlaceholderCounts


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, float32 export) of a tiny model trained on the letter task."""
    root = tmp_path_factory.mktemp("serve")
    checkpoint = train_tiny(letter_task(root, joint=True), root / "run", steps=150)
    export_model(checkpoint, root / "ct2")
    return checkpoint, root / "ct2"


@pytest.fixture(scope="module")
def server(models):
    # two CTranslate2 workers of one thread each, and batches of a few subwords: gathered requests are searched
    # several batches at a time (--inter-threads), and still answered as `nmtkit translate --threads 1` answers
    running = Server(models[1], "--device", "cpu", "--max-sentences", "8", "--max-tokens", "12",
                     "--batch-wait-ms", "20", "--inter-threads", "2", "--set", "decode.batch_tokens=10")
    yield running
    if running.process.poll() is None:
        running.stop()


def cli_translations(model: Path, lines: list[str], *options: str) -> list[str]:
    result = CliRunner().invoke(app, ["--quiet", "translate", "-m", str(model), "--threads", "1", "--device", "cpu",
                                      *options],
                                input="".join(line + "\n" for line in lines))
    assert result.exit_code == 0, result.stderr
    return result.stdout.split("\n")[:-1]


def test_concurrent_requests_are_batched_and_answered_as_translate_does(server, models):
    pool = letter_lines(40, seed=20, longest=9) + [""]
    expected = {beam: dict(zip(pool, cli_translations(models[1], pool, "--beam", str(beam)))) for beam in (5, 2)}
    started = time.monotonic()

    def client(number: int) -> list[tuple[list[str], int, int, dict]]:
        answers = []
        for request in range(5):
            sentences = [pool[(number * 7 + request * 3 + k) % len(pool)] for k in range(1 + (number + request) % 6)]
            beam = 2 if number % 2 else 5
            status, body = server.post({"sentences": sentences, **({"beam": 2} if beam == 2 else {})})
            answers.append((sentences, beam, status, body))
        return answers

    with ThreadPoolExecutor(8) as threads:
        answers = [answer for client_answers in threads.map(client, range(8)) for answer in client_answers]
    assert time.monotonic() - started < 60
    assert len(answers) == 40
    for sentences, beam, status, body in answers:
        assert status == 200, body
        assert body == {"translations": [expected[beam][sentence] for sentence in sentences]}
    health = server.health()
    assert health["status"] == "ok" and health["backend"] == "ctranslate2"
    assert health["requests"] >= 40 and health["translation_calls"] < health["requests"]  # gathered


def test_nbest_and_scores_in_an_answer(server, models):
    status, body = server.post({"sentences": ["a b c", ""], "beam": 3, "nbest": 2, "scores": True})
    assert status == 200
    assert body["translations"] == cli_translations(models[1], ["a b c", ""], "--beam", "3")
    assert [len(hyps) for hyps in body["nbest"]] == [2, 1] and body["nbest"][1] == [{"translation": "", "score": 0}]
    assert body["scores"][0] == body["nbest"][0][0]["score"] <= 0 and body["scores"][1] == 0


def test_mbr_in_a_request_answers_as_translate_does(server, models):
    lines = ["a b c", "", "d e f g"]
    status, body = server.post({"sentences": lines, "mbr": 4, "mbr_candidates": "beam", "mbr_utility": "chrf"})
    assert status == 200
    assert body["translations"] == cli_translations(models[1], lines, "--mbr", "4", "--mbr-candidates", "beam")


def test_confidence_in_an_answer_is_translates(server, models):
    lines = ["a b c", "", "d e f g"]
    status, body = server.post({"sentences": lines, "confidence": "mean,min", "scores": True})
    assert status == 200
    rows = cli_translations(models[1], lines, "--confidence", "mean,min")
    assert body["translations"] == [row.split(" ||| ")[0] for row in rows]
    for values, row in zip(body["confidence"], rows):
        assert list(values) == ["mean", "min"]
        assert f"mean={values['mean']:.4f} min={values['min']:.4f}" == row.split(" ||| ")[1]
    assert body["confidence"][1] == {"mean": 0.0, "min": 0.0}


@pytest.mark.parametrize(("body", "status", "message"), [
    (b"{not json", 400, "not valid JSON"),
    (b"\xff\xfe", 400, "not UTF-8"),
    (b"[1, 2]", 400, "JSON object"),
    (b"{}", 400, 'missing field "sentences"'),
    ({"sentences": "a b"}, 400, "list of strings"),
    ({"sentences": ["a", 3]}, 400, "sentence 1: expected a JSON object"),
    ({"sentences": [{"txt": "a"}]}, 400, 'sentence 0: unknown key "txt"'),
    ({"sentences": [{"text": "a", "constraints": [""]}]}, 400, "sentence 0: \"constraints\"[0] is empty"),
    ({"sentences": [{"text": "a", "constraints": ["B"]}]}, 400, "CTranslate2 has no constrained search"),
    ({"sentences": ["a"], "tgt_lang": "de"}, 400, "translates into"),
    ({"sentences": ["a"], "beam": "5"}, 400, "'beam' must be an integer"),
    ({"sentences": ["a"], "beam": True}, 400, "'beam' must be an integer"),
    ({"sentences": ["a"], "alpha": "high"}, 400, "'alpha' must be a number"),
    ({"sentences": ["a"], "scores": 1}, 400, '"scores" must be true or false'),
    ({"sentences": ["a"], "beem": 5}, 400, "unknown field 'beem'"),
    ({"sentences": ["a\nb"]}, 400, "line break"),
    ({"sentences": ["a"], "beam": 2, "nbest": 3}, 400, "--nbest 3 needs a beam of at least 3"),
    ({"sentences": ["a"], "beam": 4, "length_penalty": "gnmt"}, 400, "gnmt"),
    ({"sentences": ["a"], "beam": 17}, 400, "beam is 17: this service allows at most 16 (--max-beam)"),
    ({"sentences": ["a"], "mbr": 1}, 400, "--mbr N chooses among N candidates"),
    ({"sentences": ["a"], "mbr": 4, "mbr_utility": "comet"}, 400, "mbr_utility"),
    ({"sentences": ["a"], "mbr": "4"}, 400, "'mbr' must be an integer"),
    ({"sentences": ["a"], "confidence": "median"}, 400, "field 'confidence': unknown estimator 'median'"),
    ({"sentences": ["a"], "confidence": ["mean"]}, 400, "'confidence' must be a string"),
    ({"sentences": ["a"] * 9}, 413, "9 sentences in one request; at most 8"),
    ({"sentences": ["a", " ".join("abcdefgh" * 2)]}, 413, "sentence 1 has 16 subwords; at most 12"),
    pytest.param(b'{"sentences": ["' + b"a" * (5 << 20) + b'"]}', 413, "larger than 4194304 bytes", id="5MiB-body"),
])
def test_bad_requests_get_a_json_error_and_the_service_goes_on(server, body, status, message):
    answer = server.post(body)
    assert answer[0] == status and message in answer[1]["error"], answer
    assert server.post({"sentences": ["a"]})[0] == 200


def test_unknown_paths_and_methods_are_json_errors(server):
    assert server.post({"sentences": ["a"]}, "/translations") == (404, {"error": "Not Found"})
    assert server.post(b"", "/translate", "GET") == (405, {"error": "Method Not Allowed"})


def test_sigterm_answers_the_requests_in_flight_and_exits_zero(models):
    checkpoint = models[0]
    running = Server(checkpoint, "--device", "cpu", "--beam", "5")
    assert running.health()["backend"] == "pytorch"
    lines = letter_lines(512, seed=21, longest=30)  # longer than trained on: a second or so at beam 16
    expected = cli_translations(checkpoint, lines, "--beam", "16")
    with ThreadPoolExecutor(2) as threads:
        heavy = [threads.submit(running.post, {"sentences": lines[:256], "beam": 16}),
                 threads.submit(running.post, {"sentences": lines[256:], "beam": 16})]
        deadline = time.monotonic() + 30
        while running.health()["pending"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert running.health()["requests"] == 0  # both received, none answered yet
        assert running.stop() == 0
        answers = [future.result() for future in heavy]
    assert answers == [(200, {"translations": expected[:256]}), (200, {"translations": expected[256:]})]
    log = "".join(running.log)
    assert "stopping" in log and "Traceback" not in log
    with pytest.raises(urllib.error.URLError):
        running.post({"sentences": ["a"]})


def test_parse_request_and_limits():
    config = ServeConfig(max_sentences=2)
    assert parse_request({"sentences": ["a", ""], "beam": 3, "alpha": 1}, config) == \
        ([Request("a"), Request("")], {"beam": 3, "alpha": 1}, False)
    assert parse_request({"sentences": [{"text": "a", "constraints": ["B"], "prefix": "C"}]}, config)[0] == \
        [Request("a", ("B",), (), "C")]
    with pytest.raises(BadRequest) as error:
        parse_request({"sentences": ["a", "b", "c"]}, config)
    assert error.value.status == 413
    with pytest.raises(NmtkitError, match="--port 70000"):
        ServeConfig(port=70000)


def test_a_taken_port_is_a_one_line_error(server, models):
    port = server.url.rsplit(":", 1)[1]
    result = CliRunner().invoke(app, ["--quiet", "serve", "-m", str(models[1]), "--port", port])
    assert result.exit_code == 1
    assert re.fullmatch(rf"error: cannot listen on 127\.0\.0\.1:{port}: .+\n", result.stderr), result.stderr


class EchoTranslator:
    """Stands in for a Translator in the service's own tests: upper-cases lines, fails on "boom", records calls."""

    max_source = 50
    capabilities = Capabilities(constraints=True)
    placeholder_counts = PlaceholderCounts()
    engine = SimpleNamespace(name="Echo")

    def __init__(self, options: dict | None = None, calls: list | None = None):
        self.options, self.calls = options or {}, [] if calls is None else calls
        self.decode = DecodeConfig(**{"beam": 1, **self.options})

    def with_decode(self, **options) -> EchoTranslator:
        return EchoTranslator(options, self.calls)

    def with_step_check(self, check) -> EchoTranslator:
        return self

    def encode(self, requests: list[Request], where: str, first: int, masked: list | None = None) -> list[list[str]]:
        return [request.text.split() for request in requests]

    def mask(self, requests: list[Request]) -> list[str]:
        return [f"masked {request.text}" for request in requests]

    def translate_requests(self, requests: list[Request], first_line: int = 1, sources: list | None = None,
                           masked: list | None = None) -> list[list[tuple[str, float]]]:
        lines = [request.text for request in requests]
        assert masked == [f"masked {line}" for line in lines]  # masked once, when the request was prepared
        self.calls.append((self.options, lines))
        if "boom" in lines:
            raise RuntimeError("the model failed")
        return [[(line.upper(), -1.0)] for line in lines]


def run_service(config: ServeConfig, scenario) -> EchoTranslator:
    """Run `scenario(client, service)` against the service in-process (aiohttp's test server on loopback)."""
    translator = EchoTranslator()

    async def main():
        service = Service(translator, config)
        async with TestClient(TestServer(make_app(service))) as client:
            await scenario(client, service)

    asyncio.run(main())
    return translator


async def post(client, body: dict) -> tuple[int, dict]:
    response = await client.post("/translate", json=body)
    return response.status, await response.json()


def test_gathered_requests_get_their_own_sentences_back_in_order():
    requests = [[f"s{index} w{k}" for k in range(index % 3 + 1)] for index in range(6)]

    async def scenario(client, service):
        answers = await asyncio.gather(*(post(client, {"sentences": sentences}) for sentences in requests))
        assert answers == [(200, {"translations": [line.upper() for line in sentences]}) for sentences in requests]

    calls = run_service(ServeConfig(batch_wait_ms=100), scenario).calls
    assert len(calls) < len(requests)  # gathered
    assert sorted(line for _, lines in calls for line in lines) == sorted(line for lines in requests for line in lines)


def test_the_token_budget_and_the_search_options_split_the_calls():
    async def scenario(client, service):
        bodies = [{"sentences": ["a b"]}, {"sentences": ["c d"]}, {"sentences": ["e f"], "beam": 2},
                  {"sentences": ["g h i j k l"]}]
        answers = await asyncio.gather(*(post(client, body) for body in bodies))
        assert [status for status, _ in answers] == [200] * 4

    calls = run_service(ServeConfig(batch_wait_ms=100, batch_tokens=4), scenario).calls
    assert all(sum(len(line.split()) for line in lines) <= 4 or len(lines) == 1 for _, lines in calls)
    assert ({"beam": 2}, ["e f"]) in calls  # other options, another call
    assert all("e f" not in lines for options, lines in calls if options != {"beam": 2})


def test_a_failed_translation_is_a_500_and_the_service_goes_on():
    async def scenario(client, service):
        assert await post(client, {"sentences": ["boom"]}) == (500, {"error": "internal error (see the server log)"})
        assert await post(client, {"sentences": ["fine"]}) == (200, {"translations": ["FINE"]})
        service.stopping = True
        assert await post(client, {"sentences": ["late"]}) == (503, {"error": "the service is stopping"})
        health = await (await client.get("/health")).json()
        assert health["status"] == "stopping" and health["requests"] == 1  # translated

    run_service(ServeConfig(batch_wait_ms=1), scenario)



def test_a_checkpoint_serves_constraints_prefixes_as_translate_does(models):
    sentences = [{"text": "a b c", "constraints": ["H"]}, "d e", {"text": "f g", "prefix": "F A"},
                 {"text": "b", "negative": ["B"]}, {"text": ""}]
    jsonl = [json.dumps(sentence if isinstance(sentence, dict) else {"text": sentence}) for sentence in sentences]
    expected = cli_translations(models[0], jsonl, "--beam", "3", "--input-format", "jsonl")
    running = Server(models[0], "--device", "cpu", "--threads", "1")
    try:
        status, body = running.post({"sentences": sentences, "beam": 3})
    finally:
        running.stop()
    assert status == 200 and body["translations"] == expected, body
    assert "H" in body["translations"][0].split() and body["translations"][2].startswith("F A")
