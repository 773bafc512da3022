"""nmtkit serve against a hostile client (issue 47): requests that ask for unbounded work or for numbers JSON lacks,
oversized and malformed bodies, clients that send slowly or hold connections, and a stop during a long translation,
while a well-behaved client keeps getting correct answers within a bound. Loopback only; every socket and request
has a timeout, and the whole test runs in about 20 seconds.

The model is an untrained Transformer of d_model 128: its translations never end before their length limit, so 256
sentences at beam 16 take about a minute on one thread (far beyond the 2-second budget), one short sentence
milliseconds. The well-behaved client's answers are compared with the same checkpoint's in this process.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from letter_task import letter_lines, letter_task, train_tiny
from serve_process import Server

from nmtkit.serve.connections import LINGER_SECONDS
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
