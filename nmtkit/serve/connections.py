"""A cap on the connections `nmtkit serve` holds open: clients that open connections and keep them (slowly sending,
or sending nothing) must not take every file descriptor of the process, and with it the service.

aiohttp has timeouts but no such cap, so this is its TCP site with one: the protocol factory that asyncio calls for
each accepted connection hands it to aiohttp while fewer than `max_connections` are open, and otherwise to
`Refusal`, which answers 503 and closes it at once. The site counts the connections itself, from the factory call to
the connection's loss (`Counted`): aiohttp's own list gets a connection only later, after asyncio has accepted a
whole burst of them, so a burst of 200 would get past a cap of 128.
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

log = logging.getLogger(__name__)

_BODY = json.dumps({"error": "too many open connections; try again later"}).encode()
REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
           b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY))


class Refusal(asyncio.Protocol):
    """A connection over the cap: answered 503 before it sends anything, and closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(REFUSAL)
        transport.close()


class Counted(asyncio.Protocol):
    """aiohttp's protocol for one admitted connection, which leaves `site.open` when the connection is lost."""

    def __init__(self, handler: asyncio.Protocol, site: CappedSite):
        self.handler, self.site = handler, site

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.site.open -= 1
        self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received()

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()


class CappedSite(web.BaseSite):
    """aiohttp's `TCPSite` (host, port) with at most `max_connections` connections open at once."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, max_connections: int):
        super().__init__(runner)
        self.host, self.port, self.max_connections = host, port, max_connections
        self.open = 0  # connections admitted and not yet lost
        self.refused = 0  # connections refused since the last one admitted

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
