"""Translating a whole corpus into a file (`nmtkit translate --output`), with progress, and continuing an interrupted
run (`--resume`) so that the file ends exactly as an uninterrupted run's would: what distilled training data needs.

The file grows one chunk of `decode.buffer_size` lines at a time (`nmtkit.translate.stream`), each chunk flushed and
synced before the next is read. A resumed run keeps the file's whole chunks and cuts the rest, a partial chunk or a
partial last line left by a killed run included: it translates again from a chunk boundary, so every line is
searched in the same batch, beside the same lines, as in a run that was never interrupted (batch composition can
change a float's last bit, and with it a beam's choice).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from tqdm import tqdm

from nmtkit.errors import NmtkitError
from nmtkit.translate.stream import translate_stream
from nmtkit.translate.translator import Translator

log = logging.getLogger(__name__)
LOG_EVERY = 30.0  # seconds between progress lines when stderr is not a terminal (a recipe's log)


def count_lines(path: Path) -> int:
    """Lines of a file, a last line without a newline included (for the progress total)."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


def keep_whole_chunks(path: Path, chunk_lines: int) -> int:
    """Cut file `path` after its last whole chunk of `chunk_lines` complete lines; returns the lines kept."""
    kept, kept_bytes, lines, position = 0, 0, 0, 0
    with open(path, "r+b") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break
            lines, position = lines + 1, position + len(line)
            if lines % chunk_lines == 0:
                kept, kept_bytes = lines, position
        handle.truncate(kept_bytes)
    return kept


def resume_point(output: Path, resume: bool, translator: Translator) -> int:
    """Input lines already translated in `output` (0 for a new file); an error for a file that would be lost."""
    if not resume:
        if output.exists() and output.stat().st_size > 0:
            raise NmtkitError(f"{output} exists: give --resume to continue it, or remove it")
        return 0
    if translator.decode.nbest > 1:
        raise NmtkitError("--resume counts one output line per input line; it does not combine with --nbest")
    if not output.exists():
        return 0
    kept = keep_whole_chunks(output, translator.decode.buffer_size)
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
                      total: int | None = None, **stream_options) -> dict:
    """Translate `lines` into file `output` chunk by chunk (`translate_stream`, with `stream_options`), after the
    lines a previous run completed when `resume`; `total` input lines, if known, for the progress. Returns a
    summary: the output, the input lines translated into it, those of them this run translated."""
    done = resume_point(output, resume, translator)
    progress = Progress(total, done)
    read = 0

    def counted(source: Iterable[str]) -> Iterator[str]:
        nonlocal read  # translate_stream reads a chunk, then yields it: `read` is the input behind each yield
        for line in source:
            read += 1
            yield line

    with open(output, "ab") as handle:
        for text in translate_stream(translator, counted(islice(lines, done, None)), first_line=done + 1,
                                     **stream_options):
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())  # a chunk on disk survives a crash of the machine, not only of the process
            progress.advance(done + read - progress.done)
    progress.close()
    return {"output": str(output), "lines": done + read, "translated": read}
