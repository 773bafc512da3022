"""`nmtkit prepare`: parallel text -> data directory (clean text, subword model(s), binarized splits)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from nmtkit.config.sections import MAX_LINE_BYTES, DataConfig
from nmtkit.data.clean import (
    Cleaner,
    FilterStats,
    RemovedPairs,
    check_removed_file,
    filter_pairs,
    removed_pairs,
)
from nmtkit.data.corpus import iter_lines, iter_parallel, iter_tsv, median_length_ratio
from nmtkit.data.dataset import TokenWriter
from nmtkit.data.lines import read_small
from nmtkit.data.staging import staged_output
from nmtkit.data.subword import UNK, Subword, check_room, train_subword
from nmtkit.errors import NmtkitError
from nmtkit.symbols.placeholders import PairMasking, Patterns, load_patterns, mask_pair, reserved_symbols

log = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")
UNNAMED = ("src", "tgt")  # the languages of a pair when --src-lang/--tgt-lang and the files' suffixes give none


CHUNK = 100_000  # lines encoded at once: memory is bounded by the chunk, not the corpus


@dataclass
class SplitFiles:
    """Where one split comes from: two line-aligned files or one TSV file; none of them when the split is not given.
    `name` names the split's command-line options in errors."""

    src: Path | None = None
    tgt: Path | None = None
    tsv: Path | None = None
    name: str = "train"
    max_line_bytes: int = MAX_LINE_BYTES  # data.max_line_bytes: `capped` sets it

    def __post_init__(self):
        if self.tsv is not None and (self.src or self.tgt):
            raise NmtkitError(f"give either --{self.name}-tsv or --{self.name}-src/--{self.name}-tgt, not both")
        if (self.src is None) != (self.tgt is None):
            raise NmtkitError(f"--{self.name}-src and --{self.name}-tgt must be given together")

    @property
    def given(self) -> bool:
        return self.src is not None or self.tsv is not None

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The (source, target) lines, read one at a time and checked (UTF-8, equal line counts, not empty)."""
        if self.tsv is not None:
            return iter_tsv(self.tsv, self.max_line_bytes)
        return iter_parallel(self.src, self.tgt, self.max_line_bytes)

    def capped(self, config: DataConfig) -> SplitFiles:
        """These files, read with `config.max_line_bytes`."""
        return dataclasses.replace(self, max_line_bytes=config.max_line_bytes)

    def inputs(self) -> list[tuple[str, Path | None]]:
        """(option, path) of each file given, for `refuse_onto_inputs`."""
        return [(f"--{self.name}-{kind}", path) for kind, path in (("src", self.src), ("tgt", self.tgt),
                                                                    ("tsv", self.tsv))]

    def check(self) -> int:
        """Read the files through once, before any work: their errors surface now; returns the number of pairs."""
        return sum(1 for _ in self.pairs())


UNMASKED = ("train.src.unmasked.txt", "train.tgt.unmasked.txt")  # the masked training pairs as they came


@dataclass
class TrainingMasking:
    """How prepare masks the placeholders of the training pairs (`data.placeholders`; `nmtkit.symbols.placeholders`):
    the pattern set (None: nothing is masked) and the counts of what was masked.

    Only train is masked: dev and test stay as the user gave them, since they stand for what users translate and
    validation translates dev as `translate` does (so dev loss is measured on unmasked pairs). A subword model to be
    learnt learns from the unmasked training text, with the reserved symbols added (docs/translate.md, "Vocabulary
    or training signal?": one learnt on the masked text cost Japanese 0.7 BLEU over three seeds)."""

    patterns: Patterns | None
    counts: PairMasking = field(default_factory=PairMasking)

    @classmethod
    def of(cls, config: DataConfig) -> TrainingMasking:
        return cls(load_patterns(config.placeholders))

    def pairs(self, pairs: Iterable[tuple[str, str]],
              originals: tuple[TextIO, TextIO] | None = None) -> Iterable[tuple[str, str]]:
        """`pairs` with the placeholders both sides have masked alike (`mask_pair`); with `originals`, each pair is
        also written there as it came (`unmasked`)."""
        if self.patterns is None:
            return pairs
        return (self._masked(src, tgt, originals) for src, tgt in pairs)

    def _masked(self, src: str, tgt: str, originals: tuple[TextIO, TextIO] | None) -> tuple[str, str]:
        if originals is not None:
            originals[0].write(src + "\n")
            originals[1].write(tgt + "\n")
        return mask_pair(src, tgt, self.patterns, self.counts)

    @contextlib.contextmanager
    def unmasked(self, out: Path, learn: bool) -> Iterator[tuple[TextIO, TextIO] | None]:
        """Files for `pairs`' originals in `out` while a subword model is to be `learn`t and something is masked
        (else None); `subword_texts` names them, and they are removed once it has learnt."""
        if self.patterns is None or not learn:
            yield None
            return
        with open(out / UNMASKED[0], "w", encoding="utf-8") as src, open(out / UNMASKED[1], "w",
                                                                         encoding="utf-8") as tgt:
            yield src, tgt

    @staticmethod
    def subword_texts(out: Path) -> list[Path]:
        """The training text a subword model learns from: unmasked when `unmasked` wrote it; removed with
        `drop_unmasked` after."""
        unmasked = [out / name for name in UNMASKED]
        return unmasked if unmasked[0].exists() else [out / "train.src.txt", out / "train.tgt.txt"]

    @staticmethod
    def drop_unmasked(out: Path) -> None:
        for name in UNMASKED:
            (out / name).unlink(missing_ok=True)

    @property
    def symbols(self) -> list[str]:
        """The user-defined symbols the subword model(s) must hold."""
        return reserved_symbols() if self.patterns is not None else []

    def check_vocabulary(self, subwords: tuple[Subword, Subword]) -> None:
        """An error for a reused subword model without the reserved symbols."""
        if any(subword.processor.piece_to_id(symbol) == UNK for subword in subwords for symbol in self.symbols):
            raise NmtkitError("data.placeholders masks placeholders to symbols this subword model lacks (it was "
                              "trained without data.placeholders); prepare with data.placeholders=none")

    def record(self, rule: str) -> dict | None:
        """The manifest's "placeholders": the rule, its families by content, the symbols reserved, the counts."""
        if self.patterns is None:
            return None
        log.info("placeholders: %d masked in %d training pairs; %d left as text (on one side only)",
                 self.counts.masked, self.counts.lines, self.counts.one_sided)
        return {"rule": rule, "families": self.patterns.as_dict(), "reserved_symbols": len(self.symbols),
                "train": asdict(self.counts)}


def load_subwords(data_dir: Path) -> tuple[Subword, Subword]:
    """The (source, target) subword models of a data directory; the same object twice when joint."""
    joint = data_dir / "spm.model"
    if joint.exists():
        model = read_subword(joint)
        return model, model
    return read_subword(data_dir / "spm.src.model"), read_subword(data_dir / "spm.tgt.model")


def read_subword(path: Path) -> Subword:
    try:
        return Subword(read_small(path, "subword model"))
    except RuntimeError as error:  # SentencePiece refuses bytes that are not a model
        raise NmtkitError(f"{path} is not a SentencePiece model; prepare the data again") from error


def subword_sample(paths: list[Path], count: int, config: DataConfig) -> Iterator[str]:
    """The lines of `paths` (`count` in all) SentencePiece trains on: every line, or `config.max_sentences` of them
    drawn at random with `config.seed`, read from disk in file order. (Prepare wrote `paths` from lines it had
    capped; masking may have lengthened them, so they are read without a cap.)"""
    lines = (line for path in paths for line in iter_lines(path, None))
    if not config.max_sentences or count <= config.max_sentences:
        return lines
    chosen = np.zeros(count, dtype=bool)
    chosen[random.Random(config.seed).sample(range(count), config.max_sentences)] = True
    return (line for line, keep in zip(lines, chosen) if keep)


def _train_subwords(out: Path, count: int, config: DataConfig, symbols: list[str]) -> tuple[Subword, Subword]:
    """SentencePiece model(s) from the cleaned training text in `out` (`count` pairs; unmasked: `subword_texts`),
    holding `symbols`."""
    src, tgt = TrainingMasking.subword_texts(out)
    if config.joint:
        model = train_subword(subword_sample([src, tgt], 2 * count, config), config, config.vocab_size, (), symbols)
        (out / "spm.model").write_bytes(model.proto)
        return model, model
    src_model = train_subword(subword_sample([src], count, config), config, config.vocab_size, (), symbols)
    tgt_model = train_subword(subword_sample([tgt], count, config), config, config.vocab_size, (), symbols)
    (out / "spm.src.model").write_bytes(src_model.proto)
    (out / "spm.tgt.model").write_bytes(tgt_model.proto)
    return src_model, tgt_model


def keep_subwords(out: Path, subwords: tuple[Subword, Subword]) -> tuple[Subword, Subword]:
    """Existing subword model(s) (fine-tuning: the new data in the vocabulary of a trained model), written to `out`
    as `_train_subwords` writes new ones."""
    if subwords[0] is subwords[1]:
        (out / "spm.model").write_bytes(subwords[0].proto)
    else:
        (out / "spm.src.model").write_bytes(subwords[0].proto)
        (out / "spm.tgt.model").write_bytes(subwords[1].proto)
    return subwords


def write_text(name: str, pairs: Iterable[tuple[str, str]], out: Path) -> int:
    """`{name}.src.txt` and `{name}.tgt.txt`, one pair at a time; returns the number of pairs."""
    with open(out / f"{name}.src.txt", "w", encoding="utf-8") as src, \
            open(out / f"{name}.tgt.txt", "w", encoding="utf-8") as tgt:
        return write_pairs(pairs, src, tgt)


def write_pairs(pairs: Iterable[tuple[str, str]], src: TextIO, tgt: TextIO) -> int:
    """Each pair as a line of `src` and a line of `tgt`; returns the number of pairs."""
    count = 0
    for src_line, tgt_line in pairs:
        src.write(src_line + "\n")
        tgt.write(tgt_line + "\n")
        count += 1
    return count


@dataclass
class SourcePrefixes:
    """The tag ids that start each source of a split: `ids[k]` for the lines whose `of_line` is k (a line's corpus:
    its target-language tag, then its corpus tag, see `nmtkit.data.tags`)."""

    ids: list[list[int]]
    of_line: np.ndarray

    def add(self, seqs: list[list[int]], first: int) -> list[list[int]]:
        """`seqs`, lines `first`, `first + 1`... of the split, each after its prefix."""
        return [[*self.ids[kind], *seq] for kind, seq in zip(self.of_line[first : first + len(seqs)], seqs)]


def binarize(name: str, models: tuple[Subword, Subword], out: Path, prefixes: SourcePrefixes | None = None,
             config: DataConfig | None = None) -> dict:
    """Subword ids of the split's cleaned text, encoded `CHUNK` lines at a time into memory-mappable arrays; with
    `prefixes` each source starts with its line's tags (once in each copy). For train, `config.subword_samples` > 1
    writes the corpus that many times, every copy after the first segmented by subword sampling, seeded from
    `config.seed`, the copy and the chunk (SentencePiece's generator does not promise the same samples in every
    process: its worker threads may keep their state between calls)."""
    copies = config.subword_samples if config is not None and name == "train" else 1
    sizes = {}
    for side, model in zip(("src", "tgt"), models):
        writer = TokenWriter(out / f"{name}.{side}")
        for copy in range(copies):
            lines = iter_lines(out / f"{name}.{side}.txt", None)  # written by prepare, from capped lines
            done = 0
            while chunk := list(itertools.islice(lines, CHUNK)):
                seed = int(np.random.SeedSequence([config.seed, copy, done]).generate_state(1)[0]) if copy else 0
                ids = model.encode(chunk, alpha=config.subword_alpha if copy else 0.0, seed=seed)
                if side == "src" and prefixes is not None:
                    ids = prefixes.add(ids, done)
                writer.append(ids)
                done += len(ids)
        writer.close()  # nothing loaded back: the offsets of 50M lines are 400 MB
        sizes["sentences"], sizes[f"{side}_tokens"] = writer.lines, writer.tokens
    if copies > 1:
        sizes["subword_samples"] = copies
    return sizes


def check_and_measure(splits: dict[str, SplitFiles]) -> FilterStats:
    """Read every split once (their errors surface before any work) and measure train's median length ratio."""
    stats = FilterStats(median_ratio=median_length_ratio(splits["train"].pairs()))
    for name in SPLITS[1:]:
        if name in splits:
            splits[name].check()
    return stats


def given_languages(langs: tuple[str, str]) -> tuple[str | None, str | None]:
    """`langs` with None for a side whose language was not given (`UNNAMED`)."""
    return tuple(None if lang == unnamed else lang for lang, unnamed in zip(langs, UNNAMED))


def report_filters(what: str, stats: FilterStats) -> None:
    log.info("%s: kept %d of %d pairs (%s removed)", what, stats.kept, stats.read, dict(stats.removed) or "none")
    if stats.unjudged:
        log.info("%s: sides language identification could not judge (kept): %s", what, dict(stats.unjudged))
    for note in stats.notes:
        log.info("%s: %s", what, note)
    for warning in stats.warnings():
        log.warning("%s: %s", what, warning)


def prepare_data(splits: dict[str, SplitFiles], out: Path, config: DataConfig,
                 langs: tuple[str, str] = UNNAMED, overwrite: bool = False,
                 subwords: tuple[Subword, Subword] | None = None) -> dict:
    """Validate, clean and binarize `splits` (train required) into `out`; returns the manifest.

    The corpus streams through: files are read line by line (train twice: once for its median length ratio),
    kept text is written as it comes, byte for byte, SentencePiece trains on a sample read back from disk and the
    ids are encoded in chunks, so memory does not grow with the corpus (beyond 8 bytes per pair of offsets and 8 of
    duplicate digests, 16 while two of the digest arrays merge). `subwords` reuses existing subword models instead
    of training new ones. Everything is written to a staging directory and replaces the prepared files of `out`
    only once complete (`nmtkit.data.staging`), so the inputs may be files of `out`, and a failed prepare leaves
    `out` as it was; so does `data.removed_file` (the pairs the filters removed), which replaces a file of that
    name only once the data directory is written (it may be in `out`, even an `out` made for it)."""
    if "train" not in splits:
        raise NmtkitError("prepare needs training data (--train-src/--train-tgt or --train-tsv)")
    if subwords is None:
        check_room(config, config.vocab_size, (), TrainingMasking.of(config).symbols)
    cleaner = Cleaner(config, given_languages(langs))
    splits = {name: files.capped(config) for name, files in splits.items()}
    inputs = [item for files in splits.values() for item in files.inputs()]
    check_removed_file(config, inputs, out)
    with staged_output(out, overwrite) as staging, removed_pairs(config) as removed:
        return _write_data(splits, staging, cleaner, langs, subwords, removed)


def _write_data(splits: dict[str, SplitFiles], out: Path, cleaner: Cleaner, langs: tuple[str, str],
                subwords: tuple[Subword, Subword] | None, removed: RemovedPairs | None) -> dict:
    config = cleaner.config
    masking = TrainingMasking.of(config)
    if subwords is not None:
        masking.check_vocabulary(subwords)
    stats = check_and_measure(splits)
    with masking.unmasked(out, learn=subwords is None) as originals:
        kept = write_text("train", masking.pairs(filter_pairs(splits["train"].pairs(), cleaner, stats, removed),
                                                 originals), out)
    report_filters("train", stats)
    if not kept:
        raise NmtkitError("no training pairs are left after filtering; check the input and the filter settings")
    for name in SPLITS[1:]:
        if name in splits:
            write_text(name, splits[name].pairs(), out)
    models = _train_subwords(out, kept, config, masking.symbols) if subwords is None else keep_subwords(out, subwords)
    masking.drop_unmasked(out)
    manifest = {"format": 1, "src_lang": langs[0], "tgt_lang": langs[1], "data": asdict(config),
                "vocab": {"src": models[0].vocab_size, "tgt": models[1].vocab_size},
                "subword": {"src": models[0].settings, "tgt": models[1].settings, "reused": subwords is not None},
                "placeholders": masking.record(config.placeholders),
                "filter": stats.as_dict(), "splits": {}}
    for name in (name for name in SPLITS if name in splits):
        manifest["splits"][name] = binarize(name, models, out, config=config)
        log.info("%s: %s", name, manifest["splits"][name])
    write_manifest(out, manifest)
    return manifest


def write_manifest(out: Path, manifest: dict) -> None:
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_manifest(data_dir: Path) -> dict:
    path = data_dir / "manifest.json"
    if not path.exists():
        raise NmtkitError(f"{data_dir} is not an nmtkit data directory (no manifest.json); run nmtkit prepare")
    try:
        return json.loads(read_small(path, "manifest"))
    except ValueError as error:
        raise NmtkitError(f"{path} is damaged ({error}); prepare the data again") from error
