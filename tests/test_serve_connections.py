"""The connections `nmtkit serve` holds (issue 47, slow clients): `Counted` keeps each connection's deadlines itself,
whatever aiohttp's timers do. Unit tests on a fake transport with timeouts of tens of milliseconds, and one
in-process aiohttp server on loopback under `CappedSite` and the `deadlines` middleware."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from aiohttp import web

from nmtkit.serve.connections import CappedSite, Counted, deadlines

TIMEOUT = 0.05  # client_timeout of the unit tests
ABORT_AFTER = 0.1  # abort_after of the unit tests (LINGER_SECONDS + SLACK_SECONDS in the service)
PARTIAL = b"POST /translate HTTP/1.1\r\nHost: x\r\n"


class FakeTransport(asyncio.Transport):
    """Keeps what is written; a close ends the connection soon after, as asyncio's does, unless `hangs` (a client
    that does not read what waits to be written); an abort always does."""

    def __init__(self, protocol: asyncio.Protocol, hangs: bool = False, unsent: int = 0):
        super().__init__()
        self.protocol, self.hangs, self.unsent = protocol, hangs, unsent
        self.written, self.closing, self.aborted, self.lost = b"", False, False, False

    def write(self, data: bytes) -> None:
        self.written += data

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def get_protocol(self) -> asyncio.Protocol:
        return self.protocol

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        if not self.hangs:
            self.end()

    def abort(self) -> None:
        self.closing = self.aborted = True
        self.end()

    def end(self) -> None:
        if not self.lost:
            self.lost = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)


class Handler(asyncio.Protocol):
    """Stands in for aiohttp's protocol: keeps the calls it gets."""

    def __init__(self):
        self.calls = []

    def connection_made(self, transport):
        self.calls.append("made")

    def data_received(self, data):
        self.calls.append(data)

    def connection_lost(self, exc):
        self.calls.append("lost")


def connect(hangs: bool = False, unsent: int = 0,
            site: CappedSite | None = None) -> tuple[CappedSite, Counted, FakeTransport, Handler]:
    """A connection admitted by `site` (by default a new one over a fake runner), inside a running loop."""
    handler = Handler()
    if site is None:
        site = CappedSite(SimpleNamespace(server=lambda: handler), "127.0.0.1", 0, 4, TIMEOUT)
        site.abort_after = ABORT_AFTER
    connection = site.protocol()
    transport = FakeTransport(connection, hangs, unsent)
    connection.connection_made(transport)
    return site, connection, transport, handler


def run(scenario) -> None:
    asyncio.run(scenario())


def test_a_client_that_does_not_finish_its_headers_in_time_gets_408_and_is_closed():
    async def scenario():
        site, connection, transport, handler = connect()
        connection.data_received(PARTIAL)
        await asyncio.sleep(TIMEOUT / 2)
        assert not transport.closing
        await asyncio.sleep(TIMEOUT)
        assert transport.written.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"Connection: close" in \
            transport.written and b"within 0.05 s (--client-timeout)" in transport.written
        assert transport.closing and not transport.aborted and site.open == 0
        assert handler.calls == ["made", PARTIAL, "lost"]

    run(scenario)


def test_a_connection_that_sends_nothing_is_closed_without_an_answer():
    async def scenario():
        site, connection, transport, _ = connect()
        await asyncio.sleep(TIMEOUT * 1.5)
        assert transport.closing and transport.written == b"" and site.open == 0

    run(scenario)


def test_a_request_being_handled_is_never_cut_and_the_next_deadline_starts_at_its_answer():
    async def scenario():
        site, connection, transport, _ = connect()
        connection.data_received(PARTIAL + b"\r\n")
        connection.request_started()
        await asyncio.sleep(TIMEOUT + ABORT_AFTER)
        assert not transport.closing and transport.written == b"" and site.open == 1
        connection.request_answered(200, closing=False)
        await asyncio.sleep(TIMEOUT / 2)
        assert not transport.closing
        await asyncio.sleep(TIMEOUT)
        assert transport.closing and transport.written == b"" and not transport.aborted  # idle keep-alive: closed

    run(scenario)


def test_a_dropped_connection_whose_close_hangs_is_aborted():
    async def scenario():
        site, connection, transport, _ = connect(hangs=True)
        connection.data_received(PARTIAL)
        await asyncio.sleep(TIMEOUT * 1.5)
        assert transport.closing and not transport.aborted and site.open == 1
        await asyncio.sleep(ABORT_AFTER)
        assert transport.aborted and site.open == 0

    run(scenario)


def test_an_answer_before_the_body_arrived_is_the_last_and_its_connection_is_aborted_if_still_open():
    async def scenario():
        site, connection, transport, _ = connect(hangs=True)
        connection.data_received(PARTIAL + b"Content-Length: 100\r\n\r\n{")
        connection.request_started()
        await asyncio.sleep(TIMEOUT * 1.5)
        connection.request_answered(408, closing=True)
        await asyncio.sleep(ABORT_AFTER / 2)
        assert not transport.closing  # aiohttp's lingering has this long to read the rest and close
        await asyncio.sleep(ABORT_AFTER)
        assert transport.aborted and transport.written == b"" and site.open == 0

    run(scenario)


def test_no_408_goes_into_an_answer_still_being_written():
    async def scenario():
        _, connection, transport, _ = connect(unsent=4096)
        connection.request_started()
        connection.request_answered(200, closing=False)
        connection.data_received(PARTIAL)  # the next request begins; the client does not read the answer
        await asyncio.sleep(TIMEOUT * 1.5)
        assert transport.closing and transport.written == b""

    run(scenario)


def test_a_lost_connection_leaves_the_count_and_has_no_deadline():
    async def scenario():
        site, connection, transport, handler = connect()
        connection.data_received(PARTIAL)
        transport.end()
        await asyncio.sleep(0)
        assert site.open == 0 and handler.calls[-1] == "lost"
        connection.request_answered(200, closing=False)  # a handler that ends after its connection
        await asyncio.sleep(TIMEOUT + ABORT_AFTER)
        assert transport.written == b"" and not transport.closing and connection.deadline is None

    run(scenario)


def test_drops_are_logged_once_a_burst(caplog):
    async def scenario():
        site, first, _, _ = connect()
        for connection in [first, connect(site=site)[1], connect(site=site)[1]]:
            connection.data_received(PARTIAL)
        await asyncio.sleep(TIMEOUT * 1.5)

    with caplog.at_level(logging.WARNING, logger="nmtkit.serve.connections"):
        run(scenario)
    assert [record.getMessage() for record in caplog.records] == [
        "dropping a slow client's connection: its request's headers did not arrive in time (--client-timeout "
        "0.05 s; not logged again for the rest of this burst)"]


def test_connections_over_the_cap_are_refused():
    async def scenario():
        site = connect()[0]
        kinds = [type(site.protocol()).__name__ for _ in range(5)]
        assert kinds == ["Counted"] * 3 + ["Refusal"] * 2 and site.open == 4

    run(scenario)


async def exchange(port: int, request: bytes, wait: float = 5.0) -> tuple[bytes, bool]:
    """(what the server sent, whether it closed the connection) for `request` sent on a new connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    received, closed = b"", False
    try:
        while chunk := await asyncio.wait_for(reader.read(4096), wait):
            received += chunk
        closed = True
    except asyncio.TimeoutError:  # TimeoutError from Python 3.11 on
        pass
    except ConnectionResetError:
        closed = True
    writer.close()
    return received, closed


def test_an_aiohttp_server_under_the_site_keeps_the_deadlines():
    """Headers too slow: 408 and closed; a handler slower than the client timeout: answered, and the idle keep-alive
    connection closed after the timeout; an answer before the body arrived: `Connection: close`. aiohttp's own
    keep-alive timer is set to a minute, as if it had none (aiohttp before 3.14.4 arms none before a first answer)."""
    timeout = 0.3

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(timeout * 2)
        return web.json_response({"read": len(await request.read())})

    async def early(request: web.Request) -> web.Response:
        return web.json_response({"error": "refused"}, status=413)

    async def scenario():
        app = web.Application(middlewares=[deadlines])
        app.router.add_post("/slow", slow)
        app.router.add_post("/early", early)
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=60, lingering_time=timeout)
        await runner.setup()
        site = CappedSite(runner, "127.0.0.1", 0, 8, timeout)
        await site.start()
        port = runner.addresses[0][1]
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            partial, answered, early_answer = await asyncio.gather(
                exchange(port, PARTIAL),
                exchange(port, b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"),
                exchange(port, b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"))
            assert b" 408 " in partial[0] and partial[1], partial
            assert b" 200 OK" in answered[0] and b'{"read": 2}' in answered[0] and answered[1], answered
            assert b" 413 " in early_answer[0] and b"Connection: close" in early_answer[0] and early_answer[1]
            assert loop.time() - started < 5
        finally:
            await runner.cleanup()

    run(scenario)
