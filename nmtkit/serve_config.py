"""Where `nmtkit serve` listens, what it accepts and how it batches: `ServeConfig`, each setting with its default and
help text.

The command line makes its options from these fields at every start, whatever the command, so this module is
apart from `nmtkit.serve`, whose server library (aiohttp) takes half a second to import.
"""

from __future__ import annotations

from dataclasses import dataclass

from nmtkit.config import option
from nmtkit.errors import NmtkitError


@dataclass
class ServeConfig:
    """Where the service listens, what it accepts, and how it batches."""

    host: str = option("127.0.0.1", "address to listen on (0.0.0.0: every interface)")
    port: int = option(8080, "port to listen on (0: any free port, logged on start)")
    max_sentences: int = option(256, "most sentences in one request")
    max_tokens: int = option(0, "most source subwords in one sentence (0: what the model's positions allow)")
    max_beam: int = option(16, "largest beam a request may ask for")
    batch_tokens: int = option(6000, "source subwords gathered from concurrent requests into one translation call")
    batch_wait_ms: float = option(5.0, "how long the worker waits for more requests after the first one")
    shutdown_timeout: float = option(60.0, "seconds a stop waits for requests being translated")

    def __post_init__(self):
        if not 0 <= self.port <= 65535:
            raise NmtkitError(f"--port {self.port} is not a port number (0-65535)")
        if min(self.max_sentences, self.max_beam, self.batch_tokens) < 1 or self.max_tokens < 0:
            raise NmtkitError("--max-sentences, --max-beam and --batch-tokens must be at least 1, --max-tokens at "
                              "least 0")
        if self.batch_wait_ms < 0 or self.shutdown_timeout < 0:
            raise NmtkitError("--batch-wait-ms and --shutdown-timeout must be at least 0")
