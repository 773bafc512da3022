"""An HTTP JSON translation service over one `Translator` (a checkpoint or an exported CTranslate2 directory).

    POST /translate  {"sentences": ["...", ...], "beam": 5, "nbest": 2, "scores": true, ...}
                     -> {"translations": ["...", ...]} (+ "scores": [...], + "nbest": [[{"translation", "score"}]])
    GET  /health     -> {"status": "ok", "backend": ..., "pending": ..., "requests": ..., "translation_calls": ...}

Requests that arrive within `batch_wait_ms` of each other are translated together, up to `batch_tokens` source
subwords: one worker takes them from a queue and makes one Translator call per set of search options, in a thread,
so the event loop keeps accepting requests meanwhile; each request gets its own sentences back, in order. A bad
request gets a 4xx JSON error {"error": "..."} and the service goes on; SIGTERM or SIGINT stops accepting
connections, answers the requests already received (or refuses them with 503 if they arrive while stopping) and
exits with status 0.

The server library is aiohttp: one well-kept package (aio-libs, asyncio-native since 2014) that is both the HTTP
server and its runner, so the listening socket, the graceful shutdown on SIGTERM and the exit status are all in
this module's hands (uvicorn re-raises the signal after its graceful shutdown, so the process would end with 143).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from aiohttp import web

from nmtkit.errors import NmtkitError
from nmtkit.inputs import Request, parse_record
from nmtkit.serve_config import ServeConfig
from nmtkit.translate import ExportedTranslator, Translator

log = logging.getLogger(__name__)

LISTENING = "serving on http://%s:%d (POST /translate, GET /health)"  # what clients may read the port from
MAX_BODY = 4 * 1024 * 1024  # bytes of one request body: far more than max_sentences long sentences take
# the search options a request may set, with their JSON types (a bool is not a number here)
REQUEST_OPTIONS = {"beam": int, "nbest": int, "length_penalty": str, "alpha": float, "min_len": int,
                   "max_len_a": float, "max_len_b": int, "tgt_lang": str}


class BadRequest(Exception):
    """A client error: answered with `status` and a JSON {"error": message}."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class TranslationFailed(Exception):
    """The Translator call that held a request's sentences raised (and was logged): answered with 500."""


@dataclass
class Job:
    """One request's sentences waiting for the worker; `done` gets its (text, score) hypotheses per sentence."""

    sentences: list[Request]
    options: dict
    tokens: int
    done: asyncio.Future = field(repr=False)


def check_option(name: str, value) -> None:
    kind = REQUEST_OPTIONS[name]
    valid = isinstance(value, str) if kind is str else (
        isinstance(value, (int, float)) and not isinstance(value, bool) and (kind is float or isinstance(value, int)))
    if not valid:
        expected = {str: "a string", int: "an integer", float: "a number"}[kind]
        raise BadRequest(f"field {name!r} must be {expected}, got {json.dumps(value)}")


def parse_sentence(index: int, sentence: object) -> Request:
    """A sentence of a request: a string, or an object with "text" and the keys of `translate --input-format jsonl`
    (constraints, negative, prefix, tgt_lang)."""
    try:
        if isinstance(sentence, str):
            if "\n" in sentence or "\r" in sentence:
                raise ValueError("a sentence is one line: it may not contain a line break")
            return Request(sentence)
        return parse_record(sentence)
    except ValueError as error:
        raise BadRequest(f"sentence {index}: {error}") from error


def parse_request(body: object, config: ServeConfig) -> tuple[list[Request], dict, bool]:
    """(sentences, search options, whether to return scores) of a /translate body, or BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object such as {"sentences": ["..."]}')
    unknown = sorted(set(body) - {"sentences", "scores", *REQUEST_OPTIONS})
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; known: sentences, scores, {', '.join(REQUEST_OPTIONS)}")
    if "sentences" not in body:
        raise BadRequest('missing field "sentences" (a list of strings)')
    sentences = body["sentences"]
    if not isinstance(sentences, list):
        raise BadRequest('field "sentences" must be a list of strings (or objects with "text")')
    if len(sentences) > config.max_sentences:
        raise BadRequest(f"{len(sentences)} sentences in one request; at most {config.max_sentences}", 413)
    sentences = [parse_sentence(index, sentence) for index, sentence in enumerate(sentences)]
    scores = body.get("scores", False)
    if not isinstance(scores, bool):
        raise BadRequest(f'field "scores" must be true or false, got {json.dumps(scores)}')
    options = {name: value for name, value in body.items() if name in REQUEST_OPTIONS}
    for name, value in options.items():
        check_option(name, value)
    if options.get("beam", 1) > config.max_beam:
        raise BadRequest(f"beam {options['beam']} is larger than this service allows ({config.max_beam})")
    return sentences, options, scores


class Service:
    """The request queue, the batching worker and the HTTP handlers around one Translator."""

    def __init__(self, translator: Translator, config: ServeConfig):
        self.translator, self.config = translator, config
        self.max_tokens = min(config.max_tokens or translator.max_source, translator.max_source)
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.stopping = False
        self.requests = self.calls = 0  # requests translated, Translator calls made for them
        self.pending = 0  # requests received and not yet answered

    def variant(self, options: dict) -> Translator:
        """The translator for a request's search options (sharing the model; cheap to make); NmtkitError if bad,
        or if a multilingual model is not told the target language (by the request, or by serve's --set
        decode.tgt_lang=...)."""
        return self.translator.with_decode(**options) if options else self.translator

    @staticmethod
    def check(translator: Translator, sentences: list[Request]) -> None:
        """NmtkitError for sentences this translator cannot serve: a multilingual model's without a target language
        (from the sentence, the request, or serve's --set decode.tgt_lang=...), constraints that an exported model
        or sampling cannot follow."""
        for index, sentence in enumerate(sentences):
            translator.source_tag(sentence, f"sentence {index}")
        if any(sentence.constrained for sentence in sentences):
            if isinstance(translator, ExportedTranslator):
                raise NmtkitError("constraints and prefixes need a checkpoint: CTranslate2 has no constrained search")
            if translator.decode.sample:
                raise NmtkitError("constraints and prefixes need beam search; this service samples")

    def count_tokens(self, sentences: list[Request]) -> int:
        lengths = [len(ids) for ids in self.translator.loaded.src_subword.encode([s.text for s in sentences])]
        for index, length in enumerate(lengths):
            if length > self.max_tokens:
                raise BadRequest(f"sentence {index} has {length} subwords; at most {self.max_tokens}", 413)
        return sum(lengths)

    async def translate(self, request: web.Request) -> web.Response:
        if self.stopping:
            raise BadRequest("the service is stopping", 503)
        try:
            body = await request.json()
        except json.JSONDecodeError as error:
            raise BadRequest(f"the body is not valid JSON: {error}") from error
        except UnicodeDecodeError as error:
            raise BadRequest("the body is not UTF-8") from error
        except web.HTTPRequestEntityTooLarge as error:
            raise BadRequest(f"the body is larger than {MAX_BODY} bytes", 413) from error
        sentences, options, scores = parse_request(body, self.config)
        try:
            self.check(self.variant(options), sentences)
        except NmtkitError as error:
            raise BadRequest(str(error)) from error
        job = Job(sentences, options, self.count_tokens(sentences), asyncio.get_running_loop().create_future())
        self.pending += 1
        try:
            await self.queue.put(job)
            results = await job.done
        finally:
            self.pending -= 1
        return web.json_response(self.answer(results, options.get("nbest", self.translator.decode.nbest), scores))

    @staticmethod
    def answer(results: list[list[tuple[str, float]]], nbest: int, scores: bool) -> dict:
        response = {"translations": [hyps[0][0] for hyps in results]}
        if scores:
            response["scores"] = [hyps[0][1] for hyps in results]
        if nbest > 1:
            response["nbest"] = [[{"translation": text, "score": score} for text, score in hyps] for hyps in results]
        return response

    async def health(self, request: web.Request) -> web.Response:
        backend = "ctranslate2" if isinstance(self.translator, ExportedTranslator) else "pytorch"
        return web.json_response({"status": "stopping" if self.stopping else "ok", "backend": backend,
                                  "pending": self.pending, "requests": self.requests,
                                  "translation_calls": self.calls})

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
        translator = self.variant(jobs[0].options)
        try:
            results = await asyncio.get_running_loop().run_in_executor(None, translator.translate_requests, lines)
        except Exception:  # noqa: BLE001 (one failed call must not end the service)
            log.exception("translation of %d sentences failed", len(lines))
            for job in jobs:
                if not job.done.done():
                    job.done.set_exception(TranslationFailed())
            return
        self.requests, self.calls = self.requests + len(jobs), self.calls + 1
        start = 0
        for job in jobs:
            if not job.done.done():  # a client that went away cancelled its future
                job.done.set_result(results[start : start + len(job.sentences)])
            start += len(job.sentences)


@web.middleware
async def json_errors(request: web.Request, handler):
    """Every error as JSON {"error": ...}: the client's (4xx), routing's (404, 405), and unexpected ones (500)."""
    try:
        return await handler(request)
    except BadRequest as error:
        return web.json_response({"error": str(error)}, status=error.status)
    except TranslationFailed:  # logged by the worker
        return web.json_response({"error": "internal error (see the server log)"}, status=500)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        return web.json_response({"error": error.reason}, status=error.status)
    except Exception:  # noqa: BLE001 (answered with 500; the service goes on)
        log.exception("request %s %s failed", request.method, request.path)
        return web.json_response({"error": "internal error (see the server log)"}, status=500)


def make_app(service: Service) -> web.Application:
    app = web.Application(middlewares=[json_errors], client_max_size=MAX_BODY)
    app.router.add_post("/translate", service.translate)
    app.router.add_get("/health", service.health)

    async def worker(app: web.Application):
        task = asyncio.create_task(service.work())
        yield
        task.cancel()  # cleanup runs after the requests in flight were answered (see `serve_until_stopped`)

    async def stop_accepting(app: web.Application) -> None:
        service.stopping = True

    app.cleanup_ctx.append(worker)
    app.on_shutdown.append(stop_accepting)
    return app


async def serve_until_stopped(translator: Translator, config: ServeConfig) -> None:
    """Listen until SIGTERM or SIGINT, then shut down gracefully: aiohttp closes the listening socket, runs
    on_shutdown (new requests get 503), waits up to `shutdown_timeout` for the handlers still running, whose jobs
    the worker translates, and only then runs the cleanup that stops the worker."""
    service = Service(translator, config)
    runner = web.AppRunner(make_app(service), handle_signals=False, access_log=None,
                           shutdown_timeout=config.shutdown_timeout)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.port)
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


def serve_model(model: Path, config: ServeConfig, device: str = "auto", threads: int = 0, inter_threads: int = 1,
                **decode) -> None:
    """Load `model` (a checkpoint or an exported directory, see `Translator.load`) and serve it until stopped."""
    translator = Translator.load(model, device, threads, inter_threads=inter_threads, **decode)
    try:
        asyncio.run(serve_until_stopped(translator, config))
    except OSError as error:  # the address is taken or not ours
        raise NmtkitError(f"cannot listen on {config.host}:{config.port}: {error.strerror or error}") from error
