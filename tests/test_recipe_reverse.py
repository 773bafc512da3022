"""recipes/reverse/run.sh runs again, with the same and with another MODEL, on the data it prepared the first time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from scripts import ROOT, recipe_path


def run_recipe(tmp_path: Path, model: str) -> subprocess.CompletedProcess:
    config = tmp_path / "quick.yaml"  # a few updates: this tests the script, not the learning
    config.write_text("train:\n  max_steps: 20\n  valid_every: 20\n  batch_tokens: 512\n  threads: 1\n"
                      "decode:\n  beam: 1\n", encoding="utf-8")
    env = {**os.environ, "PATH": recipe_path(os.environ['PATH']),
           "MODEL": model, "CONFIG": str(config), "DATA": str(tmp_path / "data"), "OUT": str(tmp_path / "runs" / model),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run(["bash", str(ROOT / "recipes" / "reverse" / "run.sh")], env=env, capture_output=True,
                          text=True, cwd=tmp_path)


def test_the_reverse_recipe_runs_twice_and_with_another_model(tmp_path: Path):
    first = run_recipe(tmp_path, "transformer")
    assert first.returncode == 0, first.stderr
    manifest = (tmp_path / "data" / "prepared" / "manifest.json").stat().st_mtime_ns
    for model in ("transformer", "luong"):
        again = run_recipe(tmp_path, model)
        assert again.returncode == 0, again.stderr
        assert "exact match" in again.stdout and "BLEU" in again.stdout
        assert (tmp_path / "runs" / model / "test.hyp").exists()
    assert (tmp_path / "data" / "prepared" / "manifest.json").stat().st_mtime_ns == manifest  # prepared once
