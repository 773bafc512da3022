"""recipes/backtranslation: the monolingual English (other catalogs, X's held-out lines and their near copies left
out), the corpora YAML and the systems' stages, the table, and run.sh with a stand-in for nmtkit.

Catalogs are written in tmp_path with the messages tests' .mo writer."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import pytest
import yaml
from scripts import ROOT, load_script, stand_in_nmtkit
from test_messages import mo_bytes

from nmtkit.config.sections import StageConfig
from nmtkit.config.values import from_dict
from nmtkit.data.corpora import read_corpora
from nmtkit.symbols.placeholders import load_patterns

monolingual = load_script("recipes/backtranslation/monolingual.py", "backtranslation_monolingual")
systems = load_script("recipes/backtranslation/systems.py", "backtranslation_systems")
report = load_script("recipes/backtranslation/report.py", "backtranslation_report")

HEADER = ("", "Content-Type: text/plain; charset=UTF-8\n")
X_ENTRIES = [("Quit", "Beenden"), ("Open %d files", "%d Dateien öffnen"), ("Save as…", "Speichern unter…"),
             ("%s: %s", "%s: %s")]
OTHER_ENTRIES = [  # (English, translation) of another language's catalog of the same domain as X's
    ("Quit", "Quitter"),  # in X's catalogs
    ("Save as…", "Enregistrer sous…"),  # a test line
    ("_Open 3 Files...", "_Ouvrir 3 fichiers..."),  # near copies of the dev line
    ("OPEN {0} FILES", "OUVRIR {0} FICHIERS"),
    ("Save &as <b>%s</b>", "Enregistrer &sous <b>%s</b>"),  # a near copy of the test line
    ("%d: %d", "%d : %d"),  # no letters: a near copy of nothing, not even of "%s: %s"
    ("Open files now", "Ouvrir les fichiers"),  # kept: other letters
]
OTHER_DOMAIN = [  # a catalog X does not have
    ("menu\x04Close", "Schließen"),  # context dropped
    ("One file\x00%d files", "Eine Datei\x00%d Dateien"),  # singular and plural
    ("Line one\nLine two\n", "Zeile eins\nZeile zwei\n"),  # one line each, the blank after the last break dropped
]
KEPT = {"%d: %d", "Open files now", "Close", "One file", "%d files", "Line one", "Line two"}


def write_locale(locale_dir: Path) -> None:
    """X (`xx`) with one catalog, `yy` with the same domain and another one, `zz` with a catalog that is not one."""
    catalogs = {"xx/app.mo": X_ENTRIES, "yy/app.mo": OTHER_ENTRIES, "yy/tools.mo": OTHER_DOMAIN}
    for name, entries in catalogs.items():
        path = locale_dir / name.replace("/", "/LC_MESSAGES/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(mo_bytes([HEADER, *entries]))
    broken = locale_dir / "zz" / "LC_MESSAGES" / "app.mo"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a catalog")


def write_bilingual(bilingual: Path) -> None:
    bilingual.mkdir(parents=True)
    (bilingual / "dev.en").write_text("Open %d files\n", encoding="utf-8")
    (bilingual / "test.en").write_text("Save as…\n%s: %s\n", encoding="utf-8")


def extract_mono(tmp_path: Path, *options: str) -> tuple[int, list[str], dict]:
    locale_dir, bilingual, out = tmp_path / "locale", tmp_path / "bilingual", tmp_path / "mono"
    if not locale_dir.exists():
        write_locale(locale_dir)
        write_bilingual(bilingual)
    status = monolingual.main(["--lang", "xx", "--bilingual", str(bilingual), "--out", str(out),
                               "--locale-dir", str(locale_dir), *options])
    if status:
        return status, [], {}
    lines = (out / "mono.en").read_text(encoding="utf-8").splitlines()
    return status, lines, json.loads((out / "mono.stats.json").read_text(encoding="utf-8"))


def test_monolingual_english_leaves_out_x_catalogs_and_held_out_lines_and_their_near_copies(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="backtranslation.monolingual"):
        status, lines, stats = extract_mono(tmp_path)
    assert status == 0
    assert set(lines) == KEPT and len(lines) == len(KEPT)
    assert stats["removed"] == {"dev_test_copy": 1, "dev_test_near_copy": 3, "in_x_catalogs": 1}
    assert stats["candidates"] == len(KEPT) + 5 and stats["kept"] == len(KEPT)
    assert stats["catalogs"]["x"] == 1 and stats["catalogs"]["other"] == 2
    assert list(stats["catalogs"]["skipped"]) == [str(tmp_path / "locale" / "zz" / "LC_MESSAGES" / "app.mo")]
    assert "excluded 1 dev/test lines and 3 near copies of them" in caplog.text  # said on stderr


def test_a_cap_keeps_a_prefix_of_the_hash_order(tmp_path):
    _, everything, _ = extract_mono(tmp_path)
    status, capped, stats = extract_mono(tmp_path, "--max-lines", "3")
    assert status == 0 and capped == everything[:3]
    assert stats["removed"]["over_max_lines"] == len(KEPT) - 3


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert extract_mono(tmp_path, "--max-lines", "-1")[0] == 1
    (tmp_path / "bilingual" / "dev.en").unlink()
    assert extract_mono(tmp_path)[0] == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize("line, other, near", [
    ("Open %d files", "_open 12 FILES...", True),
    ("Save as {0}", "Save &as <b>%s</b>", True),
    ("Can't stat '%s'", "cant stat $HOME", True),
    ("Open file", "Open files", False),
    ("Größe", "GRÖSSE", True),  # case-folded: ß folds to ss
    ("Öffnen", "Offnen", False),  # a letter with its accent is another letter
])
def test_near_copy_keys(line, other, near):
    patterns = load_patterns("auto")
    assert (monolingual.near_copy_key(line, patterns) == monolingual.near_copy_key(other, patterns)) == near


def test_corpora_yaml_reads_as_three_corpora_of_the_same_back_translations(tmp_path):
    data = tmp_path / "data"
    files = {name: data / "bilingual" / name for name in ("train.de", "train.en", "dev.de", "dev.en", "test.de",
                                                           "test.en")}
    out = data / "corpora.yaml"
    assert systems.main(["corpora", "--train", str(files["train.de"]), str(files["train.en"]),
                         "--dev", str(files["dev.de"]), str(files["dev.en"]),
                         "--test", str(files["test.de"]), str(files["test.en"]),
                         "--back-translated", str(data / "bt.de"), str(data / "mono" / "mono.en"),
                         "--out", str(out)]) == 0
    assert "bilingual/train.de" in out.read_text()  # relative to the YAML file: the data directory can move
    bilingual, bt, tagged = read_corpora(out)
    assert (bilingual.name, bt.name, tagged.name) == ("bilingual", "bt", "bt_tagged")
    assert bilingual.splits["train"].src == files["train.de"] and bilingual.splits["test"].tgt == files["test.en"]
    assert set(bt.splits) == {"train"} and bt.splits == tagged.splits
    assert bt.splits["train"].tgt == data / "mono" / "mono.en"
    assert (bilingual.tag, bt.tag, tagged.tag) == (None, None, "<bt>")


def test_system_configs_keep_the_base_and_end_the_mix_before_the_fine_tuning(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("model: {name: transformer, d_model: 64}\ntrain: {lr: 0.003}\n")
    out = tmp_path / "tagged.yaml"
    assert systems.main(["config", "--base", str(base), "--bt", "bt_tagged", "--bt-share", "0.3",
                         "--finetune", "0.25", "--updates", "1000", "--out", str(out)]) == 0
    config = yaml.safe_load(out.read_text())
    assert config["model"] == {"name": "transformer", "d_model": 64} and config["train"]["lr"] == 0.003
    first, second = [from_dict(StageConfig, stage) for stage in config["train"]["stages"]]
    assert first.mix == {"bilingual": 0.7, "bt_tagged": 0.3} and first.until.updates == 750
    assert second.mix == {"bilingual": 1.0} and second.until.updates == 0
    assert systems.stages("bt", 0.5, 0.0, 0) == [{"mix": {"bilingual": 0.5, "bt": 0.5}}]
    assert systems.stages(None, 0.5, 0.2, 1000) == [{"mix": {"bilingual": 1.0}}]


@pytest.mark.parametrize("options", [["--finetune", "0.2"], ["--bt-share", "1.5"], ["--finetune", "1"]])
def test_bad_system_options_are_errors(tmp_path, capsys, options):
    assert systems.main(["config", "--bt", "bt", *options, "--out", str(tmp_path / "c.yaml")]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def write_results(runs: Path, data: Path) -> None:
    for name, steps, bleu in (("bilingual", 100, 10.0), ("bt-tagged", 98, 12.5), ("en-de", 100, 8.0)):
        (runs / name).mkdir(parents=True)
        (runs / name / "test.json").write_text(json.dumps({"bleu": {"score": bleu}, "chrf": {"score": 40.0}}))
        (runs / name / "train.summary.json").write_text(json.dumps({"steps": steps, "elapsed_seconds": 90.0}))
    stages = [{"mix": {"bilingual": 0.5, "bt_tagged": 0.5}, "until": {"updates": 80, "epochs": {}}},
              {"mix": {"bilingual": 1.0}, "until": {"updates": 0, "epochs": {}}}]
    (runs / "bt-tagged" / "config.yaml").write_text(yaml.safe_dump({"train": {"stages": stages}}))
    (data / "mixed").mkdir(parents=True)
    corpora = [{"name": name, "train": {"start": 0, "count": count}} for name, count in (("bilingual", 500),
                                                                                         ("bt", 300))]
    (data / "mixed" / "manifest.json").write_text(json.dumps({"corpora": corpora}))


def test_report_table(tmp_path):
    write_results(tmp_path / "runs", tmp_path / "data")
    lines = report.table(tmp_path / "runs", tmp_path / "data", "de", "beam").splitlines()
    assert lines[0].startswith("de→en: 500 bilingual training pairs and 300 back-translated")
    assert "test BLEU 8.00, chrF 40.00, with beam" in lines[0]
    assert lines[4] == "| bilingual only | — | 100 | 1.5 min | 10.00 | 40.00 |"
    assert lines[5] == "| + back-translation, untagged | — | — | — | — | — |"
    assert lines[6] == ("| + back-translation, tagged `<bt>` | bilingual 0.5 + bt_tagged 0.5 for 80 updates, then "
                        "bilingual 1 | 98 | 1.5 min | 12.50 | 40.00 |")


FAKE_NMTKIT = """#!/usr/bin/env bash
echo "$*" >> "$NMTKIT_CALLS"
case $1 in
  train) echo '{"steps": 40, "elapsed_seconds": 5}' ;;
  translate) while [ "$1" != --input ]; do shift; done; sed 's/^/xx: /' "$2" ;;
  evaluate) echo '{"bleu": {"score": 1.0}, "chrf": {"score": 2.0}}' ;;
esac
"""


def test_run_sh_trains_the_three_systems_for_one_budget_and_tags_one(tmp_path):
    """The workflow's order and options, with a stand-in nmtkit that trains nothing (data and catalogs as above)."""
    write_locale(tmp_path / "locale")
    base, calls = stand_in_nmtkit(tmp_path, FAKE_NMTKIT)
    environment = {**base, "LANGS": "xx", "LOCALE_DIR": str(tmp_path / "locale"),
                   "DATA": str(tmp_path / "data"), "OUT": str(tmp_path / "runs"), "MAX_TIME": "7m", "BT_TIME": "3m",
                   "BT_DECODE": "sample", "CONFIG": "none", "DEV": "1", "TEST": "1"}
    result = subprocess.run(["bash", str(ROOT / "recipes" / "backtranslation" / "run.sh")], env=environment,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    runs = tmp_path / "runs" / "xx"
    trains = [line.split() for line in calls.read_text().splitlines() if line.startswith("train ")]
    budgets = {Path(words[words.index("--out") + 1]).name: words[words.index("--max-time") + 1] for words in trains}
    assert budgets == {"en-xx": "3m", "bilingual": "7m", "bt-untagged": "7m", "bt-tagged": "7m"}
    back_translation = next(line for line in calls.read_text().splitlines() if "mono.en" in line)
    assert "--sample" in back_translation.split() and "en-xx/model.pt" in back_translation
    bt_text = (tmp_path / "data" / "xx" / "bt.xx").read_text(encoding="utf-8").splitlines()
    mono = (tmp_path / "data" / "xx" / "mono" / "mono.en").read_text(encoding="utf-8").splitlines()
    assert bt_text == [f"xx: {line}" for line in mono]
    tagged = yaml.safe_load((runs / "bt-tagged.yaml").read_text())["train"]["stages"]
    assert tagged[0] == {"mix": {"bilingual": 0.5, "bt_tagged": 0.5}, "until": {"updates": 32}}
    assert "| + back-translation, tagged `<bt>` |" in result.stdout
