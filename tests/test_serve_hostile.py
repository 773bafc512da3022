"""nmtkit serve against a hostile client (issue 47): requests that ask for unbounded work or for numbers JSON lacks,
oversized and malformed bodies, clients that send slowly or hold connections, and a stop during a long translation,
while a well-behaved client keeps getting correct answers within a bound; and (issue 63) the most costly body to
prepare that the limits admit, in flight while /health and a small request answer within 100 ms, and a sentence
over the size cap refused at once. Loopback only; every socket and request has a timeout, and the whole test runs
in about 30 seconds.

The model of the first tests is an untrained Transformer of d_model 128: its translations never end before their
length limit, so 256 sentences at beam 16 take about a minute on one thread (far beyond the 2-second budget), one
short sentence milliseconds. The well-behaved client's answers are compared with the same checkpoint's in this
process.
"""

from __future__ import annotations

import json
import random
import socket
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from letter_task import letter_lines, letter_task, train_tiny
from serve_process import Server

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import train_subword
from nmtkit.export.command import export_model
from nmtkit.registry import build_model
from nmtkit.serve.config import ServeConfig
from nmtkit.serve.connections import LINGER_SECONDS
from nmtkit.symbols.placeholders import load_patterns, reserved_symbols
from nmtkit.translate import Translator

BUDGET = 2.0  # --time-budget
CLIENT_TIMEOUT = 2.0  # --client-timeout
MAX_CONNECTIONS = 24
MARGIN = 3.0  # seconds a loaded machine may add to a bound
GOOD = ["a b c", "d e"]
HEAVY = {"sentences": letter_lines(256, seed=5, longest=30), "beam": 16, "min_len": 55, "max_len_a": 2.0}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    return train_tiny(letter_task(root, joint=True), root / "run", steps=1, d_model=128, ffn=512)


def start(checkpoint: Path) -> Server:
    return Server(checkpoint, "--device", "cpu", "--batch-wait-ms", "1", "--time-budget", str(BUDGET),
                  "--client-timeout", str(CLIENT_TIMEOUT), "--max-connections", str(MAX_CONNECTIONS),
                  "--max-output-tokens", "64")


class WellBehaved(threading.Thread):
    """Asks for GOOD every 50 ms until stopped; keeps (seconds, status, body) of each answer."""

    def __init__(self, server: Server):
        super().__init__(daemon=True)
        self.server, self.answers, self.stop = server, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            status, body = self.server.post({"sentences": GOOD})
            self.answers.append((time.monotonic() - started, status, body))
            time.sleep(0.05)


def open_socket(server: Server, data: bytes) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=10)
    connection.sendall(data)
    return connection


def read_until_closed(connection: socket.socket, opened: float) -> tuple[float, bytes]:
    """(seconds from `opened` until the server closed the connection, what it sent)."""
    received = b""
    try:
        while chunk := connection.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        connection.close()
    return time.monotonic() - opened, received


SLOW_BODY = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
SLOW_HEADERS = b"POST /translate HTTP/1.1\r\nHost: x\r\n"

HOSTILE = [  # (body, status, what the error says)
    (b'{"sentences": ["a"], "alpha": NaN}', 400, "NaN is not a JSON number"),
    (b'{"sentences": ["a"], "max_len_a": Infinity}', 400, "Infinity is not a JSON number"),
    ({"sentences": ["a"], "max_len_a": 1e39}, 400, "--max-output-tokens"),
    ({"sentences": ["a b"] * 16, "beam": 16, "min_len": 100000, "max_len_a": 100000}, 400, "--max-output-tokens"),
    ({"sentences": [{"text": "a", "constraints": ["B"] * 100}]}, 400, "--max-constraints"),
    ({"sentences": ["a"], "alpha": 1e300, "length_penalty": "gnmt"}, 400, "--max-alpha"),
    (b'{"sentences": ["' + b"a " * (3 << 20) + b'"]}', 413, "larger than 4194304 bytes"),
    (b"{not json", 400, "not valid JSON"),
    (b"\xff\xfe", 400, "not UTF-8"),
    (b'{"sentences": ["a \\ud800"]}', 400, "surrogates not allowed"),
]


def test_a_hostile_client_cannot_stall_or_kill_the_service(checkpoint):
    expected = Translator.load(checkpoint, "cpu", 1).translate(GOOD)
    server = start(checkpoint)
    try:
        good = WellBehaved(server)
        good.start()
        opened = time.monotonic()
        slow = [open_socket(server, SLOW_BODY) for _ in range(8)] + [open_socket(server, SLOW_HEADERS)
                                                                     for _ in range(4)]
        for body, status, message in HOSTILE:
            answer = server.post(body)
            assert answer[0] == status and message in answer[1]["error"], answer
        started = time.monotonic()
        status, body = server.post(HEAVY)
        assert status == 503 and "time budget (2 s, --time-budget)" in body["error"], body
        assert BUDGET <= time.monotonic() - started < BUDGET + MARGIN
        with ThreadPoolExecutor(len(slow)) as threads:
            dropped = list(threads.map(read_until_closed, slow, [opened] * len(slow)))
        good.stop.set()
        good.join(timeout=30)
        assert all(seconds < CLIENT_TIMEOUT + LINGER_SECONDS + MARGIN for seconds, _ in dropped), dropped
        assert all(b" 408 " in received and b"--client-timeout" in received for _, received in dropped[:8])
        assert len(good.answers) >= 5 and all(answer[1:] == (200, {"translations": expected})
                                              for answer in good.answers), good.answers
        assert max(seconds for seconds, _, _ in good.answers) < BUDGET + MARGIN
        check_the_connection_cap(server)
        time.sleep(0.3)  # the connections dropped have closed
        assert server.post({"sentences": GOOD}) == (200, {"translations": expected})
    finally:
        if server.process.poll() is None:
            server.stop()
    assert "Traceback" not in "".join(server.log)


def check_the_connection_cap(server: Server) -> None:
    """A burst of connections that send nothing: MAX_CONNECTIONS are held (until the client timeout drops them), the
    others are refused at once with 503."""
    time.sleep(0.3)  # the connections of the requests before have closed
    opened = time.monotonic()
    burst = [open_socket(server, b"") for _ in range(MAX_CONNECTIONS + 8)]
    with ThreadPoolExecutor(len(burst)) as threads:
        ends = list(threads.map(read_until_closed, burst, [opened] * len(burst)))
    refused = [seconds for seconds, received in ends if received.startswith(b"HTTP/1.1 503 ")
               and b"too many open connections" in received]
    held = [seconds for seconds, received in ends if received == b""]
    assert len(refused) + len(held) == len(burst) and len(refused) >= 8 and len(held) <= MAX_CONNECTIONS, ends
    assert max(refused) < 1 and CLIENT_TIMEOUT <= min(held) and max(held) < CLIENT_TIMEOUT + MARGIN, ends


def test_sigterm_during_a_long_translation_stops_the_service_within_the_budget(checkpoint):
    server = start(checkpoint)
    with ThreadPoolExecutor(1) as threads:
        heavy = threads.submit(server.post, HEAVY)
        deadline = time.monotonic() + 30
        while server.health()["pending"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # the translation is under way
        signalled = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - signalled < BUDGET + MARGIN
        status, body = heavy.result(timeout=30)
    assert status == 503 and "--time-budget" in body["error"]
    log = "".join(server.log)
    assert "stopping" in log and "over the time budget" in log and "Traceback" not in log



CAP = ServeConfig().max_sentence_chars
# a line each of placeholder-hostile text at the cap: printf and Python directives that never end, tags by the
# thousand, a tag whose attributes never close (issue 63: masking each took seconds, on the event loop)
HOSTILE_LINES = ["%" + "0" * (CAP - 1), "%(a)" + "0" * (CAP - 4), "<b>" * (CAP // 3), "<a" + " b" * (CAP // 2 - 1)]
# the most sentences, each at the cap: every limit admits it until its subwords are known (max_len_a 1 asks for
# more than --max-output-tokens), so all its cost is preparation and it never holds the translation worker
WORST = json.dumps({"sentences": [HOSTILE_LINES[index % len(HOSTILE_LINES)]
                                  for index in range(ServeConfig().max_sentences)],
                    "max_len_a": 1.0, "max_len_b": 0}).encode()
SMALL_OPTIONS = {"beam": 1, "max_len_a": 0.0, "max_len_b": 4}
SMALL = {"sentences": ["a b"], **SMALL_OPTIONS}  # one short sentence, a few greedy steps
RESPONSIVE = 0.1  # seconds within which /health and a small request answer, whatever else is in flight


@pytest.fixture(scope="module")
def placeholder_server(tmp_path_factory):
    """A server of the CTranslate2 export of a random Transformer whose checkpoint was prepared with placeholders
    (`auto`), with positions enough for any sentence of WORST. CTranslate2 translates SMALL in one call that lets go
    of the interpreter lock: a PyTorch search takes it back at each of its operations, and waits for it each time
    while other threads run Python (tens of ms for SMALL while WORST is prepared: its own cost, not the loop's)."""
    root = tmp_path_factory.mktemp("placeholders")
    rng = random.Random(0)
    lines = [" ".join(rng.choices("open in the new window now files and here a b c d e".split(), k=6))
             for _ in range(60)] + ["%0123456789 (a) <b/> $&;{}"]  # characters to spell a placeholder with
    subword = train_subword(lines, DataConfig(subword="bpe", vocab_size=110), 110, user_symbols=reserved_symbols())
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 4 * CAP}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True)
    record = {"rule": "auto", "families": load_patterns("auto").as_dict()}
    save_atomic(make_payload(config, model, (subword, subword), placeholders=record), root / "model.pt")
    export_model(root / "model.pt", root / "ct2")
    server = Server(root / "ct2", "--device", "cpu", "--batch-wait-ms", "1", "--max-output-tokens", "64")
    server.expected = Translator.load(root / "ct2", "cpu", 1).with_decode(**SMALL_OPTIONS).translate(SMALL["sentences"])
    yield server
    if server.process.poll() is None:
        server.process.kill()  # a server whose event loop is stuck does not answer SIGTERM
        server.process.wait()
    assert "Traceback" not in "".join(server.log)


class Repeating(threading.Thread):
    """Calls `call` every `every` seconds until stopped; keeps (seconds it took, what it returned or raised)."""

    def __init__(self, call: Callable[[], object], every: float):
        super().__init__(daemon=True)
        self.call, self.every, self.answers, self.stop = call, every, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                answer = self.call()
            except OSError as error:  # a timeout: the server did not answer
                answer = error
            self.answers.append((time.monotonic() - started, answer))
            self.stop.wait(self.every)


def test_health_and_a_small_request_answer_within_100_ms_while_the_worst_body_is_prepared(placeholder_server):
    """A client sends WORST back to back (each takes a second or more to prepare) while /health is asked every
    20 ms and SMALL every 100 ms, for at least 3 s and 2 worst bodies; a stall ends it at once."""
    server = placeholder_server
    worst = Repeating(lambda: server.post(WORST, timeout=120), 0)
    health = Repeating(lambda: server.health(timeout=5), 0.02)
    small = Repeating(lambda: server.post(SMALL, timeout=5), 0.1)
    worst.start()
    time.sleep(0.3)  # the first worst body is being prepared
    health.start()
    small.start()
    started = time.monotonic()
    while time.monotonic() - started < 60 and not any(taken > RESPONSIVE for taken, _ in health.answers) and (
            time.monotonic() - started < 3 or len(worst.answers) < 2):
        time.sleep(0.05)
    for thread in (worst, health, small):
        thread.stop.set()
    for thread in (health, small, worst):
        thread.join(120)
    seconds = sorted(taken for taken, _ in health.answers)
    print(f"/health during the worst body: {len(seconds)} calls, p50 {statistics.median(seconds) * 1000:.1f} ms, "
          f"max {seconds[-1] * 1000:.1f} ms; small requests: max {max(t for t, _ in small.answers) * 1000:.1f} ms")
    assert seconds[-1] < RESPONSIVE, health.answers
    assert sum(answer["preparing"] >= 1 for _, answer in health.answers) >= len(seconds) / 2  # they overlapped
    assert all(answer == (200, {"translations": server.expected}) for _, answer in small.answers), small.answers
    assert max(taken for taken, _ in small.answers) < RESPONSIVE, small.answers
    assert all(status == 400 and "--max-output-tokens" in body["error"] for _, (status, body) in worst.answers)


def test_a_sentence_over_the_cap_is_refused_at_once(placeholder_server):
    """The issue's line: a masking that would take about a day (4 MB of "%0...") is refused before any work."""
    server = placeholder_server
    for sentence, flag in (("%" + "0" * ((4 << 20) - 100), "--max-sentence-chars"),
                           ("\U0001f600" * (CAP - 1), "--max-sentence-bytes")):
        started = time.monotonic()
        status, body = server.post({"sentences": ["a b", sentence]}, timeout=30)
        assert status == 413 and flag in body["error"] and body["error"].startswith("sentence 1 has"), body
        assert time.monotonic() - started < 1
