"""Word alignments from attention: subword -> word attention, hard links, symmetrization, AER, heat-maps.

A model translating source to target is teacher-forced on each sentence pair; its cross-attention row for a
target subword is a distribution over source subwords. Word attention sums a source word's subwords and
averages a target word's subwords. Hard links are the argmax per target word (or every link above a
threshold); two models, one per direction, are combined by intersection, union or grow-diag-final-and
(Koehn et al. 2003). Links are (source index, target index) pairs, 0-based, written `i-j` (Pharaoh format).

Evaluation follows Och & Ney (2003), Section 5: with sure links S, possible links P (S included) and
predicted links A, precision = |A & P| / |A|, recall = |A & S| / |S|, AER = 1 - (|A & S| + |A & P|) / (|A| + |S|).
"""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

import nmtkit.models  # noqa: F401  (registers the built-in models, for `attention_models`)
from nmtkit.checkpoint import LoadedModel
from nmtkit.data.dataset import encode_sources, pad_sequences, token_batches
from nmtkit.data.subword import BOS
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder
from nmtkit.registry import MODELS

log = logging.getLogger(__name__)

Link = tuple[int, int]  # (source word, target word)
SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and")


# --- subwords -> words ----------------------------------------------------------------------------------------


def piece_words(spans: list[tuple[int, int]], words: list[str]) -> list[int]:
    """The word each subword piece belongs to, from the pieces' UTF-8 byte spans in `" ".join(words)` (see
    `Subword.spans`: offsets into the text before normalization, so they hold whatever the normalization does).

    A piece that starts on the space before a word (SentencePiece's "▁") belongs to that word; a piece spanning two
    words to the first.
    """
    if not words:
        return [0] * len(spans)
    ends, position = [], 0
    for word in words:
        position += len(word.encode("utf-8"))
        ends.append(position)
        position += 1  # the space that joins it to the next word
    return [min(bisect.bisect_right(ends, begin), len(words) - 1) for begin, _ in spans]


def word_attention(attention: Tensor, src_owner: list[int], tgt_owner: list[int],
                   src_words: int, tgt_words: int) -> Tensor:
    """(T, S) subword attention -> (target words, source words): sum over source subwords, mean over target ones.

    Rows are renormalised over the real source words, so the source EOS column (beyond `src_owner`) drops out.
    """
    attention = attention[: len(tgt_owner), : len(src_owner)].float()  # (T, S) without EOS row and column
    by_source = attention.new_zeros(len(tgt_owner), src_words).index_add_(
        1, torch.tensor(src_owner), attention)  # (T, Ws)
    summed = by_source.new_zeros(tgt_words, src_words).index_add_(0, torch.tensor(tgt_owner), by_source)
    counts = torch.bincount(torch.tensor(tgt_owner), minlength=tgt_words).clamp(min=1).unsqueeze(1)
    mean = summed / counts  # (Wt, Ws)
    return mean / mean.sum(dim=1, keepdim=True).clamp(min=1e-9)


# --- hard alignments and symmetrization -------------------------------------------------------------------------


def hard_links(matrix: Tensor, threshold: float | None = None) -> set[Link]:
    """(target words, source words) attention -> links: argmax per target word, or all weights >= threshold."""
    if matrix.numel() == 0:
        return set()
    if threshold is None:  # a row without attention (a pair left unaligned) links nothing
        best = matrix.max(dim=1)
        return {(source, target) for target, (value, source) in enumerate(zip(best.values.tolist(),
                                                                              best.indices.tolist())) if value > 0}
    return {(int(source), int(target)) for target, source in (matrix >= threshold).nonzero().tolist()}


def source_links(matrix: Tensor) -> set[Link]:
    """The argmax per source word of the same (target words, source words) attention: a second direction from
    one model, to symmetrize with `hard_links` when no target -> source model is at hand."""
    if matrix.numel() == 0:
        return set()
    best = matrix.max(dim=0)
    return {(source, target) for source, (value, target) in enumerate(zip(best.values.tolist(),
                                                                          best.indices.tolist())) if value > 0}


def transpose(links: Iterable[Link]) -> set[Link]:
    """Links of the other direction, (target, source) -> (source, target)."""
    return {(j, i) for i, j in links}


def grow_diag_final_and(forward: set[Link], backward: set[Link]) -> set[Link]:
    """Koehn et al. (2003)'s heuristic as in Moses: start from the intersection, grow into diagonal neighbours
    in the union that cover an unaligned word, then add union links whose words are both unaligned."""
    union, links = forward | backward, set(forward & backward)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                candidate = (i + di, j + dj)
                if candidate in union and candidate not in links and _covers_unaligned(links, candidate, either=True):
                    links.add(candidate)
                    grown = True
    for direction in (forward, backward):
        for candidate in sorted(direction):
            if candidate not in links and _covers_unaligned(links, candidate, either=False):
                links.add(candidate)
    return links


def _covers_unaligned(links: set[Link], candidate: Link, either: bool) -> bool:
    source_free = all(i != candidate[0] for i, _ in links)
    target_free = all(j != candidate[1] for _, j in links)
    return (source_free or target_free) if either else (source_free and target_free)


def symmetrize(forward: set[Link], backward: set[Link], method: str) -> set[Link]:
    """Combine the links of two directions, both given as (source, target) pairs."""
    if method == "intersection":
        return forward & backward
    if method == "union":
        return forward | backward
    if method == "grow-diag-final-and":
        return grow_diag_final_and(forward, backward)
    raise NmtkitError(f"unknown symmetrization {method!r}; use one of {', '.join(SYMMETRIZATIONS)}")


# --- Pharaoh format and AER -------------------------------------------------------------------------------------


def format_pharaoh(links: Iterable[Link]) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_pharaoh(line: str, where: str = "") -> tuple[set[Link], set[Link]]:
    """`i-j` (sure) and `ipj` (possible) links -> (sure, possible); possible includes sure, as AER needs."""
    sure, possible = set(), set()
    for token in line.split():
        separator = "-" if "-" in token else "p"
        left, _, right = token.partition(separator)
        if not (left.isdigit() and right.isdigit()):
            raise NmtkitError(f"{where}: cannot read alignment link {token!r}; write i-j (sure) or ipj (possible)")
        link = (int(left), int(right))
        possible.add(link)
        if separator == "-":
            sure.add(link)
    return sure, possible


def read_pharaoh(path: str | Path) -> list[tuple[set[Link], set[Link]]]:
    from nmtkit.data.corpus import read_lines

    return [parse_pharaoh(line, f"{path}:{number}") for number, line in enumerate(read_lines(path), 1)]


@dataclass
class AlignmentScores:
    precision: float
    recall: float
    aer: float
    links: int

    def as_dict(self) -> dict[str, float]:
        return {"precision": round(self.precision, 4), "recall": round(self.recall, 4), "aer": round(self.aer, 4),
                "links": self.links}


def alignment_error(predicted: list[set[Link]], gold: list[tuple[set[Link], set[Link]]]) -> AlignmentScores:
    """Corpus-level precision, recall and AER (Och & Ney 2003), counts summed over sentence pairs."""
    if len(predicted) != len(gold):
        raise NmtkitError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones; they must pair up")
    found = sure = with_sure = with_possible = 0
    for links, (sure_links, possible_links) in zip(predicted, gold):
        found, sure = found + len(links), sure + len(sure_links)
        with_sure += len(links & sure_links)
        with_possible += len(links & (possible_links | sure_links))
    precision = with_possible / found if found else 0.0
    recall = with_sure / sure if sure else 0.0
    aer = 1.0 - (with_sure + with_possible) / (found + sure) if found + sure else 0.0
    return AlignmentScores(precision, recall, aer, found)


# --- attention from a model -------------------------------------------------------------------------------------


def attention_models() -> list[str]:
    """The registered models that return cross-attention."""
    return sorted(name for name, entry in MODELS.items() if entry.cls.has_attention)


@torch.no_grad()
def teacher_forced_attention(model: EncoderDecoder, sources: list[list[int]], targets: list[list[int]],
                             device: torch.device) -> list[Tensor]:
    """Cross-attention (T, S) of each pair, T = target subwords + EOS row, S = source subwords + EOS column."""
    src, src_mask = encode_sources(sources)
    tgt_in = pad_sequences(list(targets), [BOS], [])
    _, attention = model(src.to(device), src_mask.to(device), tgt_in.to(device), need_attention=True)
    if attention is None:
        raise NmtkitError(f"{type(model).__name__} has no attention; align needs an attention model "
                          f"({', '.join(attention_models())})")
    return [attention[row, : len(target) + 1, : len(source) + 1].cpu()
            for row, (source, target) in enumerate(zip(sources, targets))]


def word_attentions(loaded: LoadedModel, src_lines: list[list[str]], tgt_lines: list[list[str]],
                    device: torch.device, batch_tokens: int = 4000) -> Iterator[Tensor]:
    """(target words, source words) attention for each pair of word lists, in input order; a pair with an empty
    side gets an empty matrix."""
    src_texts, tgt_texts = [" ".join(words) for words in src_lines], [" ".join(words) for words in tgt_lines]
    src_spans, tgt_spans = loaded.src_subword.spans(src_texts), loaded.tgt_subword.spans(tgt_texts)
    src_ids, tgt_ids = loaded.src_subword.encode(src_texts), loaded.tgt_subword.encode(tgt_texts)
    limit = (loaded.model.max_length() or 1 << 62) - 1  # EOS and BOS take a position
    todo = []
    for index, (source, target) in enumerate(zip(src_ids, tgt_ids)):
        if max(len(source), len(target)) > limit:
            log.warning("line %d: %d and %d subwords, more than the model's %d positions; left unaligned",
                        index + 1, len(source), len(target), limit + 1)
        elif source and target:
            todo.append(index)
    results = {index: torch.zeros(len(tgt_lines[index]), len(src_lines[index])) for index in range(len(src_lines))}
    longest = [max(len(src_ids[index]), len(tgt_ids[index])) for index in todo]
    for batch in token_batches(longest, longest, batch_tokens):
        rows = [todo[position] for position in batch]
        attentions = teacher_forced_attention(loaded.model, [src_ids[i] for i in rows], [tgt_ids[i] for i in rows],
                                              device)
        for index, attention in zip(rows, attentions):
            results[index] = word_attention(attention, piece_words(src_spans[index], src_lines[index]),
                                            piece_words(tgt_spans[index], tgt_lines[index]),
                                            len(src_lines[index]), len(tgt_lines[index]))
    return (results[index] for index in range(len(src_lines)))


# --- the align command ------------------------------------------------------------------------------------------


@dataclass
class AlignOptions:
    layer: int | None = None
    head: int | None = None
    threshold: float | None = None
    symmetrize: str | None = None  # default: grow-diag-final-and with a reverse model, none without
    batch_tokens: int = 4000


@dataclass
class AlignResult:
    src_words: list[list[str]]
    tgt_words: list[list[str]]
    forward: list[Tensor]  # (target words, source words) per pair, from the source -> target model
    backward: list[Tensor] | None  # (source words, target words) per pair, from the target -> source model
    links: dict[str, list[set[Link]]]  # "forward", "backward", and the symmetrization's name
    final: str  # the key of `links` that is the output


def read_words(path: Path) -> list[list[str]]:
    from nmtkit.data.corpus import read_lines

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


# --- heat-maps --------------------------------------------------------------------------------------------------


def plot_heatmap(matrix: Tensor, src_words: list[str], tgt_words: list[str], path: Path,
                 links: set[Link] | None = None) -> None:
    """One image (format from the suffix: .png, .svg, .pdf) with source words on x and target words on y."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cell = 0.22  # inches per word: 50 words still get a readable 8-point label
    width, height = 2.0 + cell * len(src_words), 1.5 + cell * len(tgt_words)
    figure, axes = plt.subplots(figsize=(max(width, 3.0), max(height, 2.5)))
    axes.imshow(matrix.numpy(), cmap="Greys", vmin=0.0, vmax=1.0, aspect="equal")
    axes.set_xticks(range(len(src_words)), src_words, rotation=90, fontsize=8)
    axes.set_yticks(range(len(tgt_words)), tgt_words, fontsize=8)
    axes.xaxis.tick_top()
    for i, j in links or ():
        axes.add_patch(plt.Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=0.8))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_result(result: AlignResult, directory: Path, count: int) -> list[Path]:
    """PNG and SVG heat-maps of the first `count` pairs, named by 1-based line number."""
    written = []
    for index in range(min(count, len(result.forward))):
        for suffix in ("png", "svg"):
            path = directory / f"{index + 1:05d}.{suffix}"
            plot_heatmap(result.forward[index], result.src_words[index], result.tgt_words[index], path,
                         result.links[result.final][index])
            written.append(path)
    return written


SHADES = " ░▒▓█"


def terminal_heatmap(matrix: Tensor, src_words: list[str], tgt_words: list[str]):
    """A compact rich Table: one row per target word, one shaded cell per source word (numbered in the header)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, padding=(0, 0), show_header=True, show_edge=False)
    table.add_column("", justify="right", no_wrap=True)
    for index in range(len(src_words)):
        table.add_column(str(index % 10), justify="center", width=1)
    for target, word in enumerate(tgt_words):
        shades = [SHADES[min(int(value * len(SHADES)), len(SHADES) - 1)] for value in matrix[target].tolist()]
        table.add_row(Text(f"{target} {word} "), *shades)
    legend = Text(" ".join(f"{index}:{word}" for index, word in enumerate(src_words)), style="dim")
    from rich.console import Group

    return Group(table, legend)


def print_terminal(result: AlignResult) -> None:
    from rich.console import Console

    console = Console()
    for index, matrix in enumerate(result.forward):
        console.print(terminal_heatmap(matrix, result.src_words[index], result.tgt_words[index]))


def write_outputs(result: AlignResult, output, form: str, plot: Path | None, plot_count: int) -> None:
    """Alignment lines (Pharaoh, or soft-json) to a path or an open text stream, and heat-maps to `plot`."""
    lines = (soft_json(result, index) if form == "soft-json" else format_pharaoh(links)
             for index, links in enumerate(result.links[result.final]))
    try:
        if isinstance(output, Path):
            output.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        elif output is not None:
            output.writelines(line + "\n" for line in lines)
        if plot is not None:
            plot_result(result, plot, plot_count)
    except OSError as error:
        where = error.filename or getattr(output, "name", output)
        raise NmtkitError(f"cannot write {where}: {error.strerror}") from error


def check_outputs(output: Path | None, plot: Path | None) -> None:
    """Fail before the work, not after it: the output's directory exists and the plot directory can be made."""
    if output is not None and not output.parent.is_dir():
        raise NmtkitError(f"cannot write {output}: {output.parent} is not a directory")
    if plot is not None:
        try:
            plot.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise NmtkitError(f"cannot create plot directory {plot}: {error.strerror}") from error


def align_translations(loaded: LoadedModel, sources: list[str], hypotheses: list[str],
                       device: torch.device) -> list[set[Link]]:
    """Argmax links between each source line and its translation (whitespace words), by teacher forcing."""
    with loaded.model.chosen_attention(None, None):
        matrices = word_attentions(loaded, [source.split() for source in sources],
                                   [hypothesis.split() for hypothesis in hypotheses], device)
        return [hard_links(matrix) for matrix in matrices]
