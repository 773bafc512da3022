"""benchmarks/new_shapes.py on a tiny model: a row per precision, new shapes and the same shapes again."""

from __future__ import annotations

import re

from scripts import load_script

CONFIG = "model: {name: transformer, encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn: 32}\n"


def test_each_precision_is_timed_on_new_and_repeated_shapes(tmp_path, capsys):
    new_shapes = load_script("benchmarks/new_shapes.py", "new_shapes")
    shapes = new_shapes.random_shapes(5, 300, seed=1)
    assert len(set(shapes)) == 5 and all(sentences * target <= 300 for sentences, _, target in shapes)
    config = tmp_path / "tiny.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    assert new_shapes.main(["--config", str(config), "--device", "cpu", "--batches", "3", "--tokens", "64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "device cpu"
    rows = [re.fullmatch(r"(float32|bf16): 3 new shapes: median [\d.]+ ms, max [\d.]+; "
                         r"the same shapes again: median [\d.]+ ms, max [\d.]+", line) for line in lines[1:]]
    assert rows and all(rows) and rows[0].group(1) == "float32"
