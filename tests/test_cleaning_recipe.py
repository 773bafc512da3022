"""recipes/cleaning/run.sh with a stand-in for nmtkit that trains nothing and keeps what it is given: the workflow's
order and options (extraction, the noisy corpus, the seed models, score-pairs, the four systems' prepare settings),
the per-kind table and the results table. Catalogs are written in tmp_path with the messages tests' .mo writer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from scripts import ROOT, stand_in_nmtkit
from test_messages import mo_bytes

HEADER = ("", "Content-Type: text/plain; charset=UTF-8\n")
ENGLISH = [f"Open file number {n} now" for n in range(12)] + ["Quit", "Save the document as text"]
GERMAN = [f"Datei Nummer {n} jetzt öffnen" for n in range(12)] + ["Beenden", "Das Dokument als Text speichern"]
FRENCH = [f"Ouvrir le fichier numéro {n}" for n in range(12)] + ["Quitter", "Enregistrer le document"]

FAKE_NMTKIT = """#!/usr/bin/env bash
echo "$*" >> "$NMTKIT_CALLS"
option() { local name=$1; shift; while [ $# -gt 0 ]; do [ "$1" = "$name" ] && { echo "$2"; return; }; shift; done; }
case $1 in
  prepare) out=$(option --out "$@"); mkdir -p "$out"
    cp "$(option --train-src "$@")" "$out/train.src.txt"; cp "$(option --train-tgt "$@")" "$out/train.tgt.txt"
    echo '{}' > "$out/manifest.json"; echo '{}' ;;
  train) out=$(option --out "$@"); mkdir -p "$out"; touch "$out/model.pt"; echo '{"steps": 3}' ;;
  score-pairs) cp "$(option --src "$@")" "$(option --out-src "$@")"
    cp "$(option --tgt "$@")" "$(option --out-tgt "$@")"
    touch "$(option --output "$@")"; echo '{"kept": 1}' ;;
  translate) cat "$(option --input "$@")" ;;
  evaluate) echo '{"bleu": {"score": 12.5}, "chrf": {"score": 40.0}}' ;;
esac
"""


def write_locale(locale_dir: Path) -> None:
    for lang, translations in (("de", GERMAN), ("fr", FRENCH)):
        path = locale_dir / lang / "LC_MESSAGES" / "app.mo"
        path.parent.mkdir(parents=True)
        path.write_bytes(mo_bytes([HEADER, *zip(ENGLISH, translations)]))


def test_run_sh_builds_the_noisy_corpus_and_prepares_the_four_systems_as_documented(tmp_path):
    write_locale(tmp_path / "locale")
    base, calls = stand_in_nmtkit(tmp_path, FAKE_NMTKIT)
    environment = {**base, "LOCALE_DIR": str(tmp_path / "locale"), "OTHERS": "fr",
                   "DATA": str(tmp_path / "data"), "OUT": str(tmp_path / "runs"), "MAX_STEPS": "7",
                   "SEED_STEPS": "5", "SEED_LINES": "4", "KEEP": "0.5"}
    result = subprocess.run(["bash", str(ROOT / "recipes" / "cleaning" / "run.sh")], env=environment,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    prepares = {Path(line.split("--out ")[1].split()[0]).name: line for line in lines if line.startswith("prepare")}
    assert set(prepares) == {"seed-en-de", "seed-de-en", "prepared-clean", "prepared-noisy", "prepared-defaults",
                             "prepared-full"}
    assert "data.langid=false" in prepares["prepared-noisy"] and "data.langid=false" in prepares["prepared-clean"]
    assert "--set" not in prepares["prepared-defaults"]
    assert "data.max_ratio=2" in prepares["prepared-full"] and "scored/train.en" in prepares["prepared-full"]
    trains = [line for line in lines if line.startswith("train")]
    assert sum("--max-steps 5" in line for line in trains) == 2 and sum("--max-steps 7" in line for line in trains) == 4
    scoring = next(line for line in lines if line.startswith("score-pairs"))
    assert "seed-en-de/model.pt" in scoring and "--reverse-model" in scoring and "--keep 0.5" in scoring
    labels = (tmp_path / "data" / "noisy" / "labels").read_text().split()
    assert labels.count("clean") > 0 and len(set(labels)) == 8
    removed = json.loads((tmp_path / "runs" / "noisy.removed.json").read_text())
    assert removed["clean"]["kept_share"] == 1.0  # the stand-in kept everything
    table = (tmp_path / "runs" / "results.md").read_text().splitlines()
    assert table[0].startswith("| system | clean kept |") and len(table) == 6
    assert table[2] == "| clean | 100% |  |  |  |  |  |  |  | 12.50 | 40.00 |"
