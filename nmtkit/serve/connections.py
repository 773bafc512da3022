"""The connections `nmtkit serve` holds open: at most `max_connections` at once, and none held longer than its client
takes to send a request in time.

aiohttp has no cap on connections, so this is its TCP site with one: the protocol factory that asyncio calls for each
accepted connection hands it to aiohttp while fewer than `max_connections` are open, and otherwise to `Refusal`,
which answers 503 and closes it at once. The site counts the connections itself, from the factory call to the
connection's loss (`Counted`): aiohttp's own list gets a connection only later, after asyncio has accepted a whole
burst of them, so a burst of 200 would get past a cap of 128.

The deadlines are ours too (`Counted`), not aiohttp's timers: aiohttp before 3.14.4 arms its keep-alive timer only
after a first answer, so a connection that never finishes its first request's headers stays open for good, and a
connection whose close waits on a client that does not read its answer stays open as long as the client likes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from aiohttp import web

log = logging.getLogger(__name__)

# seconds aiohttp goes on reading (and dropping) a body it did not need, so that its client reads the answer rather
# than a reset connection; a client slower than that is dropped then
LINGER_SECONDS = 2.0
# seconds between aiohttp's timers and ours: ours drop a slow client before aiohttp's keep-alive timer would, and
# abort a connection only if aiohttp's close after lingering has not ended it by then
SLACK_SECONDS = 1.0


def answer(status: str, error: str) -> bytes:
    """A whole HTTP answer with a JSON error, after which the connection closes."""
    body = json.dumps({"error": error}).encode()
    return (b"HTTP/1.1 %s\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (status.encode(), len(body), body))


REFUSAL = answer("503 Service Unavailable", "too many open connections; try again later")


class Refusal(asyncio.Protocol):
    """A connection over the cap: answered 503 before it sends anything, and closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(REFUSAL)
        transport.close()


class Counted(asyncio.Protocol):
    """aiohttp's protocol for one admitted connection, which leaves `site.open` when the connection is lost, under
    deadlines kept here, whatever aiohttp's own timers do.

    Between requests (from the connection's start, or from its last answer) the client has `site.client_timeout`
    seconds to deliver a request's headers, that is, until aiohttp starts handling the request (`deadlines` says
    when): then one that sent part of a request gets 408, an idle one nothing, and the connection is closed. A request
    being handled has no deadline here (its body has the handler's, its translation the time budget). A connection
    dropped, or answered before its body arrived (aiohttp lingers over the rest, then closes it), is aborted if it is
    still open `site.abort_after` seconds later: its close waits on a client that does not read."""

    def __init__(self, handler: asyncio.Protocol, site: CappedSite):
        self.handler, self.site = handler, site
        self.transport: asyncio.Transport | None = None  # None once the connection is lost
        self.deadline: asyncio.TimerHandle | None = None
        self.begun = False  # bytes arrived since the connection's start or its last answer
        self.answered = False  # a request of this connection was answered

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.handler.connection_made(transport)
        self.await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.schedule()
        self.site.open -= 1
        self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.begun = True
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received()

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def schedule(self, action: Callable[[], None] | None = None, seconds: float = 0.0) -> None:
        """Replace the connection's deadline with `action` in `seconds`; without one (or once the connection is
        lost), leave it none."""
        if self.deadline is not None:
            self.deadline.cancel()
        self.deadline = None
        if action is not None and self.transport is not None:
            self.deadline = asyncio.get_running_loop().call_later(seconds, action)

    def await_request(self) -> None:
        self.begun = False
        self.schedule(self.expire, self.site.client_timeout)

    def request_started(self) -> None:
        if self.transport is not None and not self.transport.is_closing():  # one dropped keeps its abort
            self.schedule()

    def request_answered(self, status: int, closing: bool) -> None:
        """Called as a request's answer is about to be written; `closing` if it is the connection's last."""
        self.answered = True
        if self.transport is None:
            return
        if closing:
            self.site.drop(f"answered {status} before its request's body had arrived")
        if closing or self.transport.is_closing():
            self.schedule(self.abort, self.site.abort_after)
        else:
            self.await_request()

    def expire(self) -> None:
        """No request within the client timeout: 408 to a client that began one (unless an answer is still being
        written to it), nothing to an idle one; closed either way."""
        if self.begun and not self.transport.get_write_buffer_size():
            self.transport.write(answer("408 Request Timeout", "the request headers did not arrive within "
                                        f"{self.site.client_timeout:g} s (--client-timeout)"))
        if self.begun or not self.answered:  # an idle keep-alive connection closes without a word
            self.site.drop("its request's headers did not arrive in time" if self.begun else "it sent no request")
        self.transport.close()
        self.schedule(self.abort, self.site.abort_after)

    def abort(self) -> None:
        self.site.drop(f"still open {self.site.abort_after:g} s after it was dropped: aborted")
        self.transport.abort()


def counted(request: web.BaseRequest) -> Counted | None:
    """The `Counted` protocol of a request's connection; None under a server that `CappedSite` did not start (as the
    in-process tests' test server), or once the connection is lost."""
    protocol = request.transport.get_protocol() if request.transport is not None else None
    return protocol if isinstance(protocol, Counted) else None


@web.middleware
async def deadlines(request: web.Request, handler):
    """Tells the connection's `Counted` that aiohttp is handling a request (no deadline meanwhile) and when it is
    answered. An answer given before the whole body arrived is the connection's last (`Connection: close`): the
    client may still be sending it, and what it sends next would not be a request."""
    connection = counted(request)
    if connection is None:
        return await handler(request)
    connection.request_started()
    response = None
    try:
        response = await handler(request)
        return response
    finally:
        closing = not request.content.is_eof()
        if closing and response is not None:
            response.force_close()
        connection.request_answered(response.status if response is not None else 500, closing)


class CappedSite(web.BaseSite):
    """aiohttp's `TCPSite` (host, port) with at most `max_connections` connections open at once, each dropped when
    its client is slower than `client_timeout` (`Counted`)."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, max_connections: int, client_timeout: float):
        super().__init__(runner)
        self.host, self.port, self.max_connections = host, port, max_connections
        self.client_timeout, self.abort_after = client_timeout, LINGER_SECONDS + SLACK_SECONDS
        self.open = 0  # connections admitted and not yet lost
        self.refused = 0  # connections refused since the last one admitted
        self.quiet_until = 0.0  # loop time until which dropped connections are not logged (one line a burst)

    @property
    def name(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(self.protocol, self.host, self.port)

    def protocol(self) -> asyncio.Protocol:
        if self.open < self.max_connections:
            self.open += 1
            self.refused = 0
            return Counted(self._runner.server(), self)
        if self.refused == 0:  # once per burst: a client that opens connections in a loop must not flood the log
            log.warning("%d connections open: refusing new ones (--max-connections)", self.max_connections)
        self.refused += 1
        return Refusal()

    def drop(self, why: str) -> None:
        """Log a connection dropped, once a burst (drops less than `client_timeout` apart): a client that holds
        connections in a loop must not flood the log."""
        now = asyncio.get_running_loop().time()
        if now >= self.quiet_until:
            log.warning("dropping a slow client's connection: %s (--client-timeout %g s; not logged again for "
                        "the rest of this burst)", why, self.client_timeout)
        self.quiet_until = now + self.client_timeout
