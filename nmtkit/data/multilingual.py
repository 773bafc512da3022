"""Several language pairs in one data directory, for one multilingual model (Johnson et al. 2017, Section 3).

Each source sentence starts with a tag naming the language to translate into (`<2de>`). The tags are SentencePiece
control symbols: ids of their own that no text encodes to and that decode to nothing, so a user's text can never
turn into a tag and a tag never reaches the output. One joint vocabulary covers every language. Each corpus is
filtered on its own (its own median length ratio); `{split}.corpus.npy` holds each line's language pair (its index
in the manifest's "pairs"), for validation per pair and for sampling pairs with a temperature
(`train.pair_temperature`, `nmtkit.training.mix`).

A multilingual directory is a corpora directory (`nmtkit.data.corpora`) whose corpora give their languages. The
pairs come from a YAML list (`nmtkit prepare --pairs pairs.yaml`, or `--corpora`, which takes the same file):

    - {src_lang: en, tgt_lang: de, train: [train.en, train.de], dev: [dev.en, dev.de], test: [test.en, test.de]}
    - {src_lang: de, tgt_lang: en, train: train.de-en.tsv}
"""

from __future__ import annotations

from pathlib import Path

from nmtkit.data.corpora import Corpus, read_corpora
from nmtkit.errors import NmtkitError


def tag(lang: str) -> str:
    """The control symbol that asks for translation into `lang`."""
    return f"<2{lang}>"


def read_pairs(path: Path) -> list[Corpus]:
    """The corpora of a `--pairs` file: a corpora file in which every corpus gives its languages."""
    corpora = read_corpora(path)
    if corpora[0].src_lang is None:
        raise NmtkitError(f"{path}: --pairs lists language pairs (src_lang, tgt_lang, train...); for corpora of one "
                          "language pair use --corpora")
    return corpora


def language_pairs(manifest: dict) -> list[tuple[str, str]]:
    """(source, target) language of each pair of a multilingual data directory, in `{split}.corpus.npy` order."""
    return [(pair["src_lang"], pair["tgt_lang"]) for pair in manifest.get("pairs", ())]
