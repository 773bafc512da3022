"""The serve command's one library call: load the model, then serve it (`nmtkit.serve.app`) until stopped."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path

from nmtkit.errors import NmtkitError
from nmtkit.serve.app import SWITCH_INTERVAL, serve_until_stopped
from nmtkit.serve.config import ServeConfig
from nmtkit.translate import Translator


def serve_model(model: Path, config: ServeConfig, device: str = "auto", threads: int = 0, inter_threads: int = 0,
                **decode) -> None:
    """Load `model` (a checkpoint or an exported directory, see `Translator.load`) and serve it until stopped."""
    translator = Translator.load(model, device, threads, inter_threads=inter_threads, **decode)
    # the model and the libraries loaded live as long as the service: a full collection of the cyclic garbage
    # collector, which holds the interpreter lock throughout (over 0.1 s for all that torch loads), then walks only
    # the objects of the requests in flight
    gc.freeze()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        asyncio.run(serve_until_stopped(translator, config))
    except OSError as error:  # the address is taken or not ours
        raise NmtkitError(f"cannot listen on {config.host}:{config.port}: {error.strerror or error}") from error
