"""recipes/finetune/run.sh end to end on a tiny model: the new data is encoded with the base model's vocabulary, the
run starts from its weights, both test sets are scored before and after, and the recipe runs again."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from letter_task import letter_lines, letter_task, train_tiny
from scripts import ROOT, recipe_path


def write_pairs(directory: Path, name: str, lines: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.es").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (directory / f"{name}.en").write_text("".join(line.upper() + "\n" for line in lines), encoding="utf-8")


def run_recipe(tmp_path: Path, base: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": recipe_path(os.environ['PATH']),
           "BASE": str(base), "BIBLE": str(tmp_path / "bible"), "DATA": str(tmp_path / "data"),
           "OUT": str(tmp_path / "out"), "THREADS": "1", "BEAM": "2", "OMP_NUM_THREADS": "1",
           "FINETUNE_ARGS": "--max-steps 6 --set train.batch_tokens=256 --set train.valid_every=3 "
                            "--set train.valid_bleu=false --set train.amp=none"}
    return subprocess.run(["bash", str(ROOT / "recipes" / "finetune" / "run.sh")], env=env, capture_output=True,
                          text=True, cwd=tmp_path)


def test_the_finetune_recipe_scores_both_test_sets_before_and_after(tmp_path: Path):
    base = train_tiny(letter_task(tmp_path, joint=True), tmp_path / "base", steps=30)
    raw = tmp_path / "data" / "raw"  # the messages as extract.py leaves them (stats.json last)
    lines = letter_lines(80, seed=5, longest=4)
    write_pairs(raw, "train", lines[:60])
    write_pairs(raw, "dev", lines[60:70])
    write_pairs(raw, "test", lines[70:])
    (raw / "stats.json").write_text("{}")
    write_pairs(tmp_path / "bible", "test", letter_lines(10, seed=6))
    first = run_recipe(tmp_path, base)
    assert first.returncode == 0, first.stderr
    rows = first.stdout.strip().splitlines()
    assert rows[0].startswith("| model | messages BLEU") and len(rows) == 4, first.stdout
    assert rows[2].startswith("| Bible model |") and rows[3].startswith("| fine-tuned on messages |")
    assert (tmp_path / "out" / "results.md").read_text(encoding="utf-8") == first.stdout
    manifest = json.loads((tmp_path / "data" / "prepared" / "manifest.json").read_text())
    assert manifest["filter"]["read"] == 60 and 0 < manifest["splits"]["train"]["sentences"] <= 60
    summary = json.loads((tmp_path / "out" / "train.summary.json").read_text())
    assert summary["steps"] == 6, summary
    for name in ("before", "after"):
        for test_set in ("messages", "bible"):
            assert len((tmp_path / "out" / f"{name}.{test_set}.hyp").read_text().splitlines()) == 10
    again = run_recipe(tmp_path, base)  # everything exists: nothing is redone, the table comes back
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
