"""recipes/bible/zoo.sh (runs side by side, failures) and report.py --combine, with stand-ins for the real runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from scripts import ROOT, load_script, recipe_path

report = load_script("recipes/bible/report.py", "bible_report")

# stands in for recipes/bible/run.sh: logs start and end times, fails for MODEL=bad
FAKE_RUN = """#!/usr/bin/env bash
set -euo pipefail
[ "${1:-}" = data ] && { echo data >> "$ROOT/calls"; exit 0; }
echo "start $MODEL $MAX_TIME $(date +%s.%N)" >> "$ROOT/calls"
sleep 1
[ "$MODEL" = bad ] && { echo "boom" >&2; exit 3; }
mkdir -p "$OUT"
echo "end $MODEL $(date +%s.%N)" >> "$ROOT/calls"
"""
FAKE_REPORT = 'import sys; print("combined", *sys.argv[2:])\n'


def run_zoo(tmp_path: Path, models: str, jobs: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    shutil.copy(ROOT / "recipes/bible/zoo.sh", recipe / "zoo.sh")
    (recipe / "run.sh").write_text(FAKE_RUN)
    (recipe / "report.py").write_text(FAKE_REPORT)
    root = tmp_path / "zoo"
    path = recipe_path(os.environ['PATH'])  # zoo.sh calls `python`
    env = {"PATH": path, "MODELS": models, "JOBS": jobs, "ROOT": str(root), "ZOO_TIME": "1m"}
    done = subprocess.run(["bash", str(recipe / "zoo.sh")], env=env, capture_output=True, text=True, timeout=60)
    calls = (root / "calls").read_text().split("\n") if (root / "calls").exists() else []
    return done, [line.split() for line in calls if line]


def test_zoo_runs_jobs_models_at_a_time_and_reports_all(tmp_path):
    done, calls = run_zoo(tmp_path, "a b c", "2")
    assert done.returncode == 0, done.stderr
    assert calls[0] == ["data"]
    times = {(kind, model): float(t) for kind, model, *_, t in calls[1:]}
    assert sorted(times) == [(kind, m) for kind in ("end", "start") for m in "abc"]
    assert {c[2] for c in calls[1:] if c[0] == "start"} == {"1m"}  # ZOO_TIME reaches every run
    assert times["start", "b"] < times["end", "a"]  # a and b ran side by side
    assert times["start", "c"] >= min(times["end", "a"], times["end", "b"])  # c waited for a slot
    assert done.stdout.split() == ["combined", *(str(tmp_path / "zoo" / m) for m in "abc")]


def test_zoo_one_job_runs_models_in_turn(tmp_path):
    done, calls = run_zoo(tmp_path, "a b", "1")
    assert done.returncode == 0, done.stderr
    assert [c[0] + c[1] for c in calls[1:]] == ["starta", "enda", "startb", "endb"]


def test_zoo_failed_model_fails_the_run_but_not_the_others(tmp_path):
    done, calls = run_zoo(tmp_path, "bad a", "2")
    assert done.returncode != 0
    assert "error: bad failed, see" in done.stderr
    assert ["end", "a"] in [c[:2] for c in calls]
    assert "boom" in (tmp_path / "zoo" / "bad.log").read_text()
    assert done.stdout.startswith("combined")  # the table of the runs that finished is still printed


def test_zoo_rejects_bad_jobs(tmp_path):
    done, calls = run_zoo(tmp_path, "a", "two")
    assert done.returncode != 0 and "JOBS must be a positive integer" in done.stderr and calls == []


def write_run(run: Path, model: str, bleu: float, sys_len: int, aer: float | None) -> None:
    run.mkdir()
    results = {"model": model, "parameters": 7_578_624, "train_steps": 4417, "train_epochs": 4, "train_seconds": 1800.5,
               "train_tgt_tokens_per_s": 2419.4, "bleu_kjv": bleu, "bleu_kjv_web": bleu + 2, "chrf_kjv": 47.1,
               "translate_sentences_per_s": 26.7, "beam": 5, "bleu_signature": "nrefs:1|sig"}
    (run / "results.json").write_text(json.dumps(results))
    (run / "test.kjv.json").write_text(json.dumps({"bleu": {"score": bleu, "sys_len": sys_len, "ref_len": 1000}}))
    (run / "train.summary.json").write_text(json.dumps({"best": 29.3}))
    (run / "test.hyp").write_text("a b c a b c a b c\nx y z\n" if aer is None else "a b c d\n")
    (run / "test.align.json").write_text("" if aer is None else json.dumps({"forward": {"aer": aer}}))


def test_combine_adds_length_ratio_best_dev_and_aer(tmp_path):
    write_run(tmp_path / "t", "transformer", 25.2, 1050, 0.5932)
    write_run(tmp_path / "s", "seq2seq", 10.0, 900, None)
    lines = report.combine([tmp_path / "t", tmp_path / "s", tmp_path / "missing"]).splitlines()
    assert lines[0].endswith("| length ratio | repeated trigrams | best dev | AER |") and lines[1].count("---") == 14
    assert lines[2].startswith("| transformer | 7.6M | 4417 |") and lines[2].endswith("| 1.050 | 0 | 29.3 | 0.593 |")
    assert lines[3].startswith("| seq2seq |") and lines[3].endswith("| 0.900 | 4 | 29.3 | — |")
    assert len(lines) == 6 and lines[-1] == "BLEU signature: nrefs:1|sig"


def test_repeated_trigrams_counts_repeats_within_a_line_only():
    assert report.repeated_trigrams(["a b c a b c", "a b c", "in the midst of you , in the midst of you"]) == 1 + 3
    assert report.repeated_trigrams(["a b", ""]) == 0


def test_combine_without_any_finished_run_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="none of the run directories"):
        report.combine([tmp_path / "missing"])
