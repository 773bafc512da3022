"""The translate command's one library call: the files it is given checked (no output onto an input), the model
loaded, then its lines translated to stdout, or into an --output file (`output.py`, resumable)."""

from __future__ import annotations

import sys
from pathlib import Path

from nmtkit.config.sections import MAX_LINE_BYTES
from nmtkit.data.files import refuse_onto_inputs, refuse_stdout_onto
from nmtkit.decoding.inputs import check_format, open_lines
from nmtkit.errors import NmtkitError
from nmtkit.translate.output import count_lines, record_of, run_settings, translate_to_file
from nmtkit.translate.stream import translate_stream
from nmtkit.translate.translator import Translator


def translate_command(models: list[Path], input: Path | None, output: Path | None, decode: dict, resume: bool = False,
                      device: str = "auto", threads: int = 0, average: int = 0, inter_threads: int = 0,
                      max_line_bytes: int = MAX_LINE_BYTES, **stream_options) -> dict | None:
    """Translate `input` (None: stdin) with `models` (`Translator.load`, `decode` settings over the model's own)
    to stdout, or into file `output` (`translate_to_file`, after its whole chunks a previous run wrote when
    `resume`), whose summary it returns; `stream_options` are `translate_stream`'s."""
    check_format(stream_options.get("input_format", "text"))
    if resume and output is None:
        raise NmtkitError("--resume continues an --output file; give --output")
    inputs = [("--input", input)] + [("--model", path) for path in models]
    if output is None:
        refuse_stdout_onto(inputs)
    else:
        refuse_onto_inputs([("--output", output), ("--output's record", record_of(output))], inputs)
    translator = Translator.load(models, device, threads, average, inter_threads, **decode)
    if stream_options.get("alignment") and translator.decode.nbest > 1:
        raise NmtkitError("--alignment prints the links of the best translation; it does not combine with --nbest")
    stream_options["source"] = "<stdin>" if input is None else str(input)
    if output is None:
        for text in translate_stream(translator, open_lines(input, max_line_bytes), **stream_options):
            sys.stdout.write(text)
            sys.stdout.flush()
        return None
    total = count_lines(input) if input is not None else None
    settings = run_settings(translator, models, average, stream_options)
    return translate_to_file(translator, open_lines(input, max_line_bytes), output, resume, total, settings,
                             **stream_options)
