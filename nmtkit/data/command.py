"""The prepare command's one library call: a data directory from one language pair's files, from a list of named
corpora or language pairs (`nmtkit.data.corpora`), or encoded with an existing vocabulary (fine-tuning)."""

from __future__ import annotations

from pathlib import Path

from nmtkit.config import DataConfig
from nmtkit.data.corpora import read_corpora
from nmtkit.data.multilingual import read_pairs
from nmtkit.data.prepare import SplitFiles, prepare_data
from nmtkit.data.prepare_corpora import prepare_corpora
from nmtkit.errors import NmtkitError
from nmtkit.finetune import vocabulary_of


def prepare_command(splits: dict[str, SplitFiles], out: Path, config: DataConfig, langs: tuple[str, str],
                    overwrite: bool = False, pairs: Path | None = None, subword_model: Path | None = None,
                    corpora: Path | None = None) -> dict:
    """Write the data directory `out` and return its manifest. `corpora` (a YAML list of named corpora) or `pairs`
    (one of language pairs) replaces `splits`; `subword_model` (a checkpoint or a SentencePiece model) encodes with
    its vocabulary instead of training one."""
    if pairs is not None or corpora is not None:
        if splits or subword_model or (pairs and corpora):
            raise NmtkitError("--corpora (or --pairs) lists every file of the data directory; it does not combine "
                              "with --train-*/--dev-*/--test-*, --subword-model or the other of --corpora/--pairs")
        listed = read_pairs(pairs) if pairs is not None else read_corpora(corpora)
        return prepare_corpora(listed, out, config, langs, overwrite)
    subwords = vocabulary_of(subword_model) if subword_model else None
    return prepare_data(splits, out, config, langs, overwrite, subwords)
