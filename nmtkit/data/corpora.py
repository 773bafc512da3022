"""Named corpora for one data directory (`nmtkit prepare --corpora corpora.yaml`): the YAML list, and what the
manifest says of each corpus, for the training side to read.

    - {name: clean, src: train.es, tgt: train.en, dev: [dev.es, dev.en], test: test.tsv}
    - {name: crawled, tsv: crawl.tsv.gz}
    - {name: bt, src: bt.es.gz, tgt: bt.en.gz, tag: "<bt>"}

Training files are `src` and `tgt` (line-aligned), `tsv` (`source<TAB>target`), or `train` (a TSV file or
[source, target], as in a `--pairs` file); `dev` and `test` take a TSV file or [source, target]; a name ending in
`.gz` is read through gzip. `src_lang`/`tgt_lang` (both or neither, and then in every corpus) make a multilingual
directory with a target-language tag per source (`nmtkit.data.multilingual`); without them a corpus needs a `name`
(with them it defaults to `src_lang-tgt_lang`). `tag` starts each training source of the corpus with that corpus
tag (`nmtkit.data.tags`). `clean` sets the corpus' own cleaning settings, any of `FILTER_KEYS` of `data` (e.g.
`clean: {langid: false, max_ratio: 0}` for a clean seed left alone, `{copies: 0.8, numbers: true}` for a crawl);
the others come from the command's. File names are relative to the YAML file.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from nmtkit.config.sections import FILTER_KEYS, DataConfig
from nmtkit.config.values import from_dict
from nmtkit.data.lines import read_small
from nmtkit.data.prepare import SplitFiles
from nmtkit.data.tags import check_tag
from nmtkit.errors import NmtkitError

LANGUAGE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,15}")
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
KEYS = ("name", "src", "tgt", "tsv", "train", "dev", "test", "src_lang", "tgt_lang", "tag", "clean")


@dataclass
class Corpus:
    """One corpus' files, its languages (a multilingual directory), its tag and its own cleaning settings."""

    name: str
    splits: dict[str, SplitFiles]
    src_lang: str | None = None
    tgt_lang: str | None = None
    tag: str | None = None
    clean: dict = field(default_factory=dict)

    def settings(self, config: DataConfig) -> DataConfig:
        """`config` with the corpus' own cleaning settings."""
        return dataclasses.replace(config, **self.clean)


def _clean(value: object, where: str) -> dict:
    """A corpus' `clean` mapping, checked as `data` settings are (types, ranges), of `FILTER_KEYS` only."""
    if not isinstance(value, dict):
        raise NmtkitError(f"{where} clean: expected a mapping of cleaning settings, e.g. {{langid: false}}")
    for key in value:
        if key not in FILTER_KEYS:
            raise NmtkitError(f"{where} clean: unknown key {key!r}; a corpus may set {', '.join(FILTER_KEYS)}")
    checked = from_dict(DataConfig, value, f"{where} clean.")
    return {key: getattr(checked, key) for key in value}


def _files(value: object, where: str, base: Path) -> SplitFiles:
    if isinstance(value, str):
        return SplitFiles(tsv=base / value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(item, str) for item in value):
        return SplitFiles(src=base / value[0], tgt=base / value[1])
    raise NmtkitError(f"{where}: expected a TSV file or [source file, target file], got {value!r}")


def _train_files(entry: dict, where: str, base: Path) -> SplitFiles:
    """The training files: `src` and `tgt`, `tsv`, or `train`, exactly one of them."""
    given = [key for key in ("src", "tgt", "tsv", "train") if key in entry]
    if not given:
        raise NmtkitError(f"{where}: no train files (src and tgt, tsv, or train)")
    if given == ["src", "tgt"]:
        return _files([entry["src"], entry["tgt"]], f"{where} src/tgt", base)
    if given == ["tsv"]:
        return _files(entry["tsv"], f"{where} tsv", base)
    if given == ["train"]:
        return _files(entry["train"], f"{where} train", base)
    raise NmtkitError(f"{where}: give the training files one way: src and tgt, tsv, or train (got {', '.join(given)})")


def _languages(entry: dict, where: str) -> tuple[str, str] | None:
    langs = (entry.get("src_lang"), entry.get("tgt_lang"))
    if langs == (None, None):
        return None
    for lang in langs:
        if not isinstance(lang, str) or not LANGUAGE.fullmatch(lang):
            raise NmtkitError(f"{where}: language {lang!r} is not a language code such as de or zh_CN "
                              "(give both src_lang and tgt_lang, or neither)")
    return langs


def _corpus(entry: object, where: str, base: Path) -> Corpus:
    if not isinstance(entry, dict):
        raise NmtkitError(f"{where}: expected a mapping with a name and training files (src and tgt, or tsv)")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise NmtkitError(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(KEYS)}")
    langs = _languages(entry, where)
    name = entry.get("name", f"{langs[0]}-{langs[1]}" if langs else None)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise NmtkitError(f"{where}: " + ("no name" if name is None else f"name {name!r} is not a simple name") +
                          "; a corpus is named with letters, digits, _ . and - (e.g. name: clean)")
    where = f"{where} ({name})"
    splits = {"train": _train_files(entry, where, base)}
    splits |= {split: _files(entry[split], f"{where} {split}", base) for split in ("dev", "test") if split in entry}
    tag = check_tag(entry["tag"], where) if "tag" in entry else None
    clean = _clean(entry["clean"], where) if "clean" in entry else {}
    return Corpus(name, splits, *(langs or (None, None)), tag, clean)


def read_corpora(path: Path) -> list[Corpus]:
    """The corpora of a YAML list; names are unique, and either every corpus gives its languages or none does."""
    try:
        entries = yaml.safe_load(read_small(path, "yaml"))
    except yaml.YAMLError as error:
        raise NmtkitError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from error
    if not isinstance(entries, list) or not entries:
        raise NmtkitError(f"{path} must hold a list of corpora or a list of language pairs, each a mapping of "
                          "name, training files (src and tgt, or tsv), dev, test, src_lang, tgt_lang, tag, clean")
    corpora = [_corpus(entry, f"{path}: corpus {index}", path.parent) for index, entry in enumerate(entries, 1)]
    seen: set[str] = set()
    for corpus in corpora:
        if corpus.name in seen:
            raise NmtkitError(f"{path}: corpus {corpus.name!r} is listed twice; give each corpus its own name")
        seen.add(corpus.name)
    with_langs = [corpus.src_lang is not None for corpus in corpora]
    if any(with_langs) and not all(with_langs):
        name = corpora[with_langs.index(False)].name
        raise NmtkitError(f"{path}: corpus {name!r} has no src_lang/tgt_lang while others have: give every corpus "
                          "its languages (a multilingual directory) or none (one language pair, --src-lang/--tgt-lang)")
    return corpora


def corpus_ranges(manifest: dict) -> dict[str, tuple[range, ...]]:
    """Where each corpus' lines are in the train split: one range per copy of the corpus (`data.subword_samples`
    copies, each holding every corpus in turn); empty for a directory prepared without --corpora."""
    corpora = manifest.get("corpora", [])
    copies = manifest["splits"]["train"].get("subword_samples", 1)
    stride = sum(corpus["train"]["count"] for corpus in corpora)
    return {corpus["name"]: tuple(range(copy * stride + corpus["train"]["start"],
                                        copy * stride + corpus["train"]["start"] + corpus["train"]["count"])
                                  for copy in range(copies)) for corpus in corpora}


def check_corpus_names(manifest: dict, names: list[str]) -> None:
    """An error naming the first of `names` that is not a corpus of the data directory."""
    known = [corpus["name"] for corpus in manifest.get("corpora", [])]
    for name in names:
        if name not in known:
            has = f"its corpora are {', '.join(known)}" if known else "it was prepared without --corpora"
            raise NmtkitError(f"corpus {name!r} is not in the data directory ({has}); add it to the corpora file "
                              "and prepare again")
