"""recipes/pretrained/run.sh end to end on a tiny model: a MarianMTModel built and briefly trained with transformers,
imported, translated greedily exactly as transformers' generate translates, fine-tuned, exported, scored; and the
recipe runs again without redoing its steps."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from hf_models import SOURCE, TARGET
from scripts import ROOT, recipe_path


def write_pairs(directory: Path, name: str, sources: list[str], targets: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.en").write_text("".join(line + "\n" for line in sources), encoding="utf-8")
    (directory / f"{name}.es").write_text("".join(line + "\n" for line in targets), encoding="utf-8")


def run_recipe(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": recipe_path(os.environ["PATH"]), "DATA": str(tmp_path / "data"),
           "OUT": str(tmp_path / "out"), "THREADS": "1", "BEAM": "2", "HF_STEPS": "3", "OMP_NUM_THREADS": "1",
           "BUILD_ARGS": "--vocab 40 --d-model 32 --layers 1 --heads 2 --batch 4",
           "PREPARE_ARGS": "--set data.langid=false --set data.dedup=false",  # German text, not Spanish
           "FINETUNE_ARGS": "--max-steps 4 --set train.batch_tokens=128 --set train.valid_every=2 "
                            "--set train.valid_bleu=false --set train.amp=none"}
    return subprocess.run(["bash", str(ROOT / "recipes" / "pretrained" / "run.sh")], env=env, capture_output=True,
                          text=True, cwd=tmp_path)


def test_the_pretrained_recipe_imports_fine_tunes_and_exports(tmp_path: Path):
    raw = tmp_path / "data" / "raw"  # the messages as extract.py leaves them (stats.json last)
    write_pairs(raw, "train", SOURCE, TARGET)
    write_pairs(raw, "dev", SOURCE[:3], TARGET[:3])
    write_pairs(raw, "test", SOURCE[:6], TARGET[:6])
    (raw / "stats.json").write_text("{}")
    first = run_recipe(tmp_path)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "out"
    assert "greedy: 6 of 6 test lines identical" in first.stdout
    for row in ("imported (transformers-trained)", "fine-tuned with nmtkit", "fine-tuned, CTranslate2 int8"):
        assert f"| {row} |" in first.stdout
    assert json.loads((out / "build_hf.json").read_text())["steps"] == 3
    assert json.loads((out / "train.summary.json").read_text())["steps"] == 4
    assert json.loads((out / "export.json").read_text())["quantization"] == "int8"
    stamps = {path: path.stat().st_mtime_ns for path in (out / "imported" / "model.pt", out / "hf.greedy.hyp",
                                                         out / "ct2" / "model.bin")}
    second = run_recipe(tmp_path)
    assert second.returncode == 0, second.stderr
    assert {path: path.stat().st_mtime_ns for path in stamps} == stamps
