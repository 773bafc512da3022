"""Translating a whole corpus into a file (`nmtkit translate --output`), with progress, and continuing an interrupted
run (`--resume`) so that the file ends exactly as an uninterrupted run's would: what distilled training data needs.

The file grows one chunk of `decode.buffer_size` lines at a time (`nmtkit.translate.stream`), each chunk flushed and
synced before the next is read. A resumed run keeps the file's whole chunks and cuts the rest, a partial chunk or a
partial last line left by a killed run included: it translates again from a chunk boundary, so every line is
searched in the same batch, beside the same lines, as in a run that was never interrupted (batch composition can
change a float's last bit, and with it a beam's choice).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from tqdm import tqdm

from nmtkit.config.sections import DecodeConfig, to_dict
from nmtkit.data.files import digest_prefix, sha256_of, write_json_atomic
from nmtkit.errors import NmtkitError
from nmtkit.translate.stream import translate_stream
from nmtkit.translate.translator import Translator

log = logging.getLogger(__name__)
LOG_EVERY = 30.0  # seconds between progress lines when stderr is not a terminal (a recipe's log)
RECORD_SUFFIX = ".resume.json"  # OUT.resume.json: what `--resume` needs to prove OUT is its own (`Record`)
MAX_RECORD_BYTES = 1 << 20  # a record holds settings and digests: far less; more is not one
RECORD_FIELDS = {"lines": int, "bytes": int, "input_sha256": str, "output_sha256": str}


def count_lines(path: Path) -> int:
    """Lines of a file, a last line without a newline included (for the progress total)."""
    count, last = 0, b"\n"
    try:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                count, last = count + block.count(b"\n"), block[-1:]
    except OSError as error:
        raise NmtkitError(f"cannot read {path}: {error.strerror}") from error
    return count + (last != b"\n")


def record_of(output: Path) -> Path:
    """The record of output file `output` (`Record`)."""
    return output.with_name(output.name + RECORD_SUFFIX)


class Record:
    """What `--resume` must know of an output file, in the file `OUT.resume.json` beside it, rewritten (whole, by
    rename) after each whole chunk: the run's settings (model files' digest, decode settings, the pattern set,
    chunk size, output format), and the input lines, output bytes and both digests of what those chunks hold.
    A file without it, or whose bytes, settings or input differ from it, is never cut."""

    def __init__(self, output: Path, settings: dict):
        self.path = record_of(output)
        self.output, self.settings = output, settings
        self.lines, self.bytes = 0, 0
        self.input_digest, self.output_digest = hashlib.sha256(), hashlib.sha256()

    def read(self, input_lines: Iterator[str]) -> int:
        """Prove `output` is this run's to continue, from its record: the same settings, its first recorded bytes
        unchanged, the same first input lines (read from `input_lines`, whose next line is then the first to
        translate); cut what follows them. Returns the input lines kept."""
        saved = self.load()
        for key, value in self.settings.items():
            if key not in saved["settings"] and added_default(key, value):
                continue  # a setting nmtkit gained after the record was written, at its default: the same lines
            if saved["settings"].get(key) != value:
                before = _shown(key, saved["settings"].get(key))
                raise NmtkitError(f"--resume: {self.output} was translated with {before}; this run has "
                                  f"{_shown(key, value)} (continue it with the same command)")
        if not digest_prefix(self.output_digest, self.output, saved["bytes"]) or \
                self.output_digest.hexdigest() != saved["output_sha256"]:
            raise NmtkitError(f"--resume: {self.output} changed since nmtkit translate wrote it (its first "
                              f"{saved['bytes']} bytes are not those its record {self.path.name} describes); "
                              "refusing to cut it")
        for line in islice(input_lines, saved["lines"]):
            self.add_input(line)
        if self.lines != saved["lines"] or self.input_digest.hexdigest() != saved["input_sha256"]:
            raise NmtkitError(f"--resume: the input is not the one {self.output} was translated from (its first "
                              f"{saved['lines']} lines differ); refusing to continue it")
        with open(self.output, "r+b") as handle:
            handle.truncate(saved["bytes"])
        self.bytes = saved["bytes"]
        return self.lines

    def load(self) -> dict:
        if not self.path.is_file():
            raise NmtkitError(f"--resume: {self.output} has no record {self.path.name} beside it, so nothing proves "
                              "nmtkit translate wrote it; refusing to cut it (remove it, or give another --output)")
        try:
            with open(self.path, "rb") as handle:
                text = handle.read(MAX_RECORD_BYTES + 1)
            if len(text) > MAX_RECORD_BYTES:
                raise ValueError(f"over {MAX_RECORD_BYTES} bytes")
            saved = json.loads(text)
            if not isinstance(saved.get("settings"), dict) or not all(
                    isinstance(saved.get(key), kind) for key, kind in RECORD_FIELDS.items()) or \
                    min(saved["lines"], saved["bytes"]) < 0:
                raise ValueError("its fields are missing or wrong")
        except (ValueError, AttributeError, RecursionError) as error:  # RecursionError: JSON nested too deep
            raise NmtkitError(f"--resume: {self.path} is not a record nmtkit wrote ({error}); refusing to cut "
                              f"{self.output}") from None
        return saved

    def add_input(self, line: str) -> None:
        self.input_digest.update(line.encode("utf-8", "surrogatepass"))
        self.lines += 1

    def add_output(self, data: bytes) -> None:
        self.output_digest.update(data)
        self.bytes += len(data)

    def write(self) -> None:
        """Record the output as it is now (call at a whole chunk's end, once it is synced)."""
        write_json_atomic(self.path, {"settings": self.settings, "lines": self.lines, "bytes": self.bytes,
                                      "input_sha256": self.input_digest.hexdigest(),
                                      "output_sha256": self.output_digest.hexdigest()})


def added_default(key: str, value: object) -> bool:
    """Whether `value` is the run setting `key`'s default (a decode setting's `DecodeConfig` default; an output
    option's None, false or empty), which a record written before the setting existed stands for."""
    if key.startswith("decode."):
        defaults = to_dict(DecodeConfig())
        name = key.removeprefix("decode.")
        return name in defaults and value == defaults[name]
    return key not in ("model_sha256", "average", "pattern_set") and value in (None, False, "")


def _shown(key: str, value) -> str:
    if key == "model_sha256":
        return f"model files of SHA-256 {str(value)[:12]}..."
    return f"{key} {json.dumps(value)[:200]}"


def run_settings(translator: Translator, models: list[Path], average: int, stream_options: dict) -> dict:
    """What makes an output file's lines what they are, as its record keeps it (JSON values)."""
    patterns = translator.masking.patterns
    settings = {"model_sha256": sha256_of(models), "average": average,
                **{f"decode.{key}": value for key, value in to_dict(translator.decode).items()},
                "pattern_set": patterns.as_dict() if patterns is not None else None,
                **{key: value for key, value in stream_options.items() if key != "source"}}
    return json.loads(json.dumps(settings))


def resume_point(output: Path, resume: bool, translator: Translator, record: Record | None,
                 input_lines: Iterator[str]) -> int:
    """Input lines already translated in `output` (0 for a new file); an error for a file that would be lost."""
    if not resume:
        if output.exists() and output.stat().st_size > 0:
            raise NmtkitError(f"{output} exists: give --resume to continue it, or remove it")
        return 0
    if translator.decode.nbest > 1:
        raise NmtkitError("--resume counts one output line per input line; it does not combine with --nbest")
    if not output.exists():
        return 0
    if record is None:
        raise NmtkitError(f"--resume continues a regular file; {output} is not one")
    kept = record.read(input_lines)
    log.info("resuming %s after its first %d lines (whole chunks of --buffer-size %d)", output, kept,
             translator.decode.buffer_size)
    return kept


class Progress:
    """Input lines translated, on stderr: a bar on a terminal, else a log line every LOG_EVERY seconds; nothing
    under --quiet."""

    def __init__(self, total: int | None, done: int):
        self.total, self.done, self.start_done = total, done, done
        self.start = self.last_log = time.monotonic()
        shown = log.isEnabledFor(logging.INFO)
        self.bar = tqdm(total=total, initial=done, unit="line", file=sys.stderr, dynamic_ncols=True,
                        disable=not shown or not sys.stderr.isatty())
        self.log_lines = shown and self.bar.disable

    def advance(self, lines: int) -> None:
        self.done += lines
        self.bar.update(lines)
        now = time.monotonic()
        if self.log_lines and now - self.last_log >= LOG_EVERY:
            self.last_log = now
            rate = (self.done - self.start_done) / max(now - self.start, 1e-9)
            left = f", {(self.total - self.done) / rate / 60:.1f} min left" if self.total and rate else ""
            of_total = f"/{self.total}" if self.total else ""
            log.info("translated %d%s lines, %.1f lines/s%s", self.done, of_total, rate, left)

    def close(self) -> None:
        self.bar.close()


def translate_to_file(translator: Translator, lines: Iterable[str], output: Path, resume: bool = False,
                      total: int | None = None, settings: dict | None = None, **stream_options) -> dict:
    """Translate `lines` into file `output` chunk by chunk (`translate_stream`, with `stream_options`), after the
    lines a previous run completed when `resume`; `total` input lines, if known, for the progress; `settings`
    (`run_settings`) go into the output's record. Returns a summary: the output, the input lines translated into
    it, those of them this run translated."""
    iterator = iter(lines)
    record = Record(output, settings or {}) if not output.exists() or output.is_file() else None
    done = resume_point(output, resume, translator, record, iterator)
    progress = Progress(total, done)
    read, chunk = 0, translator.decode.buffer_size

    def counted(source: Iterator[str]) -> Iterator[str]:
        nonlocal read  # translate_stream reads a chunk, then yields it: `read` is the input behind each yield
        for line in source:
            read += 1
            if record is not None:
                record.add_input(line)
            yield line

    if record is not None and done == 0:
        output.write_bytes(b"")
        record.write()
    with open(output, "ab") as handle:
        for text in translate_stream(translator, counted(iterator), first_line=done + 1, **stream_options):
            data = text.encode("utf-8")
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # a chunk on disk survives a crash of the machine, not only of the process
            if record is not None:
                record.add_output(data)
                if read % chunk == 0:  # a whole chunk: what a resumed run keeps
                    record.write()
            progress.advance(done + read - progress.done)
    progress.close()
    return {"output": str(output), "lines": done + read, "translated": read}
