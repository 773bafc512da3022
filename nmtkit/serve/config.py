"""Where `nmtkit serve` listens, what it accepts and how it batches: `ServeConfig`, each setting with its default and
help text.

The command line makes its options from these fields at every start, whatever the command, so this module is
apart from `nmtkit.serve`, whose server library (aiohttp) takes half a second to import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nmtkit.config.sections import option
from nmtkit.errors import NmtkitError
from nmtkit.serve.requests import RequestLimits


@dataclass
class ServeConfig(RequestLimits):
    """Where the service listens, what it accepts (`RequestLimits`, and the limits below), and how it batches."""

    host: str = option("127.0.0.1", "address to listen on (0.0.0.0: every interface)")
    port: int = option(8080, "port to listen on (0: any free port, logged on start)")
    max_tokens: int = option(0, "most source subwords in one sentence (0: what the model's positions allow)")
    batch_tokens: int = option(6000, "source subwords gathered from concurrent requests into one translation call")
    batch_wait_ms: float = option(5.0, "how long the worker waits for more requests after the first one")
    shutdown_timeout: float = option(60.0, "seconds a stop waits for requests being translated")
    time_budget: float = option(
        30.0, "seconds one translation call (the requests gathered into it) may run: a search over it is stopped "
        "before its next step and its requests get 503; a CTranslate2 call is stopped before its next batch. "
        "Preparing a request (reading it, masking and encoding its sentences) has as long: past it, 503 before its "
        "next sentence")
    client_timeout: float = option(
        10.0, "seconds a client has to send a request's headers (from its connection, or its previous answer) and "
        "then its body: a slower one gets 408 or is dropped")
    max_connections: int = option(128, "most open connections: one more is answered 503 and closed at once")
    max_body_bytes: int = option(4 * 1024 * 1024, "most bytes in one request body (far more than --max-sentences "
                                                   "long sentences take): a larger one is refused with 413 unread")

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.port <= 65535:
            raise NmtkitError(f"--port {self.port} is not a port number (0-65535)")
        if min(self.batch_tokens, self.max_connections, self.max_body_bytes) < 1 or self.max_tokens < 0:
            raise NmtkitError("--batch-tokens, --max-connections and --max-body-bytes must be at least 1, "
                              "--max-tokens at least 0")
        if not self.batch_wait_ms >= 0 or not self.shutdown_timeout >= 0:
            raise NmtkitError("--batch-wait-ms and --shutdown-timeout must be at least 0")
        if not 0 < self.time_budget < math.inf or not 0 < self.client_timeout < math.inf:
            raise NmtkitError("--time-budget and --client-timeout must be positive numbers of seconds")
