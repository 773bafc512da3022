"""A directory written by `nmtkit export` as the translator reads it: nmtkit.json and the subword model(s) beside
CTranslate2's own files (the writer is `nmtkit.export.ctranslate2`; the search, `ctranslate2_engine`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.config import DecodeConfig
from nmtkit.config_values import from_dict
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError

MANIFEST, MANIFEST_FORMAT = "nmtkit.json", 1
SOURCE_SUBWORD, TARGET_SUBWORD = "source.spm", "target.spm"
VMAP = "vmap.txt"  # the vocabulary shortlist, in CTranslate2's format (`nmtkit.export.shortlist`)


@dataclass
class ExportedModel:
    """What an exported directory holds besides CTranslate2's own files (see `nmtkit.export.ctranslate2`)."""

    directory: Path
    decode: DecodeConfig  # the checkpoint's decode settings
    max_positions: int  # the longest sequence its position table holds
    src_subword: Subword
    tgt_subword: Subword
    langs: tuple[str | None, str | None]
    quantization: str
    tags: dict[str, int] = field(default_factory=dict)  # a multilingual model's target languages and their tag ids
    shortlist: bool = False  # searched over a vocabulary shortlist (`nmtkit.export.shortlist`)
    placeholders: dict | None = None  # the checkpoint's placeholder masking (its training data's); None: none


def is_exported(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def load_exported(directory: Path) -> ExportedModel:
    """Read an exported directory's nmtkit.json and subword model(s); a foreign directory is a one-line error."""
    if not is_exported(directory):
        raise NmtkitError(f"{directory} is not a model exported by nmtkit export (it has no {MANIFEST})")
    try:
        info = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        if info.get("format") != MANIFEST_FORMAT:
            raise NmtkitError(f"{directory / MANIFEST} has format {info.get('format')}; this nmtkit reads format "
                              f"{MANIFEST_FORMAT}: export the checkpoint again")
        src_subword = Subword((directory / info["subword"]["src"]).read_bytes())
        joint = info["subword"]["joint"]
        tgt_subword = src_subword if joint else Subword((directory / info["subword"]["tgt"]).read_bytes())
        config = info["config"]  # the checkpoint's whole config, read without the models (and torch)
        max_positions = int(config["model"]["max_positions"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise NmtkitError(f"{directory} is a damaged export ({type(error).__name__}: {error}); export it again") \
            from error
    langs = info.get("langs") or {}
    shortlist = bool(info.get("shortlist"))
    if shortlist and not (directory / VMAP).is_file():
        raise NmtkitError(f"{directory} is a damaged export (its shortlist {VMAP} is missing); export it again")
    decode = from_dict(DecodeConfig, config.get("decode") or {}, "decode.")
    return ExportedModel(directory, decode, max_positions, src_subword, tgt_subword,
                         (langs.get("src"), langs.get("tgt")), info.get("quantization", "?"), langs.get("tags") or {},
                         shortlist, info.get("placeholders"))
