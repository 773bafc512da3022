"""`nmtkit prepare --corpora`: named corpora (`nmtkit.data.corpora`) into one data directory with one joint
vocabulary; a multilingual directory (`nmtkit.data.multilingual`) when the corpora give their languages.

The train split is one set of binarized arrays, the corpora one after another in the order listed; the manifest's
"corpora" says where each one is (`train.start`, `train.count`: with `data.subword_samples` K the split holds K
copies of that whole sequence, see `corpus_ranges`), how many pairs it read and kept, what each filter removed, its
tag and its languages. Each corpus is filtered on its own: its own median length ratio, and duplicates removed
within the corpus, not across corpora, so that a corpus keeps the same pairs whatever else is listed (a mix's weight
for it means the same), and a pair in two corpora (one of them tagged) stays in both. Dev and test lines get the
target-language tag of a multilingual directory but no corpus tag: they stand for what users translate, untagged.

With `--subword-model` every corpus is encoded with a given vocabulary (a checkpoint's, for fine-tuning it on a mix of
corpora or for a student sharing its teacher's), nothing is trained, and the manifest says "reused" as `prepare_data`'s
does. The tags must then be in that vocabulary already, as the control symbols a corpora directory trains them as.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

from nmtkit.config.sections import DataConfig
from nmtkit.data.clean import (
    Cleaner,
    FilterStats,
    RemovedPairs,
    check_removed_file,
    filter_pairs,
    removed_pairs,
)
from nmtkit.data.corpora import Corpus
from nmtkit.data.multilingual import tag
from nmtkit.data.prepare import (
    SPLITS,
    SourcePrefixes,
    TrainingMasking,
    binarize,
    check_and_measure,
    given_languages,
    keep_subwords,
    report_filters,
    subword_sample,
    write_manifest,
    write_pairs,
)
from nmtkit.data.staging import staged_output
from nmtkit.data.subword import BOS, EOS, PAD, Subword, check_room, train_subword
from nmtkit.errors import NmtkitError


@contextlib.contextmanager
def naming(corpus: Corpus) -> Iterator[None]:
    """Errors reading the corpus' files start with its name."""
    try:
        yield
    except NmtkitError as error:
        raise NmtkitError(f"corpus {corpus.name!r}: {error}") from error


def prepare_corpora(corpora: list[Corpus], out: Path, config: DataConfig, langs: tuple[str, str] = ("src", "tgt"),
                    overwrite: bool = False, subwords: tuple[Subword, Subword] | None = None) -> dict:
    """Validate, clean and binarize the corpora into one data directory and return its manifest (as `prepare_data`'s,
    plus "corpora", "corpus_tags" and, when multilingual, "pairs" and "tags"). `langs` names the one language pair
    of corpora that give no languages. `subwords` (source, target) encode instead of a joint model trained on the
    corpora; they must hold the corpora's tags and, with data.placeholders, the reserved symbols. Written as
    `prepare_data` writes, through a staging directory."""
    if subwords is None and not config.joint:
        raise NmtkitError("--corpora and --pairs train one joint vocabulary for every corpus; drop --separate "
                          "(data.joint=false)")
    if subwords is not None:
        TrainingMasking.of(config).check_vocabulary(subwords)
        _check_tags(corpora, subwords[0])
    else:
        check_room(config, config.vocab_size, [symbol for symbol, _ in _tags(corpora)],
                   TrainingMasking.of(config).symbols)
    cleaners = [_cleaner(corpus, config, langs) for corpus in corpora]
    corpora = [dataclasses.replace(corpus, splits={name: files.capped(config) for name, files in corpus.splits.items()})
               for corpus in corpora]
    inputs = [item for corpus in corpora for files in corpus.splits.values() for item in files.inputs()]
    check_removed_file(config, inputs, out)
    with staged_output(out, overwrite) as staging, removed_pairs(config) as removed:
        return _write_corpora(corpora, staging, config, langs, subwords, Filtering(cleaners, removed))


@dataclasses.dataclass
class Filtering:
    """How each corpus' training pairs are cleaned (its own settings and languages), and where removed pairs go."""

    cleaners: list[Cleaner]
    removed: RemovedPairs | None

    def pairs(self, index: int, corpus: Corpus, stats: FilterStats) -> Iterator[tuple[str, str]]:
        removed = self.removed.labelled(corpus.name) if self.removed is not None else None
        return filter_pairs(corpus.splits["train"].pairs(), self.cleaners[index], stats, removed)


def _cleaner(corpus: Corpus, config: DataConfig, langs: tuple[str, str]) -> Cleaner:
    """The filters of a corpus: its settings (`clean`) over the command's, its languages or the command's."""
    with naming(corpus):
        corpus_langs = (corpus.src_lang, corpus.tgt_lang) if corpus.src_lang is not None else given_languages(langs)
        return Cleaner(corpus.settings(config), corpus_langs)


def _tags(corpora: list[Corpus]) -> list[tuple[str, Corpus]]:
    """Each control symbol the corpora's sources start with (target-language tags, then corpus tags, each sorted),
    with the first corpus that uses it."""
    languages = {tag(corpus.tgt_lang): corpus for corpus in reversed(corpora) if corpus.src_lang is not None}
    corpus_tags = {corpus.tag: corpus for corpus in reversed(corpora) if corpus.tag}
    return sorted(languages.items()) + sorted(corpus_tags.items())


def _check_tags(corpora: list[Corpus], subword: Subword) -> None:
    """An error naming the first tag of the corpora that the given source vocabulary does not hold as a tag."""
    processor = subword.processor
    known = [processor.id_to_piece(index) for index in range(subword.vocab_size)
             if processor.is_control(index) and index not in (PAD, BOS, EOS)]
    for symbol, corpus in _tags(corpora):
        if symbol not in known:
            has = f"its tags are {', '.join(known)}" if known else "it was trained without tags"
            raise NmtkitError(f"corpus {corpus.name!r}: the given subword model has no tag {symbol!r} ({has}); give "
                              "the vocabulary of a model trained with that tag, or prepare without --subword-model")


def _write_split(name: str, corpora: list[Corpus], filtering: Filtering, stats: list[FilterStats],
                 out: Path, masking: TrainingMasking, learn: bool) -> list[int]:
    """`{name}.{src,tgt}.txt`: every corpus' lines in turn (train filtered and masked; unmasked too when a subword
    model is to be `learn`t), streamed; the lines of each corpus."""
    counts = []
    with open(out / f"{name}.src.txt", "w", encoding="utf-8") as src, \
            open(out / f"{name}.tgt.txt", "w", encoding="utf-8") as tgt, \
            masking.unmasked(out, learn and name == "train") as originals:
        for index, (corpus, corpus_stats) in enumerate(zip(corpora, stats)):
            with naming(corpus):
                if name == "train":
                    pairs = masking.pairs(filtering.pairs(index, corpus, corpus_stats), originals)
                else:
                    pairs = corpus.splits[name].pairs() if name in corpus.splits else iter(())
                counts.append(write_pairs(pairs, src, tgt))
    return counts


def _measure(corpus: Corpus) -> FilterStats:
    with naming(corpus):
        return check_and_measure(corpus.splits)


def _write_corpora(corpora: list[Corpus], out: Path, config: DataConfig, langs: tuple[str, str],
                   subwords: tuple[Subword, Subword] | None, filtering: Filtering) -> dict:
    masking = TrainingMasking.of(config)
    stats = [_measure(corpus) for corpus in corpora]
    split_names = [name for name in SPLITS if any(name in corpus.splits for corpus in corpora)]
    counts = {name: _write_split(name, corpora, filtering, stats, out, masking, subwords is None)
              for name in split_names}
    for corpus, corpus_stats in zip(corpora, stats):
        report_filters(f"train {corpus.name}", corpus_stats)
        if not corpus_stats.kept:
            raise NmtkitError(f"corpus {corpus.name!r}: no training pairs are left after filtering; check its files "
                              "and the filter settings")
    multilingual = corpora[0].src_lang is not None
    models = keep_subwords(out, subwords) if subwords is not None else \
        _train_joint(out, sum(counts["train"]), config, [symbol for symbol, _ in _tags(corpora)], masking.symbols)
    masking.drop_unmasked(out)
    manifest = _manifest(corpora, config, models, stats, counts, langs) | \
        {"placeholders": masking.record(config.placeholders)}
    manifest["subword"]["reused"] = subwords is not None
    for name in split_names:
        line_corpus = np.repeat(np.arange(len(corpora)), counts[name])
        prefixes = _prefixes(corpora, models[0], multilingual, with_corpus_tags=name == "train")
        source_prefixes = SourcePrefixes(prefixes, line_corpus) if prefixes else None
        manifest["splits"][name] = binarize(name, models, out, source_prefixes, config)
        if multilingual:
            _save_line_pairs(out, name, corpora, line_corpus, manifest["splits"][name].get("subword_samples", 1))
    write_manifest(out, manifest)
    return manifest


def _train_joint(out: Path, kept: int, config: DataConfig, tags: list[str],
                 placeholder_symbols: list[str]) -> tuple[Subword, Subword]:
    """One SentencePiece model for both sides, trained on the corpora's kept pairs with their tags (control
    symbols) and placeholder symbols, written to `out`."""
    model = train_subword(subword_sample(TrainingMasking.subword_texts(out), 2 * kept, config), config,
                          config.vocab_size, tags, placeholder_symbols)
    (out / "spm.model").write_bytes(model.proto)
    return model, model


def _prefixes(corpora: list[Corpus], model: Subword, multilingual: bool, with_corpus_tags: bool) -> list[list[int]]:
    """Each corpus' source prefix (target-language tag, then corpus tag); [] when no corpus has one."""
    piece_id = model.processor.piece_to_id
    prefixes = [([piece_id(tag(corpus.tgt_lang))] if multilingual else []) +
                ([piece_id(corpus.tag)] if with_corpus_tags and corpus.tag else []) for corpus in corpora]
    return prefixes if any(prefixes) else []


def _pair_index(corpora: list[Corpus]) -> list[int]:
    """Each corpus' language pair, as an index into the distinct pairs in the order they first appear."""
    pairs = list(dict.fromkeys((corpus.src_lang, corpus.tgt_lang) for corpus in corpora))
    return [pairs.index((corpus.src_lang, corpus.tgt_lang)) for corpus in corpora]


def _save_line_pairs(out: Path, name: str, corpora: list[Corpus], line_corpus: np.ndarray, copies: int) -> None:
    """`{name}.corpus.npy`: each line's language pair (train's copies repeat their lines, so their pairs too)."""
    line_pairs = np.array(_pair_index(corpora), dtype=np.int16)[line_corpus]
    np.save(out / f"{name}.corpus.npy", np.tile(line_pairs, copies))


def _total(stats: list[FilterStats]) -> dict:
    total = FilterStats(read=sum(item.read for item in stats), kept=sum(item.kept for item in stats),
                        removed=sum((item.removed for item in stats), FilterStats().removed),
                        unjudged=sum((item.unjudged for item in stats), FilterStats().unjudged),
                        notes=list(dict.fromkeys(note for item in stats for note in item.notes)))
    return {**total.as_dict(), "median_length_ratio": None}


def _manifest(corpora: list[Corpus], config: DataConfig, models: tuple[Subword, Subword], stats: list[FilterStats],
              counts: dict[str, list[int]], langs: tuple[str, str]) -> dict:
    piece_id = models[0].processor.piece_to_id  # tags start sources
    starts = np.cumsum([0, *counts["train"]])
    entries = [{"name": corpus.name, "src_lang": corpus.src_lang, "tgt_lang": corpus.tgt_lang, "tag": corpus.tag,
                "train": {"start": int(starts[index]), "count": counts["train"][index]},
                "sentences": {name: split_counts[index] for name, split_counts in counts.items()},
                "filter": stats[index].as_dict(), "clean": corpus.clean} for index, corpus in enumerate(corpora)]
    manifest = {"format": 1, "src_lang": langs[0], "tgt_lang": langs[1], "data": asdict(config),
                "vocab": {"src": models[0].vocab_size, "tgt": models[1].vocab_size},
                "subword": {"src": models[0].settings, "tgt": models[1].settings},
                "filter": _total(stats), "corpora": entries,
                "corpus_tags": {corpus.tag: piece_id(corpus.tag) for corpus in corpora if corpus.tag}, "splits": {}}
    if corpora[0].src_lang is not None:
        manifest |= {"src_lang": "multi", "tgt_lang": "multi", "pairs": _pairs(corpora, stats, counts),
                     "tags": {lang: piece_id(tag(lang)) for lang in sorted({corpus.tgt_lang for corpus in corpora})}}
    return manifest


def _pairs(corpora: list[Corpus], stats: list[FilterStats], counts: dict[str, list[int]]) -> list[dict]:
    """The manifest's language pairs, in `{split}.corpus.npy` order: each one's corpora's counts summed."""
    index = _pair_index(corpora)
    pairs = []
    for pair in range(max(index) + 1):
        members = [position for position, value in enumerate(index) if value == pair]
        first = corpora[members[0]]
        pairs.append({"src_lang": first.src_lang, "tgt_lang": first.tgt_lang,
                      "corpora": [corpora[position].name for position in members],
                      "filter": _total([stats[position] for position in members]),
                      "sentences": {name: sum(split_counts[position] for position in members)
                                    for name, split_counts in counts.items()}})
    return pairs
