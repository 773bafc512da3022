"""nmtkit.align.heatmap: heat-map images and terminal heat-maps."""

from __future__ import annotations

import pytest
import torch
from rich.console import Console

from nmtkit.align.heatmap import plot_heatmap, terminal_heatmap

# --- heat-maps --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml")])
def test_plot_heatmap_writes_an_image(tmp_path, suffix, magic):
    matrix = torch.softmax(torch.randn(4, 5), dim=-1)
    path = tmp_path / f"pair.{suffix}"
    plot_heatmap(matrix, ["el", "primer", "tratado", ",", "oh"], ["The", "former", "treatise", ","], path,
                 {(0, 0), (1, 1)})
    assert path.read_bytes().startswith(magic)
    if suffix == "png":
        from PIL import Image

        with Image.open(path) as image:
            image.verify()


def test_terminal_heatmap_shows_words_and_shades():
    console = Console(record=True, width=100, color_system=None)
    console.print(terminal_heatmap(torch.tensor([[0.0, 1.0], [0.5, 0.5]]), ["uno", "dos"], ["two", "one"]))
    text = console.export_text()
    assert "two" in text and "0:uno" in text and "1:dos" in text and "█" in text
