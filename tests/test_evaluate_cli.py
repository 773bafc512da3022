"""`nmtkit evaluate` from the command line: sacrebleu's strings and signatures, jiwer's rates, the paired
bootstrap, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest
import torch
from metrics_corpus import REAL, random_corpus
from sacrebleu.metrics import BLEU, CHRF
from typer.testing import CliRunner

from nmtkit.cli import app

HYPOTHESES = [hypothesis for _, hypothesis in REAL]
REFERENCES = [reference for reference, _ in REAL]


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def evaluate(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(app, ["evaluate", *args], input=stdin)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    baseline, _ = random_corpus(seed=9, lines=len(REAL))
    return {"hyp": write(tmp_path / "hyp.txt", HYPOTHESES), "ref": write(tmp_path / "ref.txt", REFERENCES),
            "ref2": write(tmp_path / "ref2.txt", HYPOTHESES[::-1]), "base": write(tmp_path / "base.txt", baseline),
            "short": write(tmp_path / "short.txt", REFERENCES[:3])}


def test_json_holds_every_metric_with_reference_values(files):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--ref", files["ref2"], "--metrics",
                      "bleu,chrf,chrf++,wer,cer,edit", "--sentence", "--json", "--device", "cpu")
    scores = json.loads(result.stdout)
    two_refs = [REFERENCES, HYPOTHESES[::-1]]
    assert set(scores) == {"bleu", "chrf", "chrf++", "wer", "cer", "edit"}
    assert scores["bleu"]["score"] == BLEU().corpus_score(HYPOTHESES, two_refs).score
    assert scores["bleu"]["signature"].startswith("nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert scores["chrf++"]["score"] == CHRF(word_order=2).corpus_score(HYPOTHESES, two_refs).score
    assert scores["wer"]["score"] == jiwer.wer(REFERENCES, HYPOTHESES)
    assert scores["cer"]["score"] == jiwer.cer(REFERENCES, HYPOTHESES)
    assert scores["cer"]["substitutions"] == jiwer.process_characters(REFERENCES, HYPOTHESES).substitutions
    assert all(len(result["sentences"]) == len(REAL) for result in scores.values())


def test_text_output_prints_sacrebleus_lines(files):
    lines = evaluate("--hyp", files["hyp"], "--ref", files["ref"]).stdout.splitlines()
    bleu, chrf = BLEU(), CHRF()
    assert lines[0] == str(bleu.corpus_score(HYPOTHESES, [REFERENCES]))
    assert lines[1] == f"  signature: {bleu.get_signature()}"
    assert lines[2] == str(chrf.corpus_score(HYPOTHESES, [REFERENCES]))
    assert lines[3] == f"  signature: {chrf.get_signature()}"


def test_compare_runs_a_paired_bootstrap(files):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--compare", files["base"], "--metrics",
                      "bleu,wer", "--samples", "200", "--json")
    scores = json.loads(result.stdout)
    for name in ("bleu", "wer"):
        comparison = scores[name]["bootstrap"]
        assert comparison["samples"] == 200 and comparison["seed"] == 12345 and 0 < comparison["p_value"] <= 1
        assert comparison["system"] == scores[name]["score"]
    text = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--compare", files["base"]).stdout
    assert "paired bootstrap (1000 resamples, seed 12345): p = " in text


@pytest.mark.parametrize(("args", "needle"), [
    (["--metrics", "bleu,ter"], "unknown metric 'ter'"),
    (["--compare", "short"], "short.txt has 3 lines"),
    (["--metrics", "edit", "--edit-costs", "1,2"], "three integers"),
    (["--tokenize", "nope"], "unknown BLEU tokenizer"),
])
def test_bad_input_is_a_one_line_error(files, args, needle):
    args = [files.get(arg, arg) for arg in args]
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and needle in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present")
def test_cuda_without_cuda_is_a_one_line_error(files):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--device", "cuda")
    assert result.exit_code == 1 and "CUDA is not available" in result.stderr


def test_hypotheses_from_stdin_end_to_end(files):
    result = subprocess.run([sys.executable, "-m", "nmtkit", "evaluate", "--hyp", "-", "--ref", files["ref"],
                             "--metrics", "bleu,wer", "--json"], input=Path(files["hyp"]).read_bytes(),
                            capture_output=True, check=True)
    scores = json.loads(result.stdout)
    assert scores["bleu"]["score"] == BLEU().corpus_score(HYPOTHESES, [REFERENCES]).score
    assert scores["wer"]["score"] == jiwer.wer(REFERENCES, HYPOTHESES)
