"""Cleaning the training pairs (`nmtkit prepare`): which filter removes a pair, counted by reason, the removed pairs
written out on request. A kept pair is never changed: the filters look at views of its text (`nmtkit.data.rules`,
`nmtkit.data.scripts`, `nmtkit.data.langid`), and the pair goes on byte for byte.

The filters run cheapest first, and a pair's reason is the first that removes it: empty, too_short, too_long,
length_ratio, symbols_only, long_word, repeat, script_src/script_tgt, copy, numbers, links, langid_src/langid_tgt,
then duplicate and near_duplicate among the pairs left (so the first of duplicates is the one kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from nmtkit.config.sections import DataConfig
from nmtkit.data import rules
from nmtkit.data.files import open_atomic, refuse_onto_inputs
from nmtkit.data.langid import OTHER, UNJUDGED, LanguageJudge, knows
from nmtkit.data.scripts import has_scripts, script_share, script_words, scripts_of
from nmtkit.data.staging import PREPARED
from nmtkit.errors import NmtkitError

WARN_SHARE = 0.03  # a filter that removes more than this share of the pairs read is reported as a warning
DEDUP_BLOCK = 4096  # pairs looked up in the duplicate set at once: numpy's per-call cost spreads over the block
log = logging.getLogger(__name__)
SIDES = ("src", "tgt")
SETTING_OF = {"empty": "min_words", "too_short": "min_words", "too_long": "max_words", "length_ratio": "max_ratio",
              "symbols_only": "symbols_only", "long_word": "max_word_chars", "repeat": "max_repeat",
              "script_src": "script_share", "script_tgt": "script_share", "copy": "copies", "numbers": "numbers",
              "links": "links", "langid_src": "langid", "langid_tgt": "langid", "duplicate": "dedup",
              "near_duplicate": "near_dedup"}


@dataclass
class FilterStats:
    """How many training pairs each filter removed, and the sides language identification could not judge;
    written to manifest.json."""

    read: int = 0
    kept: int = 0
    removed: Counter = field(default_factory=Counter)
    median_ratio: float = 1.0
    unjudged: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """One line for each filter that removed more than a few percent of the pairs read, naming its setting."""
        return [f"{reason} removed {count} of {self.read} training pairs ({100 * count / self.read:.1f}%; see "
                f"data.{SETTING_OF.get(reason, reason)})"
                for reason, count in sorted(self.removed.items()) if self.read and count > WARN_SHARE * self.read]

    def as_dict(self) -> dict:
        return {"read": self.read, "kept": self.kept, "removed": dict(self.removed),
                "median_length_ratio": round(self.median_ratio, 4), "unjudged": dict(self.unjudged),
                "notes": self.notes, "warnings": self.warnings()}


def length_reason(src_units: int, tgt_units: int, config: DataConfig, median_ratio: float) -> str | None:
    """Why the lengths of a pair's sides (in `length_units`) remove it: too_short, too_long or length_ratio (against
    the corpus median)."""
    if min(src_units, tgt_units) < config.min_words:
        return "too_short"
    if max(src_units, tgt_units) > config.max_words:
        return "too_long"
    ratio = src_units / max(tgt_units, 1) / median_ratio
    if config.max_ratio > 0 and max(ratio, 1 / max(ratio, 1e-9)) > config.max_ratio:
        return "length_ratio"
    return None


class Cleaner:
    """The filters of `config` for one language pair (`langs`; None: a side whose language is not given, which
    language identification and the script share then leave alone). An unknown language is an error here, before
    any line is read."""

    def __init__(self, config: DataConfig, langs: tuple[str | None, str | None] = (None, None)):
        self.config = config
        self.notes = [f"no {side} language given: data.langid and data.script_share leave the {side} side alone"
                      for side, lang in zip(SIDES, langs) if lang is None and (config.langid or config.script_share)]
        judged = [lang if lang and config.langid and self._known(side, lang, knows(lang), "data.langid") else None
                  for side, lang in zip(SIDES, langs)]
        self.judges = tuple(LanguageJudge(lang, config.langid_accept, config.langid_min_letters,
                                          config.langid_threshold, config.langid_floor) if lang else None
                            for lang in judged)
        scripts = [scripts_of(lang, config.scripts) if lang and config.script_share and self._known(
            side, lang, has_scripts(lang, config.scripts), "data.script_share") else None
            for side, lang in zip(SIDES, langs)]
        self.script_words = tuple(script_words(names) if names else None for names in scripts)
        self.ascii_in_script = tuple(bool(names) and "Latin" in names for names in scripts)  # an ASCII line is in it

    def _known(self, side: str, lang: str, known: bool, setting: str) -> bool:
        """Whether a filter can judge the `side` in `lang`; if not, a note (and a warning) says it leaves it alone: a
        language read from a file's suffix (`train.tok`) or one the model lacks is no reason to refuse the data."""
        if not known:
            note = (f"{setting} leaves the {side} side alone: it does not know language {lang!r} (give its code with "
                    f"--{side}-lang{', or its scripts with data.scripts' if setting == 'data.script_share' else ''})")
            log.warning("%s", note)
            self.notes.append(note)
        return known

    def reason(self, src: str, tgt: str, median_ratio: float) -> str | None:
        """The first filter, short of language identification and duplicates, that removes the pair."""
        if not src.strip() or not tgt.strip():
            return "empty"
        units = rules.units(src), rules.units(tgt)
        return length_reason(len(units[0]), len(units[1]), self.config, median_ratio) or \
            self._shape_reason((src, tgt), units) or self._content_reason(src, tgt)

    def _shape_reason(self, lines: tuple[str, str], units: tuple[list[str], list[str]]) -> str | None:
        """symbols_only, long_word or repeat; each view is skipped where the line is too short to fail it."""
        config = self.config
        if config.symbols_only and not all(map(rules.has_letters, lines)):
            return "symbols_only"
        if config.max_word_chars and any(len(line) > config.max_word_chars and
                                         rules.longest_word(words) > config.max_word_chars
                                         for line, words in zip(lines, units)):
            return "long_word"
        if config.max_repeat and any(len(words) > config.max_repeat and rules.longest_repeat(words) > config.max_repeat
                                     for words in units):
            return "repeat"
        return None

    def _content_reason(self, src: str, tgt: str) -> str | None:
        """script_src/script_tgt, copy, numbers or links."""
        config = self.config
        for side, line, words, ascii_in in zip(SIDES, (src, tgt), self.script_words, self.ascii_in_script):
            share = script_share(line, words) if words is not None and not (ascii_in and line.isascii()) else None
            if share is not None and share < config.script_share:
                return f"script_{side}"
        if config.copies and self._copy(src, tgt):
            return "copy"
        if config.numbers and rules.numbers(src) != rules.numbers(tgt):
            return "numbers"
        if config.links and (rules.may_hold_links(src) or rules.may_hold_links(tgt)) and \
                rules.links(src) != rules.links(tgt):
            return "links"
        return None

    def _copy(self, src: str, tgt: str) -> bool:
        src_words, tgt_words = rules.words(src), rules.words(tgt)
        return (min(len(src_words), len(tgt_words)) >= self.config.copy_min_words and
                rules.copy_share(src_words, tgt_words) >= self.config.copies)

    def language_reason(self, src: str, tgt: str, unjudged: Counter) -> str | None:
        """langid_src or langid_tgt when language identification finds a side in another language; the sides it
        cannot judge are counted in `unjudged` when it keeps the pair."""
        verdicts = []
        for side, line, judge in zip(SIDES, (src, tgt), self.judges):
            verdict = judge.verdict(line) if judge is not None else None
            if verdict == OTHER:
                return f"langid_{side}"
            verdicts.append((side, verdict))
        for side, verdict in verdicts:
            if verdict == UNJUDGED:
                unjudged[f"langid_{side}"] += 1
        return None


def pair_digest(src: str, tgt: str) -> bytes:
    """64 bits of BLAKE2b over the pair; the source's length in bytes comes first, so no two pairs give the same
    text to hash (a separator such as a tab could itself be in a line)."""
    src_bytes = src.encode()
    return hashlib.blake2b(len(src_bytes).to_bytes(8, "little") + src_bytes + tgt.encode(), digest_size=8).digest()


def near_digest(src: str, tgt: str) -> bytes:
    """`pair_digest` of the pair's letters alone (`rules.normalised`)."""
    return pair_digest(rules.normalised(src), rules.normalised(tgt))


class DigestSet:
    """64-bit digests in sorted numpy runs, 8 bytes each (a Python set of ints takes ~75 bytes an entry: 5M pairs
    were 383 MB). Runs merge as in a log-structured merge tree, where a run is merged with the one before it while
    that one is no larger, so the runs number O(log n) and each lookup is a binary search in each run."""

    def __init__(self):
        self.runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def add(self, digests: list[bytes]) -> np.ndarray:
        """Add a block of 8-byte digests; True for each one seen before, earlier in the block included."""
        block = np.frombuffer(b"".join(digests), dtype=np.uint64)
        unique, first, inverse = np.unique(block, return_index=True, return_inverse=True)
        known = self._contains(unique)
        later = np.ones(len(block), dtype=bool)  # not the first occurrence within the block
        later[first] = False
        self._insert(unique[~known])
        return known[inverse] | later

    def _contains(self, values: np.ndarray) -> np.ndarray:
        found = np.zeros(len(values), dtype=bool)
        for run in self.runs:
            found |= run[np.minimum(np.searchsorted(run, values), len(run) - 1)] == values
        return found

    def _insert(self, values: np.ndarray) -> None:
        if len(values):
            self.runs.append(values)
        while len(self.runs) > 1 and len(self.runs[-2]) <= len(self.runs[-1]):
            merged = np.concatenate(self.runs[-2:])
            merged.sort()  # in place (timsort would merge in linear time but with a buffer of half the array)
            self.runs[-2:] = [merged]


class RemovedPairs:
    """`data.removed_file`: each removed pair as `reason<TAB>source<TAB>target` (`label` before the reason: a
    corpus' name and a colon with --corpora). A line may itself hold a tab: the reason is the first field."""

    def __init__(self, file: TextIO, label: str = ""):
        self.file, self.label = file, label

    def write(self, reason: str, src: str, tgt: str) -> None:
        self.file.write(f"{self.label}{reason}\t{src}\t{tgt}\n")

    def labelled(self, name: str) -> RemovedPairs:
        return RemovedPairs(self.file, f"{name}:")


def check_removed_file(config: DataConfig, inputs: list[tuple[str, Path | None]], out: Path) -> None:
    """A one-line error, before any work, when `data.removed_file` is one of `inputs` or a file prepare writes in
    the data directory `out`."""
    if not config.removed_file:
        return
    path = Path(config.removed_file)
    refuse_onto_inputs([("data.removed_file", path)], inputs)
    if PREPARED.fullmatch(path.name) and path.parent.resolve() == out.resolve():
        raise NmtkitError(f"data.removed_file {path} is a file prepare writes in --out {out}; give another name")


@contextlib.contextmanager
def removed_pairs(config: DataConfig) -> Iterator[RemovedPairs | None]:
    """The removed-pairs file of `config` (None when not asked for; `check_removed_file` first), written whole or
    not at all: it replaces any file of that name only once the block exits without an error."""
    if not config.removed_file:
        yield None
        return
    with open_atomic(Path(config.removed_file)) as file:
        yield RemovedPairs(file)


def _mark_repeated(seen: DigestSet, block: list[tuple[str, str]], reasons: list[str | None], digest,
                   reason: str) -> None:
    candidates = [index for index, found in enumerate(reasons) if found is None]
    repeated = seen.add([digest(*block[index]) for index in candidates])
    for index in itertools.compress(candidates, repeated):
        reasons[index] = reason


def filter_pairs(pairs: Iterable[tuple[str, str]], cleaner: Cleaner, stats: FilterStats,
                 removed: RemovedPairs | None = None) -> Iterator[tuple[str, str]]:
    """The pairs no filter of `cleaner` removes (against `stats.median_ratio`), read `DEDUP_BLOCK` pairs at a time;
    `stats` counts the removed by reason, `removed` gets each. The text of a kept pair is not changed. Duplicates
    are found by a 64-bit digest per pair (`pair_digest`, 8 bytes of memory a pair; as many again for
    near-duplicates), not by keeping the text."""
    config, pairs = cleaner.config, iter(pairs)
    stats.notes.extend(note for note in cleaner.notes if note not in stats.notes)
    seen, near_seen = DigestSet(), DigestSet()
    while block := list(itertools.islice(pairs, DEDUP_BLOCK)):
        reasons = [cleaner.reason(src, tgt, stats.median_ratio) for src, tgt in block]
        reasons = [reason or cleaner.language_reason(src, tgt, stats.unjudged)
                   for reason, (src, tgt) in zip(reasons, block)]
        if config.dedup:
            _mark_repeated(seen, block, reasons, pair_digest, "duplicate")
        if config.near_dedup:
            _mark_repeated(near_seen, block, reasons, near_digest, "near_duplicate")
        for pair, reason in zip(block, reasons):
            stats.read += 1
            if reason:
                stats.removed[reason] += 1
                if removed is not None:
                    removed.write(reason, *pair)
                continue
            stats.kept += 1
            yield pair
