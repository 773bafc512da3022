"""The vocabulary shortlist of exported models (`nmtkit export --shortlist`): how it is built from co-occurrence
counts, written as CTranslate2's vmap.txt, and searched (`use_vmap`)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from cli_runner import assert_error, nmtkit
from letter_task import LETTERS, letter_lines, letter_task, train_tiny

from nmtkit import Translator
from nmtkit.config.sections import DataConfig
from nmtkit.data.dataset import TokenArray
from nmtkit.data.prepare import SplitFiles, load_subwords, prepare_data
from nmtkit.export import shortlist as shortlist_module
from nmtkit.export.command import export_model
from nmtkit.export.shortlist import Shortlist, build_shortlist
from nmtkit.translate.exported import load_exported

# Four sentence pairs over pieces 4-9 (0-3 are special). Sentence counts: source 4, 5, 6: 2 each; target 7: 2,
# 8: 3, 9: 2. Dice 2c(s,t) / (c(s) + c(t)): 4-7 1.0, 4-9 0.5, 4-8 0.4; 5-8 0.8, 5-7 0.5; 6-9 1.0, 6-7 0.5, 6-8 0.4.
SOURCES = [[4, 5, 4], [4, 6], [5], [6]]
TARGETS = [[7, 8, 8], [7, 9, 1], [8], [9, 8]]  # 1 (<unk>) is never a candidate


def build(per_piece: int, frequent: int, **options) -> Shortlist:
    return build_shortlist(TokenArray.from_lists(SOURCES), TokenArray.from_lists(TARGETS), 10, 10, per_piece,
                           frequent, **options)


def test_candidates_are_ranked_by_dice_and_cut_to_size():
    built = build(per_piece=2, frequent=2)
    assert {source: targets.tolist() for source, targets in built.candidates.items()} == {
        4: [7, 9], 5: [8, 7], 6: [9, 7]}
    assert built.frequent.tolist() == [8, 7]  # 4 and 2 occurrences; 7 before 9 (2 each) by id
    assert built.pairs == 4
    everything = build(per_piece=10, frequent=10)
    assert everything.candidates[4].tolist() == [7, 9, 8] and everything.frequent.tolist() == [8, 7, 9]
    assert build(per_piece=0, frequent=0).candidates == {}


def test_counts_merge_across_chunks_and_long_corpora_are_sampled(monkeypatch):
    whole = build(per_piece=3, frequent=3)
    monkeypatch.setattr(shortlist_module, "CHUNK", 1)
    chunked = build(per_piece=3, frequent=3)
    assert {key: value.tolist() for key, value in chunked.candidates.items()} == \
        {key: value.tolist() for key, value in whole.candidates.items()}
    sampled = build(per_piece=3, frequent=3, max_pairs=2)  # pairs 0 and 3: source 4, 5 with target 7, 8, 6 with 9, 8
    assert sampled.pairs == 2
    assert {key: value.tolist() for key, value in sampled.candidates.items()} == {4: [7, 8], 5: [7, 8], 6: [9, 8]}


def test_vmap_text_and_pieces_it_cannot_hold(caplog):
    names = ["<pad>", "<unk>", "<s>", "</s>", "▁a", "▁b", "c", "▁A", "▁B", "C"]
    subword = SimpleNamespace(processor=SimpleNamespace(id_to_piece=lambda index: names[index]))
    text = build(per_piece=1, frequent=1).vmap(subword, subword)
    assert text == "\t▁B\n▁a\t▁A\n▁b\t▁B\nc\tC\n"
    names[7], names[6] = "▁A B", "\t"  # a target and a source piece with whitespace: left out, with a warning
    with caplog.at_level(logging.WARNING):
        text = build(per_piece=1, frequent=1).vmap(subword, subword)
    assert text == "\t▁B\n▁a\t\n▁b\t▁B\n"
    assert "2 subword piece(s) hold whitespace ('\\t', '▁A B')" in caplog.text


@pytest.fixture(scope="module")
def letters(tmp_path_factory):
    """(data directory, checkpoint of a trained model, checkpoint of an untrained one): joint vocabulary."""
    root = tmp_path_factory.mktemp("shortlist")
    data = letter_task(root, joint=True)
    return data, train_tiny(data, root / "trained"), train_tiny(data, root / "untrained", steps=1)


@pytest.mark.isa
def test_a_shortlist_of_every_target_piece_translates_as_none(letters, tmp_path):
    """Every piece the training targets hold is a candidate: the same translations on nearly every line (each step
    is normalized over the shortlist, so hypotheses scored within a hair of each other can swap, more or less
    often with the model and the CPU's arithmetic); the scores of the same hypotheses, log-probabilities within the
    shortlist (the source letters and <pad> left out), can only be higher."""
    data, checkpoint, _ = letters
    export_model(checkpoint, tmp_path / "full")
    summary = export_model(checkpoint, tmp_path / "listed", shortlist=data, shortlist_size=100, shortlist_frequent=100)
    assert summary["shortlist"]["pairs"] == len(TokenArray.load(data / "train.src"))  # every training pair
    assert summary["shortlist"]["file"] == "vmap.txt" and summary["shortlist"]["frequent"] == len(LETTERS)
    assert json.loads((tmp_path / "listed" / "nmtkit.json").read_text())["shortlist"] == summary["shortlist"]
    assert load_exported(tmp_path / "listed").shortlist and not load_exported(tmp_path / "full").shortlist
    lines = letter_lines(80, seed=21)
    for decode in ({"beam": 1}, {"beam": 4, "nbest": 2}):
        full = Translator.load(tmp_path / "full", threads=1, **decode).translate_nbest(lines)
        listed = Translator.load(tmp_path / "listed", threads=1, **decode)
        assert listed.engine.options["use_vmap"]
        found = listed.translate_nbest(lines)
        assert sum(mine[0][0] == theirs[0][0] for mine, theirs in zip(found, full)) >= 0.95 * len(lines)
        assert sum([text for text, _ in mine] == [text for text, _ in theirs]
                   for mine, theirs in zip(found, full)) >= 0.9 * len(lines)
        assert all(mine >= theirs - 1e-5 for hyps, others in zip(found, full)
                   for (text, mine), (other, theirs) in zip(hyps, others) if text == other)


def test_the_search_keeps_to_the_shortlist(letters, tmp_path):
    """A shortlist built from data where each letter turns into the next one in upper case (a -> B, ..., h -> A),
    one candidate per source piece (Dice 1.0) and none always: the model, trained to write A for a, can then write
    only the shifted letters of its sentence (each sentence searched alone), or <unk> (decoded ⁇), which
    CTranslate2 keeps among the candidates with <s> and </s>."""
    data, checkpoint, _ = letters
    shift = dict(zip(LETTERS, LETTERS[1:].upper() + LETTERS[0].upper()))
    lines = letter_lines(200, seed=8)
    (tmp_path / "train.src").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (tmp_path / "train.tgt").write_text("".join(" ".join(shift[letter] for letter in line.split()) + "\n"
                                                for line in lines), encoding="utf-8")
    prepare_data({"train": SplitFiles(tmp_path / "train.src", tmp_path / "train.tgt")}, tmp_path / "shifted",
                 DataConfig(subword="word", joint=True), subwords=load_subwords(data))
    export_model(checkpoint, tmp_path / "listed", shortlist=tmp_path / "shifted", shortlist_size=1,
                 shortlist_frequent=0)
    lines = letter_lines(40, seed=5)
    free = Translator.load(checkpoint, device="cpu", beam=1).translate(lines)
    listed = Translator.load(tmp_path / "listed", threads=1, beam=1, batch_tokens=1).translate(lines)
    allowed = [{shift[letter] for letter in line.split()} for line in lines]
    assert sum(not set(out.split()) <= letters for out, letters in zip(free, allowed)) >= len(lines) / 2
    for out, line, letters in zip(listed, lines, allowed):
        assert set(out.split()) <= letters | {"⁇"}, (line, out)
    assert any(set(out.split()) & letters for out, letters in zip(listed, allowed))  # it writes, not only ends


def test_export_shortlist_from_the_command_line_and_its_errors(letters, tmp_path):
    data, checkpoint, _ = letters
    result = nmtkit("export", "-m", str(checkpoint), "--out", str(tmp_path / "ct2"), "--shortlist", str(data),
                    "--shortlist-size", "3", "--shortlist-frequent", "2")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["shortlist"]
    assert (summary["per_piece"], summary["frequent"]) == (3, 2)
    vmap = (tmp_path / "ct2" / "vmap.txt").read_text(encoding="utf-8").splitlines()
    assert len(vmap[0].split("\t")[1].split()) == 2 and all(len(line.split("\t")[1].split()) <= 3 for line in vmap)
    lines = [" ".join(LETTERS[:3]), "h g"]
    translated = nmtkit("translate", "-m", str(tmp_path / "ct2"), "--threads", "1", stdin="\n".join(lines) + "\n")
    assert translated.exit_code == 0, translated.output
    assert translated.stdout.splitlines() == Translator.load(tmp_path / "ct2", threads=1).translate(lines)
    (tmp_path / "separate").mkdir()
    other = letter_task(tmp_path / "separate", joint=False)
    assert_error(nmtkit("export", "-m", str(checkpoint), "--out", str(tmp_path / "x"), "--shortlist", str(other)),
                 "other subword vocabularies")
    assert_error(nmtkit("export", "-m", str(checkpoint), "--out", str(tmp_path / "y"), "--shortlist", str(tmp_path)),
                 "not a data directory")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    (tmp_path / "ct2" / "vmap.txt").unlink()
    assert_error(nmtkit("translate", "-m", str(tmp_path / "ct2"), stdin="a\n"), "shortlist vmap.txt is missing")
