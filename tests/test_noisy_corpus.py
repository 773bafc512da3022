"""benchmarks/noisy_corpus.py: the noisy corpus is the clean one plus its share of labelled spoiled pairs of each
kind, each spoiled as its kind says; the score walks what prepare kept and counts the removed pairs per label."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from scripts import load_script

noisy = load_script("benchmarks/noisy_corpus.py", "noisy_corpus")


def write_corpus(directory: Path, pairs: list[tuple[str, str]], src: str, tgt: str) -> None:
    directory.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (directory / f"{split}.{src}").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (directory / f"{split}.{tgt}").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


@pytest.fixture
def built(tmp_path) -> tuple[Path, list[tuple[str, str]], dict]:
    clean = [(f"open the file number {i} now please", f"öffne die Datei Nummer {i} jetzt bitte") for i in range(60)]
    write_corpus(tmp_path / "clean", clean, "en", "de")
    write_corpus(tmp_path / "others" / "en-fr", [(s, f"ouvrez le fichier {i}") for i, (s, _) in enumerate(clean)],
                 "en", "fr")
    args = argparse.Namespace(clean=tmp_path / "clean", others=tmp_path / "others", src="en", tgt="de",
                              out=tmp_path / "noisy", share=0.4, seed=3)
    return tmp_path / "noisy", clean, noisy.build(args)


def test_the_spoiled_pairs_are_their_share_in_equal_kinds_and_each_is_what_its_kind_says(built):
    out, clean, stats = built
    assert stats["spoiled"] == 40 and set(stats["kinds"]) == set(noisy.KINDS)
    pairs = noisy.read_pairs(out, "en", "de")
    labels = (out / "labels").read_text().split("\n")[:-1]
    assert len(pairs) == len(labels) == 100 and labels.count("clean") == 60
    originals = dict(clean)
    for (source, target), label in zip(pairs, labels):
        if label == "clean":
            assert originals[source] == target
        elif label == "wrong_lang_src":
            assert source.startswith("ouvrez") and target in originals.values()
        elif label == "wrong_lang_tgt":
            assert target.startswith("ouvrez") and source in originals
        elif label == "misaligned":
            assert target in originals.values() and originals[source] != target
        elif label == "untranslated":
            assert source == target
        elif label == "truncated":
            assert originals[source].startswith(target) and len(target.split()) < len(originals[source].split())
        elif label == "number_mismatch":
            assert re.findall("[0-9]+", target) != re.findall("[0-9]+", originals[source])
            assert len(target) == len(originals[source])
        else:
            assert label == "boilerplate"


def test_the_score_counts_what_prepare_left_out_by_label(built, tmp_path):
    out, _, _ = built
    pairs = noisy.read_pairs(out, "en", "de")
    labels = (out / "labels").read_text().split("\n")[:-1]
    kept = [pair for pair, label in zip(pairs, labels) if label not in ("untranslated", "misaligned")][1:]
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "train.src.txt").write_text("".join(s + "\n" for s, _ in kept), encoding="utf-8")
    (prepared / "train.tgt.txt").write_text("".join(t + "\n" for _, t in kept), encoding="utf-8")
    table = noisy.score(argparse.Namespace(noisy=out, prepared=prepared, src="en", tgt="de"))
    first = labels[next(index for index, label in enumerate(labels) if label not in ("untranslated", "misaligned"))]
    assert table["untranslated"]["removed_share"] == table["misaligned"]["removed_share"] == 1.0
    assert table[first]["removed"] == 1 and sum(row["removed"] for row in table.values()) == len(pairs) - len(kept)


def test_a_kind_no_clean_pair_can_be_spoiled_as_is_refused_not_drawn_forever(tmp_path):
    clean = [("open the file", "öffne die Datei")] * 5  # no digits, no four-word target, one distinct target
    write_corpus(tmp_path / "clean", clean, "en", "de")
    (tmp_path / "others").mkdir()
    args = argparse.Namespace(clean=tmp_path / "clean", others=tmp_path / "others", src="en", tgt="de",
                              out=tmp_path / "noisy", share=0.4, seed=1)
    with pytest.raises(SystemExit, match="wrong_lang_src, wrong_lang_tgt, truncated, number_mismatch, misaligned"):
        noisy.build(args)
