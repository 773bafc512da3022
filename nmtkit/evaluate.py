"""`nmtkit evaluate`: score a hypothesis file against one or more reference files."""

from __future__ import annotations

from pathlib import Path

from nmtkit.data.corpus import decode_line, read_lines
from nmtkit.errors import NmtkitError
from nmtkit.metrics.sacre import score_corpus


def read_stream_lines(stream) -> list[str]:
    """Lines of a binary stream (stdin), validated like files."""
    data = stream.read()
    if data.endswith(b"\n"):
        data = data[:-1]
    return [decode_line(raw, "<stdin>", number) for number, raw in enumerate(data.split(b"\n"), 1)] if data else []


def evaluate_files(hypotheses: list[str], hyp_name: str, refs: list[Path], metrics: list[str],
                   lowercase: bool = False, tokenize: str | None = None) -> dict[str, dict]:
    """Check that every reference has one line per hypothesis, then score."""
    if not refs:
        raise NmtkitError("evaluate needs at least one --ref file")
    references = []
    for path in refs:
        lines = read_lines(path)
        if len(lines) != len(hypotheses):
            raise NmtkitError(f"{path} has {len(lines)} lines but {hyp_name} has {len(hypotheses)}")
        references.append(lines)
    return score_corpus(hypotheses, references, metrics, lowercase, tokenize)
