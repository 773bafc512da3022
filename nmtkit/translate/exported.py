"""A directory written by `nmtkit export` as the translator reads it: nmtkit.json and the subword model(s) beside
CTranslate2's own files (the writer is `nmtkit.export.ctranslate2`; the search, `ctranslate2_engine`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.config.sections import DecodeConfig
from nmtkit.config.values import from_dict
from nmtkit.data.lines import SMALL_FILE_BYTES
from nmtkit.data.subword import EOS, Subword
from nmtkit.data.tags import checked_tag_ids
from nmtkit.errors import NmtkitError

MANIFEST, MANIFEST_FORMAT = "nmtkit.json", 1
# an export whose `language_tags` change how CTranslate2 is called (M2M100, NLLB): a format an nmtkit that would
# ignore the record refuses; every other export keeps format 1
DECODER_TAGS_FORMAT = 2
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
    # a model that reads its target-language tag in the decoder (M2M100, NLLB): the token its source reads in the
    # tag's place; None: the decoder starts with BOS and the tag, if any, starts the source
    source_token: int | None = None


def is_exported(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def own_path(directory: Path, name: object, what: str) -> Path:
    """File `name` of an exported directory (`what` it is, for errors): a plain name (no folder, not absolute) of a
    regular file that stays inside the directory once links are followed; else a one-line error (an nmtkit.json
    that names `../../etc/passwd`, or a link out of the directory, reads nothing outside it)."""
    if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
        raise NmtkitError(f"{directory / MANIFEST} names {name!r} as its {what}, not a file of {directory}; export "
                          "the model again")
    path = directory / name
    if not path.exists():
        raise NmtkitError(f"{directory} is a damaged export (its {what} {name} is missing); export it again")
    resolved = path.resolve()
    if resolved.parent != directory.resolve() or not resolved.is_file():
        raise NmtkitError(f"{directory} is a damaged export (its {what} {name} is not a file of the directory: a "
                          "link out of it, or a folder); export it again")
    return resolved


def own_file(directory: Path, name: object, what: str) -> bytes:
    """The bytes of `own_path`, of at most the bound for `what` it is (`SMALL_FILE_BYTES`; read no further)."""
    limit = SMALL_FILE_BYTES[what]
    with open(own_path(directory, name, what), "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise NmtkitError(f"{directory} is a damaged export (its {what} {name} is over {limit} bytes); export it "
                          "again")
    return data


def read_manifest(directory: Path) -> dict:
    """An exported directory's nmtkit.json, of this nmtkit's format."""
    try:
        info = json.loads(own_file(directory, MANIFEST, "manifest").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise NmtkitError(f"{directory / MANIFEST} is damaged ({type(error).__name__}); export the model again") \
            from error
    if not isinstance(info, dict) or info.get("format") not in (MANIFEST_FORMAT, DECODER_TAGS_FORMAT):
        found = info.get("format") if isinstance(info, dict) else None
        raise NmtkitError(f"{directory / MANIFEST} has format {str(found)[:20]}; this nmtkit reads formats "
                          f"{MANIFEST_FORMAT} and {DECODER_TAGS_FORMAT}: "
                          "export the checkpoint again")
    return info


def read_subword(directory: Path, name: object) -> Subword:
    try:
        return Subword(own_file(directory, name, "subword model"))
    except RuntimeError as error:  # SentencePiece refuses bytes that are not a model
        raise NmtkitError(f"{directory} is a damaged export ({name} is not a SentencePiece model); export it "
                          "again") from error


def read_language_tags(directory: Path, info: dict, vocab_size: int, tags: dict[str, int]) -> int | None:
    """The source token of nmtkit.json's `language_tags` (`nmtkit.export.ctranslate2.language_tags`); None for a
    manifest without them (the decoder starts with BOS), a one-line error for any other."""
    record = info.get("language_tags")
    if (record is None) != (info["format"] == MANIFEST_FORMAT):
        raise NmtkitError(f"{directory} is a damaged export (format {info['format']} with"
                          f"{'out' if record is None else ''} language_tags); export it again")
    if record is None:
        return None
    token = record.get("source_token") if isinstance(record, dict) else None
    if record != {"where": "decoder", "decoder_start": EOS, "source_token": token} or isinstance(token, bool) \
            or not isinstance(token, int) or not 0 <= token < vocab_size or not tags:
        raise NmtkitError(f"{directory} is a damaged export (its language_tags {str(record)[:200]!r} are not a "
                          "source token of the vocabulary read with a decoder that starts with </s>, nor are "
                          "there tags); export it again")
    return token


def load_exported(directory: Path) -> ExportedModel:
    """Read an exported directory's nmtkit.json and subword model(s); a foreign or damaged directory, or one whose
    nmtkit.json names files outside it, is a one-line error."""
    if not is_exported(directory):
        raise NmtkitError(f"{directory} is not a model exported by nmtkit export (it has no {MANIFEST})")
    info = read_manifest(directory)
    try:
        src_subword = read_subword(directory, info["subword"]["src"])
        joint = info["subword"]["joint"] is True
        tgt_subword = src_subword if joint else read_subword(directory, info["subword"]["tgt"])
        config = info["config"]  # the checkpoint's whole config, read without the models (and torch)
        max_positions = int(config["model"]["max_positions"])
    except (ValueError, KeyError, TypeError) as error:
        raise NmtkitError(f"{directory} is a damaged export ({type(error).__name__}: {error}); export it again") \
            from error
    if max_positions < 2:
        raise NmtkitError(f"{directory} is a damaged export (max_positions {max_positions}); export it again")
    langs = info.get("langs") or {}
    tags = checked_tag_ids(langs.get("tags"), src_subword.vocab_size, f"{directory} is a damaged export")
    shortlist = bool(info.get("shortlist"))
    if shortlist:
        own_path(directory, VMAP, "shortlist")  # CTranslate2 reads it
    decode = from_dict(DecodeConfig, config.get("decode") or {}, "decode.")
    source_token = read_language_tags(directory, info, src_subword.vocab_size, tags)
    return ExportedModel(directory, decode, max_positions, src_subword, tgt_subword,
                         (langs.get("src"), langs.get("tgt")), info.get("quantization", "?"), tags,
                         shortlist, info.get("placeholders"), source_token)
