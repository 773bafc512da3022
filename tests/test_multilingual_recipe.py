"""recipes/multilingual: the pairs file (both directions of each language), the zero-shot test sets, the table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from scripts import ROOT, load_script, stand_in_nmtkit

from nmtkit.data.multilingual import read_pairs

pairs_script = load_script("recipes/multilingual/pairs.py", "multilingual_pairs")
report = load_script("recipes/multilingual/report.py", "multilingual_report")


def write_corpus(data: Path, lang: str, test: list[tuple[str, str]]) -> None:
    corpus = data / f"en-{lang}"
    corpus.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        pairs = test if split == "test" else [("a", f"{lang}-a")]
        (corpus / f"{split}.en").write_text("".join(english + "\n" for english, _ in pairs))
        (corpus / f"{split}.{lang}").write_text("".join(other + "\n" for _, other in pairs))


def test_pairs_file_lists_both_directions_and_zero_shot_keeps_shared_test_messages(tmp_path: Path):
    write_corpus(tmp_path, "de", [("Open", "Öffnen"), ("Save", "Speichern"), ("Open", "Öffne"), ("Quit", "Beenden")])
    write_corpus(tmp_path, "fr", [("Save", "Enregistrer"), ("Open", "Ouvrir"), ("Close", "Fermer")])
    assert pairs_script.main(["--data", str(tmp_path), "--langs", "de", "fr", "--zero-shot", "de-fr"]) == 0
    corpora = read_pairs(tmp_path / "pairs.yaml")
    assert [corpus.name for corpus in corpora] == ["en-de", "de-en", "en-fr", "fr-en"]
    assert corpora[1].splits["train"].src == tmp_path / "en-de" / "train.de"
    assert (tmp_path / "test.de-fr.de").read_text() == "Öffnen\nSpeichern\n"  # the first translation of each
    assert (tmp_path / "test.de-fr.fr").read_text() == "Ouvrir\nEnregistrer\n"
    assert (tmp_path / "test.de-fr.en").read_text() == "Open\nSave\n"
    assert pairs_script.main(["--data", str(tmp_path), "--langs", "de", "ru"]) == 1


def test_report_table(tmp_path: Path):
    (tmp_path / "multi").mkdir()
    (tmp_path / "en-de").mkdir()
    scores = {"bleu": {"score": 20.0}, "chrf": {"score": 45.5}}
    for path in (tmp_path / "multi" / "test.en-de.json", tmp_path / "en-de" / "test.json",
                 tmp_path / "multi" / "test.de-fr.json"):
        path.write_text(json.dumps(scores))
    rows = report.table(tmp_path, ["de"], ["de-fr"]).splitlines()
    assert rows[2] == "| en-de | 20.00 / 45.50 | 20.00 / 45.50 |"
    assert rows[3] == "| de-en | — | — |" and rows[4] == "| de-fr (zero-shot) | 20.00 / 45.50 | — |"


FAKE_NMTKIT = """#!/usr/bin/env bash
echo "$*" >> "$NMTKIT_CALLS"
if [ "$1" = evaluate ]; then echo '{"bleu": {"score": 1.0}, "chrf": {"score": 2.0}}'; fi
"""


def train_budgets(tmp_path: Path, **env: str) -> dict[str, str]:
    """Run recipes/multilingual/run.sh with a stand-in nmtkit; each run directory's --max-time."""
    base, calls = stand_in_nmtkit(tmp_path, FAKE_NMTKIT)
    environment = {**base, "LANGS": "de fr", "ZERO_SHOT": "de-fr",
                   "DATA": str(tmp_path / "data"), "OUT": str(tmp_path / "runs"), **env}
    result = subprocess.run(["bash", str(ROOT / "recipes" / "multilingual" / "run.sh")], env=environment,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    budgets = {}
    for line in calls.read_text().splitlines():
        words = line.split()
        if words[0] == "train":
            budgets[Path(words[words.index("--out") + 1]).name] = words[words.index("--max-time") + 1]
    return budgets


def test_the_multilingual_model_has_its_own_budget(tmp_path: Path):
    write_corpus(tmp_path / "data", "de", [("Open", "Öffnen"), ("Save", "Speichern")])
    write_corpus(tmp_path / "data", "fr", [("Save", "Enregistrer"), ("Open", "Ouvrir")])
    for lang in ("de", "fr"):
        (tmp_path / "data" / f"en-{lang}" / "stats.json").write_text("{}")  # extraction done
    bilingual = ["en-de", "de-en", "en-fr", "fr-en"]
    assert train_budgets(tmp_path, MAX_TIME="1m") == {"multi": "1m", **dict.fromkeys(bilingual, "1m")}
    assert train_budgets(tmp_path, MAX_TIME="1m", MULTI_TIME="4m") == {"multi": "4m", **dict.fromkeys(bilingual, "1m")}
