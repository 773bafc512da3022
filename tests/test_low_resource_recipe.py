"""recipes/backtranslation/low_resource.py: the genuine sample and the monolingual English (the rest's English, each
line once, none the genuine pairs hold, never the X side), the corpora of the four systems, their stages and table."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from scripts import load_script

low = load_script("recipes/backtranslation/low_resource.py", "backtranslation_low_resource")


def write_bilingual(directory: Path) -> None:
    directory.mkdir(parents=True)
    english = [f"line {n % 15}" for n in range(40)] + [""]  # repeats, and an empty line
    (directory / "train.en").write_text("".join(line + "\n" for line in english), encoding="utf-8")
    (directory / "train.de").write_text("".join(f"Zeile {n}\n" for n in range(41)), encoding="utf-8")


def test_the_genuine_sample_and_the_monolingual_english_never_share_a_line(tmp_path):
    write_bilingual(tmp_path / "bi")
    stats = low.split(tmp_path / "bi", "de", 10, tmp_path / "out", seed=11)
    genuine = low.read_lines(tmp_path / "out" / "genuine.en")
    mono = low.read_lines(tmp_path / "out" / "mono.en")
    assert stats == {"genuine": 10, "mono": len(mono), "seed": 11} and len(low.read_lines(
        tmp_path / "out" / "genuine.de")) == 10
    assert not set(mono) & set(genuine) and len(set(mono)) == len(mono) and "" not in mono
    assert set(mono) | set(genuine) == {f"line {n}" for n in range(15)} | ({""} & set(genuine))
    assert not any(line.startswith("Zeile") for line in mono)  # never the X side
    low.split(tmp_path / "bi", "de", 10, tmp_path / "again", seed=11)
    assert low.read_lines(tmp_path / "again" / "genuine.de") == low.read_lines(tmp_path / "out" / "genuine.de")


def test_the_systems_mix_the_genuine_pairs_with_one_back_translated_corpus_each(tmp_path):
    entries = {entry["name"]: entry for entry in low.corpora(tmp_path, tmp_path / "bi", "de")}
    assert set(entries) == {"bilingual", "bt", "bt_tagged", "bt_sample"}
    assert entries["bt_tagged"]["tag"] == "<bt>" and "tag" not in entries["bt"]
    assert entries["bt_sample"]["src"].endswith("bt.sample.de") and entries["bt"]["tgt"].endswith("mono.en")
    assert "dev" in entries["bilingual"] and "dev" not in entries["bt"]
    assert yaml.safe_load(low.stages("bilingual", 0.5)) == [{"mix": {"bilingual": 1}}]
    assert json.loads(low.stages("bt-tagged", 0.3)) == [{"mix": {"bilingual": 0.7, "bt_tagged": 0.3}}]


def test_the_report_reads_each_systems_best_dev_bleu_and_test_scores(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "split.json").write_text(json.dumps({"genuine": 10000, "mono": 31882, "seed": 11}))
    run = tmp_path / "runs" / "bt-tagged"
    run.mkdir(parents=True)
    (run / "train.summary.json").write_text(json.dumps({"steps": 6500}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in (
        {"step": 500, "valid_bleu": 20.0}, {"step": 1000, "train_loss": 3.0}, {"step": 4500, "valid_bleu": 31.5},
        {"step": 6500, "valid_bleu": 30.9})))
    (run / "test.json").write_text(json.dumps({"bleu": {"score": 30.25}, "chrf": {"score": 50.5}}))
    lines = low.report(tmp_path / "runs", tmp_path / "data", "de").splitlines()
    assert lines[0].startswith("de→en: 10,000 genuine pairs, 31,882 lines of monolingual English")
    assert lines[4] == "| + tagged back-translation `<bt>` (beam 5) | 6,500 (4,500) | 31.50 | 30.25 | 50.50 |"
    assert len(lines) == 5
