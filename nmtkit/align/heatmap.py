"""Heat-maps of word attention: images through matplotlib, and shaded tables in the terminal through rich."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text
from torch import Tensor

from nmtkit.align.links import Link


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


def plot_heatmaps(matrices: list[Tensor], src_words: list[list[str]], tgt_words: list[list[str]],
                  links: list[set[Link]], directory: Path, count: int) -> list[Path]:
    """PNG and SVG heat-maps of the first `count` pairs, named by 1-based line number (none for a pair left
    unaligned: it has no attention)."""
    written = []
    for index in range(min(count, len(matrices))):
        if not shown(matrices[index], src_words[index], tgt_words[index]):
            continue
        for suffix in ("png", "svg"):
            path = directory / f"{index + 1:05d}.{suffix}"
            plot_heatmap(matrices[index], src_words[index], tgt_words[index], path, links[index])
            written.append(path)
    return written


SHADES = " ░▒▓█"


def terminal_heatmap(matrix: Tensor, src_words: list[str], tgt_words: list[str]) -> Group:
    """A compact rich Table: one row per target word, one shaded cell per source word (numbered in the header)."""
    table = Table(box=None, padding=(0, 0), show_header=True, show_edge=False)
    table.add_column("", justify="right", no_wrap=True)
    for index in range(len(src_words)):
        table.add_column(str(index % 10), justify="center", width=1)
    for target, word in enumerate(tgt_words):
        shades = [SHADES[min(int(value * len(SHADES)), len(SHADES) - 1)] for value in matrix[target].tolist()]
        table.add_row(Text(f"{target} {word} "), *shades)
    legend = Text(" ".join(f"{index}:{word}" for index, word in enumerate(src_words)), style="dim")
    return Group(table, legend)


def terminal_heatmaps(matrices: list[Tensor], src_words: list[list[str]], tgt_words: list[list[str]]) -> Group:
    """`terminal_heatmap` of every pair but those left unaligned, one after the other."""
    return Group(*(terminal_heatmap(matrix, src, tgt) for matrix, src, tgt in zip(matrices, src_words, tgt_words)
                   if shown(matrix, src, tgt)))


def shown(matrix: Tensor, src_words: list[str], tgt_words: list[str]) -> bool:
    """Whether a pair has a heat-map: its attention covers its words (a pair left unaligned has none)."""
    return tuple(matrix.shape) == (len(tgt_words), len(src_words))
