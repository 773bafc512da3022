"""The align command's library side: align word-tokenized files, write links and heat-maps, score against gold."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Group
from torch import Tensor

from nmtkit.align.attention import word_attentions
from nmtkit.align.heatmap import plot_heatmaps, terminal_heatmaps
from nmtkit.align.links import (
    SYMMETRIZATIONS,
    Link,
    alignment_error,
    format_pharaoh,
    hard_links,
    read_pharaoh,
    source_links,
    symmetrize,
    transpose,
)
from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.data.corpus import read_lines
from nmtkit.data.files import refuse_onto_inputs, write_atomic
from nmtkit.decoding.ensemble import load_models
from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import pick_device, set_threads


@dataclass
class AlignOptions:
    """What `nmtkit align` is asked to do (see its --help)."""

    model: Path  # source -> target checkpoint
    src: Path  # source sentences, words separated by spaces
    tgt: Path  # target sentences, words separated by spaces
    reverse_model: Path | None = None  # target -> source checkpoint: align both directions and symmetrize
    symmetrize: str | None = None  # default: grow-diag-final-and with a reverse model, none without
    layer: int | None = None  # which attention (the model's `select_attention`)
    head: int | None = None
    threshold: float | None = None  # links with word attention >= this, not the argmax
    format: str = "pharaoh"  # or soft-json
    gold: Path | None = None  # gold links: the scores go to stdout instead of the alignments
    output: Path | None = None  # the alignments go here instead of stdout
    plot: Path | None = None  # directory for PNG and SVG heat-maps
    plot_count: int = 10
    terminal: bool = False  # heat-maps on stdout instead of the alignments
    device: str = "auto"
    threads: int = 0
    batch_tokens: int = 4000

    def __post_init__(self) -> None:
        if self.symmetrize is not None and self.symmetrize not in SYMMETRIZATIONS:
            raise NmtkitError(f"unknown --symmetrize {self.symmetrize!r}; use one of {', '.join(SYMMETRIZATIONS)}")
        if self.format not in ("pharaoh", "soft-json"):
            raise NmtkitError(f"unknown --format {self.format!r}; use pharaoh or soft-json")


@dataclass
class AlignResult:
    src_words: list[list[str]]
    tgt_words: list[list[str]]
    forward: list[Tensor]  # (target words, source words) per pair, from the source -> target model
    backward: list[Tensor] | None  # (source words, target words) per pair, from the target -> source model
    links: dict[str, list[set[Link]]]  # "forward", "backward", and the symmetrization's name
    final: str  # the key of `links` that is the output


def read_words(path: Path) -> list[list[str]]:
    return [line.split() for line in read_lines(path)]


def align_files(forward: LoadedModel, backward: LoadedModel | None, src: Path, tgt: Path, options: AlignOptions,
                device: torch.device) -> AlignResult:
    """Align word-tokenized files (whitespace tokens are words) with one model, or one per direction.

    Without a reverse model, `options.symmetrize` combines the argmax per target word with the argmax per source
    word of the same attention (`source_links`)."""
    src_words, tgt_words = read_words(src), read_words(tgt)
    if len(src_words) != len(tgt_words):
        raise NmtkitError(f"{src} has {len(src_words)} lines but {tgt} has {len(tgt_words)}")
    with forward.model.chosen_attention(options.layer, options.head):
        matrices = list(word_attentions(forward, src_words, tgt_words, device, options.batch_tokens))
    links = {"forward": [hard_links(matrix, options.threshold) for matrix in matrices]}
    reverse = None
    if backward is not None:
        with backward.model.chosen_attention(options.layer, options.head):
            reverse = list(word_attentions(backward, tgt_words, src_words, device, options.batch_tokens))
        links["backward"] = [transpose(hard_links(matrix, options.threshold)) for matrix in reverse]
    elif options.symmetrize is not None:
        links["backward"] = [source_links(matrix) for matrix in matrices]
    method = options.symmetrize or ("grow-diag-final-and" if backward is not None else None)
    if method is None:
        return AlignResult(src_words, tgt_words, matrices, reverse, links, "forward")
    links[method] = [symmetrize(f, b, method) for f, b in zip(links["forward"], links["backward"])]
    return AlignResult(src_words, tgt_words, matrices, reverse, links, method)


def soft_json(result: AlignResult, index: int) -> str:
    """One JSON line: the words and the (target words x source words) attention of the pair."""
    record = {"src": result.src_words[index], "tgt": result.tgt_words[index],
              "attention": [[round(value, 4) for value in row] for row in result.forward[index].tolist()]}
    if result.backward is not None:
        record["backward"] = [[round(value, 4) for value in row] for row in result.backward[index].tolist()]
    return json.dumps(record, ensure_ascii=False)


def evaluate_result(result: AlignResult, gold_path: Path) -> dict[str, dict[str, float]]:
    gold = read_pharaoh(gold_path)
    for number, ((_, possible), src, tgt) in enumerate(zip(gold, result.src_words, result.tgt_words), 1):
        outside = sorted(link for link in possible if link[0] >= len(src) or link[1] >= len(tgt))
        if outside:
            raise NmtkitError(f"{gold_path}:{number}: link {outside[0][0]}-{outside[0][1]} is outside the pair of "
                              f"{len(src)} source and {len(tgt)} target words (links are 0-based, source first)")
    return {name: alignment_error(links, gold).as_dict() for name, links in result.links.items()}


def alignment_lines(result: AlignResult, form: str) -> str:
    """The output alignments, one line per pair: Pharaoh links, or soft-json attention."""
    return "".join((soft_json(result, index) if form == "soft-json" else format_pharaoh(links)) + "\n"
                   for index, links in enumerate(result.links[result.final]))


def write_outputs(result: AlignResult, lines: str, output: Path | None, plot: Path | None, plot_count: int) -> None:
    """Alignment lines to `output` and heat-maps to `plot`, where given."""
    try:
        if output is not None:
            write_atomic(output, lines.encode("utf-8"))
        if plot is not None:
            plot_heatmaps(result.forward, result.src_words, result.tgt_words, result.links[result.final], plot,
                          plot_count)
    except OSError as error:
        where = error.filename or getattr(output, "name", output)
        raise NmtkitError(f"cannot write {where}: {error.strerror}") from error


def check_outputs(options: AlignOptions) -> None:
    """Fail before the work, not after it: no output is an input, the output's directory exists and the plot
    directory can be made."""
    output, plot = options.output, options.plot
    refuse_onto_inputs([("--output", output), ("--plot", plot)],
                       [("--model", options.model), ("--src", options.src), ("--tgt", options.tgt),
                        ("--reverse-model", options.reverse_model), ("--gold", options.gold)])
    if output is not None and not output.parent.is_dir():
        raise NmtkitError(f"cannot write {output}: {output.parent} is not a directory")
    if plot is not None:
        try:
            plot.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise NmtkitError(f"cannot create plot directory {plot}: {error.strerror}") from error


@dataclass
class AlignOutput:
    """What `nmtkit align` shows on stdout: the terminal heat-maps, then the text (the scores as one JSON line
    with a gold standard, else the alignment lines unless they went to a file or heat-maps took their place)."""

    result: AlignResult
    text: str
    heatmaps: Group | None = None
    scores: dict[str, dict[str, float]] | None = None


def run(options: AlignOptions) -> AlignOutput:
    """`nmtkit align`: load the model(s), align the files, write the alignments to `options.output` and the
    heat-maps to `options.plot`, score against `options.gold`; returns what goes to stdout."""
    check_outputs(options)
    set_threads(options.threads)
    device = pick_device(options.device)
    forward = load_models([options.model], device)
    backward = load_models([options.reverse_model], device) if options.reverse_model else None
    result = align_files(forward, backward, options.src, options.tgt, options, device)
    lines = alignment_lines(result, options.format)
    write_outputs(result, lines, options.output, options.plot, options.plot_count)
    heatmaps = terminal_heatmaps(result.forward, result.src_words, result.tgt_words) if options.terminal else None
    if options.gold:
        scores = evaluate_result(result, options.gold)
        return AlignOutput(result, json.dumps(scores) + "\n", heatmaps, scores)
    return AlignOutput(result, "" if options.output or options.terminal else lines, heatmaps)
