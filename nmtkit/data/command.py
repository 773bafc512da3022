"""The prepare command's one library call: a data directory from one language pair's files, from a list of named
corpora or language pairs (`nmtkit.data.corpora`), or encoded with an existing vocabulary (fine-tuning)."""

from __future__ import annotations

from pathlib import Path

from nmtkit.checkpoint.file import load_checkpoint
from nmtkit.config.sections import DataConfig
from nmtkit.data.corpora import Corpus, read_corpora
from nmtkit.data.lines import read_small
from nmtkit.data.multilingual import read_pairs
from nmtkit.data.prepare import SplitFiles, prepare_data
from nmtkit.data.prepare_corpora import prepare_corpora
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError


def prepare_command(splits: dict[str, SplitFiles], out: Path, config: DataConfig, langs: tuple[str, str],
                    overwrite: bool = False, pairs: Path | None = None, subword_model: Path | None = None,
                    corpora: Path | None = None) -> dict:
    """Write the data directory `out` and return its manifest. `corpora` (a YAML list of named corpora) or `pairs`
    (one of language pairs) replaces `splits`; `subword_model` (a checkpoint or a SentencePiece model) encodes with
    its vocabulary instead of training one, for `splits` or `corpora`."""
    listed = _listed_corpora(splits, pairs, corpora, subword_model)
    subwords = vocabulary_of(subword_model) if subword_model else None
    if listed is None:
        return prepare_data(splits, out, config, langs, overwrite, subwords)
    return prepare_corpora(listed, out, config, langs, overwrite, subwords)


def _listed_corpora(splits: dict[str, SplitFiles], pairs: Path | None, corpora: Path | None,
                    subword_model: Path | None) -> list[Corpus] | None:
    """The corpora of the --corpora or --pairs file; None when neither is given."""
    if pairs is None and corpora is None:
        return None
    if splits or (pairs and corpora) or (pairs and subword_model):
        raise NmtkitError("--corpora (or --pairs) lists every file of the data directory; it does not combine with "
                          "--train-*/--dev-*/--test-* or the other of --corpora/--pairs, and --pairs not with "
                          "--subword-model (--corpora takes the same file)")
    return read_pairs(pairs) if pairs is not None else read_corpora(corpora)


def vocabulary_of(path: str | Path) -> tuple[Subword, Subword]:
    """The (source, target) subword models to encode new data with: a checkpoint's, or one SentencePiece model
    file for both sides (the same object twice, a joint vocabulary)."""
    path = Path(path)
    if path.suffix == ".pt":
        saved = load_checkpoint(path)["subword"]
        try:
            source = Subword(saved["src"])
            return source, source if saved["joint"] else Subword(saved["tgt"])
        except RuntimeError as error:  # SentencePiece refuses bytes that are not a model
            raise NmtkitError(f"checkpoint {path} is damaged (its subword model); use another checkpoint") from error
    try:
        model = Subword(read_small(path, "subword model"))
    except RuntimeError as error:  # SentencePiece refuses bytes that are not a model
        raise NmtkitError(f"{path} is not a SentencePiece model or an nmtkit checkpoint (.pt)") from error
    return model, model
