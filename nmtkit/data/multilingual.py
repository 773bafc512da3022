"""Several language pairs in one data directory, for one multilingual model (Johnson et al. 2017, Section 3).

Each source sentence starts with a tag naming the language to translate into (`<2de>`). The tags are SentencePiece
control symbols: ids of their own that no text encodes to and that decode to nothing, so a user's text can never
turn into a tag and a tag never reaches the output. One joint vocabulary covers every language. Each pair is
filtered on its own (its own median length ratio); `{split}.corpus.npy` holds each line's pair, for validation per
pair and for sampling pairs with a temperature (`train.pair_temperature`, `nmtkit.training.mix`).

The pairs come from a YAML list (`nmtkit prepare --pairs pairs.yaml`):

    - {src_lang: en, tgt_lang: de, train: [train.en, train.de], dev: [dev.en, dev.de], test: [test.en, test.de]}
    - {src_lang: de, tgt_lang: en, train: train.de-en.tsv}
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from nmtkit.config import DataConfig
from nmtkit.data.corpus import FilterStats, filter_pairs
from nmtkit.data.prepare import (
    SPLITS,
    SplitFiles,
    binarize,
    check_and_measure,
    check_output,
    report_filters,
    start_output,
    subword_sample,
    write_text,
)
from nmtkit.data.subword import Subword, train_subword
from nmtkit.errors import NmtkitError

LANGUAGE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,15}")


def tag(lang: str) -> str:
    """The control symbol that asks for translation into `lang`."""
    return f"<2{lang}>"


@dataclass
class Corpus:
    """One language pair's files."""

    src_lang: str
    tgt_lang: str
    splits: dict[str, SplitFiles]

    @property
    def name(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang}"


def _split_files(value: object, where: str, base: Path) -> SplitFiles:
    if isinstance(value, str):
        return SplitFiles(tsv=base / value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(item, str) for item in value):
        return SplitFiles(src=base / value[0], tgt=base / value[1])
    raise NmtkitError(f"{where}: expected a TSV file or [source file, target file], got {value!r}")


def _corpus(entry: object, where: str, base: Path) -> Corpus:
    if not isinstance(entry, dict):
        raise NmtkitError(f"{where}: expected a mapping with src_lang, tgt_lang, train (dev, test)")
    unknown = sorted(set(entry) - {"src_lang", "tgt_lang", *SPLITS})
    if unknown or "train" not in entry:
        raise NmtkitError(f"{where}: " + (f"unknown key {unknown[0]!r}" if unknown else "no train files") +
                          "; the keys are src_lang, tgt_lang, train, dev, test")
    langs = [entry.get("src_lang"), entry.get("tgt_lang")]
    for lang in langs:
        if not isinstance(lang, str) or not LANGUAGE.fullmatch(lang):
            raise NmtkitError(f"{where}: language {lang!r} is not a language code such as de or zh_CN")
    splits = {name: _split_files(entry[name], f"{where} {name}", base) for name in SPLITS if name in entry}
    return Corpus(langs[0], langs[1], splits)


def read_pairs(path: Path) -> list[Corpus]:
    """The language pairs of a YAML list; file names are relative to the YAML file."""
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise NmtkitError(f"cannot read {path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise NmtkitError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from error
    if not isinstance(entries, list) or not entries:
        raise NmtkitError(f"{path} must hold a list of language pairs (src_lang, tgt_lang, train, dev, test)")
    corpora = [_corpus(entry, f"{path}: pair {index}", path.parent) for index, entry in enumerate(entries, 1)]
    names = [corpus.name for corpus in corpora]
    if len(set(names)) != len(names):
        raise NmtkitError(f"{path}: a language pair is listed twice ({', '.join(names)})")
    return corpora


def _write_split(name: str, corpora: list[Corpus], config: DataConfig, stats: list[FilterStats],
                 out: Path) -> np.ndarray:
    """`{name}.{src,tgt}.txt` of every pair in turn (train filtered) and the pair of each line (also saved)."""
    counts = []

    def pairs_of(index: int, corpus: Corpus):
        if name == "train":
            return filter_pairs(corpus.splits[name].pairs(), config, stats[index])
        return corpus.splits[name].pairs() if name in corpus.splits else iter(())

    for index, corpus in enumerate(corpora):
        counts.append(write_text(f"{name}.part{index}", pairs_of(index, corpus), out))
    for side in ("src", "tgt"):
        with open(out / f"{name}.{side}.txt", "wb") as joined:
            for index in range(len(corpora)):
                part = out / f"{name}.part{index}.{side}.txt"
                joined.write(part.read_bytes())
                part.unlink()
    lines_corpus = np.repeat(np.arange(len(corpora), dtype=np.int16), counts)
    np.save(out / f"{name}.corpus.npy", lines_corpus)
    return lines_corpus


def prepare_multilingual(corpora: list[Corpus], out: Path, config: DataConfig, overwrite: bool = False) -> dict:
    """Validate, clean and binarize several language pairs into one data directory with one joint vocabulary and
    a target-language tag at the start of every source; returns the manifest (as `prepare_data`'s, plus "pairs"
    and "tags")."""
    check_output(out, overwrite)
    stats = [check_and_measure(corpus.splits) for corpus in corpora]
    start_output(out)
    split_names = [name for name in SPLITS if any(name in corpus.splits for corpus in corpora)]
    line_corpora = {name: _write_split(name, corpora, config, stats, out) for name in split_names}
    for corpus, corpus_stats in zip(corpora, stats):
        report_filters(f"train {corpus.name}", corpus_stats)
    if not len(line_corpora["train"]):
        raise NmtkitError("no training pairs are left after filtering; check the input and the filter settings")
    tags = sorted({tag(corpus.tgt_lang) for corpus in corpora})
    count = len(line_corpora["train"])
    model = train_subword(subword_sample([out / "train.src.txt", out / "train.tgt.txt"], 2 * count, config), config,
                          config.vocab_size, tags)
    (out / "spm.model").write_bytes(model.proto)
    tag_ids = np.array([model.processor.piece_to_id(tag(corpus.tgt_lang)) for corpus in corpora])
    manifest = _manifest(corpora, config, model, stats, line_corpora)
    for name in split_names:
        manifest["splits"][name] = binarize(name, (model, model), out, tag_ids[line_corpora[name]], config)
    if config.subword_samples > 1:  # train's copies repeat its lines, so its lines' pairs repeat with them
        np.save(out / "train.corpus.npy", np.tile(line_corpora["train"], config.subword_samples))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def _manifest(corpora: list[Corpus], config: DataConfig, model: Subword, stats: list[FilterStats],
              line_corpora: dict[str, np.ndarray]) -> dict:
    total = FilterStats(read=sum(item.read for item in stats), kept=sum(item.kept for item in stats),
                        removed=sum((item.removed for item in stats), FilterStats().removed))
    pairs = [{"src_lang": corpus.src_lang, "tgt_lang": corpus.tgt_lang, "filter": corpus_stats.as_dict(),
              "sentences": {name: int((lines == index).sum()) for name, lines in line_corpora.items()}}
             for index, (corpus, corpus_stats) in enumerate(zip(corpora, stats))]
    langs = sorted({corpus.tgt_lang for corpus in corpora})
    return {"format": 1, "src_lang": "multi", "tgt_lang": "multi", "data": asdict(config),
            "vocab": {"src": model.vocab_size, "tgt": model.vocab_size},
            "subword": {"src": model.settings, "tgt": model.settings, "reused": False},
            "filter": {**total.as_dict(), "median_length_ratio": None}, "pairs": pairs,
            "tags": {lang: model.processor.piece_to_id(tag(lang)) for lang in langs}, "splits": {}}


def language_pairs(manifest: dict) -> list[tuple[str, str]]:
    """(source, target) language of each pair of a multilingual data directory, in `{split}.corpus.npy` order."""
    return [(pair["src_lang"], pair["tgt_lang"]) for pair in manifest.get("pairs", ())]

