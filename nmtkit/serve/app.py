"""An HTTP JSON translation service over one `Translator` (a checkpoint or an exported CTranslate2 directory).

    POST /translate  {"sentences": ["...", ...], "beam": 5, "nbest": 2, "scores": true, "confidence": "mean", ...}
                     -> {"translations": ["...", ...]} (+ "scores": [...], + "confidence": [{"mean": ...}],
                         + "nbest": [[{"translation", "score"}]])
    GET  /health     -> {"status": "ok", "backend": ..., "preparing": ..., "pending": ..., "requests": ...,
                         "translation_calls": ...}

The event loop only moves bytes: each request is prepared (its JSON read, its fields checked, its sentences masked
and encoded to subwords, `Service.prepare`) and its answer written as JSON in threads of their own
(`request_threads`), beside the translation worker's, so that no request queues behind a translation to be read
and /health answers while any request is prepared. Python threads share one interpreter lock, which a call into C
(a pattern match, a SentencePiece call) holds until it returns: what keeps each such call short is the cap on a
sentence's characters and bytes, checked before any work, and that each sentence is masked and encoded by a call
of its own (the body's JSON, `requests.BodyDecoder`, and the answer's, `answer`, are read and written in pieces).

Requests that arrive within `batch_wait_ms` of each other are translated together, up to `batch_tokens` source
subwords: one worker takes them from a queue and makes one Translator call per set of search options, in a thread,
so the event loop keeps accepting requests meanwhile; each request gets its own sentences back, in order. A bad
request gets a 4xx JSON error {"error": "..."} and the service goes on; SIGTERM or SIGINT stops accepting
connections, answers the requests already received (or refuses them with 503 if they arrive while stopping) and
exits with status 0.

No one request may stall or kill the service: every option a request sets has a limit (`ServeConfig`), a translation
call that runs past `time_budget` is stopped between decoding steps (answered 503, the worker free again; this is
also what bounds a stop; a request whose preparation runs past it is refused with 503 before its next sentence),
clients that send slowly are dropped after `client_timeout`, at most `max_connections`
are open at once, and only numbers JSON allows come in or go out (no NaN or Infinity).

The server library is aiohttp: one well-kept package (aio-libs, asyncio-native since 2014) that is both the HTTP
server and its runner, so the listening socket, the graceful shutdown on SIGTERM and the exit status are all in
this module's hands (uvicorn re-raises the signal after its graceful shutdown, so the process would end with 143).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby

from aiohttp import web

from nmtkit.decoding.confidence import parse_estimators
from nmtkit.decoding.inputs import Request
from nmtkit.serve.config import ServeConfig
from nmtkit.serve.connections import LINGER_SECONDS, SLACK_SECONDS, CappedSite, deadlines
from nmtkit.serve.jobs import Job, answer, dumps, encode_sentences, prepare_job
from nmtkit.serve.requests import BadRequest
from nmtkit.translate import Translator
from nmtkit.translate.masking import MaskedLine

log = logging.getLogger(__name__)

LISTENING = "serving on http://%s:%d (POST /translate, GET /health)"  # what clients may read the port from
# requests prepared (and answers written) at once: they share one interpreter lock, so more threads add no speed,
# only more turns the event loop waits for; enough that a small request is not queued behind a few large ones
REQUEST_THREADS = 4
# seconds a thread running Python keeps the interpreter lock once another asks for it (Python's default: 0.005):
# the event loop, and a search that lets go of it at each operation, wait for it at each turn while requests are
# prepared (measured with two worst bodies in flight: /health's slowest answer 44 ms at 0.005, 24 ms at 0.001)
SWITCH_INTERVAL = 0.001


class TranslationFailed(Exception):
    """The Translator call that held a request's sentences raised (and was logged): answered with 500."""


class OverBudget(Exception):
    """Raised before a decoding step, in the worker's thread, once its translation call ran past its time budget or
    the service has gone: the search ends there and frees the worker."""


class Service:
    """The request queue, the batching worker and the HTTP handlers around one Translator."""

    def __init__(self, translator: Translator, config: ServeConfig):
        self.translator, self.config = translator, config
        self.max_tokens = min(config.max_tokens or translator.max_source, translator.max_source)
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.stopping = False
        self.requests = self.calls = 0  # requests translated, Translator calls made for them
        self.preparing = 0  # requests being read and encoded in `request_threads`
        self.pending = 0  # requests prepared and not yet answered
        self.request_threads = ThreadPoolExecutor(REQUEST_THREADS, thread_name_prefix="nmtkit-request")
        self.gone = threading.Event()  # set once the service stopped: a translation still running ends at its next step

    def variant(self, options: dict) -> Translator:
        """The translator for a request's search options (sharing the model; cheap); NmtkitError if bad."""
        decode = {name: value for name, value in options.items() if name != "confidence"}  # not a search option
        return self.translator.with_decode(**decode) if decode else self.translator

    def prepare(self, raw: bytes, deadline: float) -> tuple[Job, bool]:
        """`prepare_job` for this service: runs in `request_threads`, never on the event loop."""
        return prepare_job(self.variant, self.config, self.max_tokens, self.gone, raw, deadline)

    def encode(self, translator: Translator, sentences: list[Request],
               deadline: float = math.inf) -> tuple[list[list[int]], list[MaskedLine]]:
        return encode_sentences(translator, sentences, self.config, self.max_tokens, self.gone, deadline)

    async def read_body(self, request: web.Request) -> bytes:
        try:
            return await asyncio.wait_for(request.read(), self.config.client_timeout)
        except asyncio.TimeoutError as error:  # TimeoutError from Python 3.11 on
            raise BadRequest(f"the body did not arrive within {self.config.client_timeout:g} s (--client-timeout)",
                             408) from error
        except web.HTTPRequestEntityTooLarge as error:
            raise BadRequest(f"the body is larger than {self.config.max_body_bytes} bytes (--max-body-bytes)",
                             413) from error

    async def translate(self, request: web.Request) -> web.Response:
        if self.stopping:
            raise BadRequest("the service is stopping", 503)
        raw = await self.read_body(request)
        deadline = time.monotonic() + self.config.time_budget
        loop = asyncio.get_running_loop()
        self.preparing += 1
        try:
            job, scores = await loop.run_in_executor(self.request_threads, self.prepare, raw, deadline)
        finally:
            self.preparing -= 1
        job.done = loop.create_future()
        self.pending += 1
        try:
            await self.queue.put(job)
            results, rated = await job.done
        finally:
            self.pending -= 1
        nbest = job.options.get("nbest", self.translator.decode.nbest)
        return web.Response(body=await loop.run_in_executor(self.request_threads, answer, results, nbest, scores,
                                                            rated), content_type="application/json")

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "stopping" if self.stopping else "ok",
                                  "backend": self.translator.engine.name.lower(), "preparing": self.preparing,
                                  "pending": self.pending, "requests": self.requests,
                                  "translation_calls": self.calls}, dumps=dumps)

    async def gather(self, carried: Job | None) -> tuple[list[Job], Job | None]:
        """The jobs of one translation call: the first waits as long as it must, the others up to `batch_wait_ms`
        after it while the batch has fewer than `batch_tokens` subwords; a job that would overfill it is carried
        over to the next call."""
        jobs = [carried or await self.queue.get()]
        tokens, loop = jobs[0].tokens, asyncio.get_running_loop()
        deadline = loop.time() + self.config.batch_wait_ms / 1000
        while (remaining := deadline - loop.time()) > 0:
            try:
                job = await asyncio.wait_for(self.queue.get(), remaining)
            except asyncio.TimeoutError:  # TimeoutError from Python 3.11 on
                break
            if tokens + job.tokens > self.config.batch_tokens:
                return jobs, job
            jobs.append(job)
            tokens += job.tokens
        return jobs, None

    async def work(self) -> None:
        """Translate gathered jobs forever (until cancelled), one Translator call per set of search options."""
        carried = None
        while True:
            jobs, carried = await self.gather(carried)
            keyed = sorted(jobs, key=lambda job: sorted(job.options.items()))
            for _, group in groupby(keyed, key=lambda job: sorted(job.options.items())):
                await self.run_group(list(group))

    async def run_group(self, jobs: list[Job]) -> None:
        lines = [sentence for job in jobs for sentence in job.sentences]
        sources = [ids for job in jobs for ids in job.sources]
        masked = [line for job in jobs for line in job.masked]
        budget = self.config.time_budget
        check = functools.partial(self.check_budget, time.monotonic() + budget)
        counts = self.translator.placeholder_counts  # shared by the variants
        repaired = counts.repaired
        try:
            results, rated = await asyncio.get_running_loop().run_in_executor(
                None, self.translate_group, jobs[0].options, check, lines, sources, masked)
        except OverBudget:
            log.warning("translation of %d sentences stopped: over the time budget of %g s", len(lines), budget)
            self.fail(jobs, lambda: BadRequest(f"the translation ran past this service's time budget ({budget:g} s, "
                                               "--time-budget) and was stopped: send fewer or shorter sentences, or "
                                               "ask for a smaller beam", 503))
            return
        except Exception:  # noqa: BLE001 (one failed call must not end the service)
            log.exception("translation of %d sentences failed", len(lines))
            self.fail(jobs, TranslationFailed)
            return
        self.requests, self.calls = self.requests + len(jobs), self.calls + 1
        if counts.repaired > repaired:
            log.warning("%d of %d sentences lost or broke placeholders; repaired", counts.repaired - repaired,
                        len(lines))
        start = 0
        for job in jobs:
            if not job.done.done():  # a client that went away cancelled its future
                end = start + len(job.sentences)
                job.done.set_result((results[start:end], None if rated is None else rated[start:end]))
            start += len(job.sentences)

    def translate_group(self, options: dict, check: Callable[[], None], lines: list[Request],
                        sources: list[list[int]], masked: list[MaskedLine],
                        ) -> tuple[list[list[tuple[str, float]]], list[dict[str, float]] | None]:
        """One translation call, in the worker's thread: its translator variant too is made there, not on the loop;
        and each translation's confidence when the requests ask for it (None when not)."""
        translator = self.variant(options).with_step_check(check)
        if "confidence" not in options:
            return translator.translate_requests(lines, 1, sources, masked), None
        return translator.translate_confident(lines, parse_estimators(options["confidence"]), 1, sources, masked)

    def check_budget(self, deadline: float) -> None:
        """The worker's check before each decoding step (see `Translator.with_step_check`)."""
        if time.monotonic() > deadline or self.gone.is_set():
            raise OverBudget

    @staticmethod
    def fail(jobs: list[Job], error: Callable[[], Exception]) -> None:
        for job in jobs:
            if not job.done.done():
                job.done.set_exception(error())


@web.middleware
async def json_errors(request: web.Request, handler):
    """Every error as JSON {"error": ...}: the client's (4xx), routing's (404, 405), and unexpected ones (500)."""
    try:
        return await handler(request)
    except BadRequest as error:
        return web.json_response({"error": str(error)}, status=error.status, dumps=dumps)
    except TranslationFailed:  # logged by the worker
        return web.json_response({"error": "internal error (see the server log)"}, status=500)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        return web.json_response({"error": error.reason}, status=error.status, dumps=dumps)
    except Exception:  # noqa: BLE001 (answered with 500; the service goes on)
        log.exception("request %s %s failed", request.method, request.path)
        return web.json_response({"error": "internal error (see the server log)"}, status=500)


def make_app(service: Service) -> web.Application:
    app = web.Application(middlewares=[deadlines, json_errors], client_max_size=service.config.max_body_bytes)
    app.router.add_post("/translate", service.translate)
    app.router.add_get("/health", service.health)

    async def worker(app: web.Application):
        task = asyncio.create_task(service.work())
        yield
        task.cancel()  # cleanup runs after the requests in flight were answered (see `serve_until_stopped`)
        service.gone.set()
        service.request_threads.shutdown(wait=False, cancel_futures=True)

    async def stop_accepting(app: web.Application) -> None:
        service.stopping = True

    app.cleanup_ctx.append(worker)
    app.on_shutdown.append(stop_accepting)
    return app


async def serve_until_stopped(translator: Translator, config: ServeConfig) -> None:
    """Listen until SIGTERM or SIGINT, then shut down gracefully: aiohttp closes the listening socket, runs
    on_shutdown (new requests get 503), waits up to `shutdown_timeout` for the handlers still running, whose jobs
    the worker translates, and only then runs the cleanup that stops the worker (and a search still running, before
    its next step). A client must send its headers within `client_timeout` of connecting or of its previous answer
    (`connections.Counted`: aiohttp's keep-alive timer, a little later, is only a backstop) and its body within
    `client_timeout` after them (`Service.read_body`)."""
    service = Service(translator, config)
    runner = web.AppRunner(make_app(service), handle_signals=False, access_log=None,
                           shutdown_timeout=config.shutdown_timeout,
                           keepalive_timeout=config.client_timeout + SLACK_SECONDS, lingering_time=LINGER_SECONDS)
    await runner.setup()
    try:
        site = CappedSite(runner, config.host, config.port, config.max_connections, config.client_timeout)
        await site.start()
        host, port = runner.addresses[0][:2]
        log.info(LISTENING, host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        await stop.wait()
        log.info("stopping: answering the requests received, refusing new ones")
    finally:
        await runner.cleanup()
