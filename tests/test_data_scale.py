"""benchmarks/data_scale.py's pure parts: sizes, the synthetic corpus (deterministic, distinct lines, both sides),
the corpora and their shards, and the tokens/s read from a run's metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scripts import load_script

scale = load_script("benchmarks/data_scale.py", "data_scale")


@pytest.fixture
def pool(monkeypatch) -> tuple[list[str], list[str]]:
    monkeypatch.setattr(scale, "POOL", 200)
    monkeypatch.setattr(scale, "VOCAB", 1000)
    return scale.half_pool(np.random.default_rng(scale.SEED))


def test_sizes_are_read_with_their_suffix():
    assert [scale.parse_size(text) for text in ("100k", "1M", "2.5M", "30000")] == [100_000, 1_000_000, 2_500_000,
                                                                                     30_000]


def test_the_corpus_is_the_same_for_the_seed_and_its_lines_join_distinct_halves(pool, tmp_path: Path):
    scale.write_corpus(tmp_path / "a.tsv", 0, 5_000, pool)
    scale.write_corpus(tmp_path / "b.tsv", 100, 50, pool)
    lines = (tmp_path / "a.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5_000 and all(line.count("\t") == 1 for line in lines)
    assert len(set(lines)) > 4_900  # halves of one or two frequent words may repeat; pairs of halves do not
    assert (tmp_path / "b.tsv").read_text(encoding="utf-8").splitlines() == lines[100:150]
    assert pool == scale.half_pool(np.random.default_rng(scale.SEED))
    lengths = [len(line.split("\t")[0].split()) for line in lines]
    assert 15 < np.median(lengths) < 35 and max(lengths) > 2 * np.median(lengths)


def test_shards_list_one_file_as_corpora_weighed_as_one():
    entries, weights = scale.corpora_layout(1_000, 1)
    assert [(entry["name"], entry["count"]) for entry in entries] == [("clean", 100), ("crawled", 900)]
    entries, weights = scale.corpora_layout(1_000, 3)
    assert {entry["tsv"] for entry in entries[1:]} == {"crawled.tsv"} and len(entries) == 4
    assert sum(weights.values()) == pytest.approx(1.0) and weights["clean"] == 0.3


def test_wall_tokens_per_second_leaves_out_the_first_tenth(tmp_path: Path):
    records = [{"step": step, "tgt_tokens": 1000, "elapsed": 10.0 + step * (5.0 if step > 2 else 0.1)}
               for step in range(1, 21)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    assert scale.wall_tokens_per_second(tmp_path / "metrics.jsonl") == pytest.approx(18_000 / (110.0 - 10.2))
    row = scale.format_row(scale.Row(pairs=30_000, prepare_seconds=10.0, wall_tps=500.0), 1000.0)
    assert row.split("|")[2].strip() == "3,000" and row.split("|")[8].strip() == "0.50" and "-" in row
