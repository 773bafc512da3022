"""`nmtkit robustness`: test sets of messy input made from a clean test set (a source file and its reference), for
scoring a model on what users type as well as on what test sets hold: title case, upper case, no final mark, typing
slips, several lines to a line and Unicode noise to copy. Each set is `<set>.src` and `<set>.ref` in one directory,
the clean set first, with `sets.json`, which `nmtkit evaluate --sets` reads to score them side by side.

The changes are `nmtkit.data.augment`'s, which training's modifiers apply: a model trained with a modifier is tested
on what it was taught. Every line a set does not change is written byte for byte as read (a CRLF line end becomes
LF); the sets repeat for the same seed. A file already in the directory is replaced only when sets.json proves
this command wrote it (its SHA-256 there), and never one of the inputs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nmtkit.data.augment import title_words, with_noise, with_typos, without_end_marks
from nmtkit.data.corpus import read_lines
from nmtkit.data.files import refuse_onto_inputs, write_atomic, write_json_atomic
from nmtkit.data.robustness_config import CLEAN, SET_NAMES, RobustnessConfig
from nmtkit.errors import NmtkitError

RECORD = "sets.json"
RECORD_MAX_BYTES = 1 << 20  # a sets.json larger than this is not one of this command's
SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a set's name: a file name in the directory, nothing else
MERGED_LINES = (2, 3)  # lines to a merged line, at least and at most
Lines = tuple[list[str], list[str]]  # sources, references


def merged(sources: list[str], references: list[str], rng: np.random.Generator) -> Lines:
    """Runs of 2 or 3 consecutive lines joined with a space, on both sides alike; a run is cut or grown by one where
    it would leave one line over, so that every line of the set holds several (given two lines or more)."""
    src_out, ref_out, start = [], [], 0
    while start < len(sources):
        size = int(rng.integers(MERGED_LINES[0], MERGED_LINES[1] + 1))
        if len(sources) - start - size == 1:
            size += 1 if size == MERGED_LINES[0] else -1
        end = min(start + size, len(sources))
        src_out.append(" ".join(sources[start:end]))
        ref_out.append(" ".join(references[start:end]))
        start = end
    return src_out, ref_out


def per_pair(change: Callable[[str, str, np.random.Generator], tuple[str, str]]):
    def apply(sources: list[str], references: list[str], rng: np.random.Generator) -> Lines:
        pairs = [change(src, ref, rng) for src, ref in zip(sources, references, strict=True)]
        return [src for src, _ in pairs], [ref for _, ref in pairs]

    return apply


BUILDERS: dict[str, Callable[[list[str], list[str], np.random.Generator], Lines]] = {
    "title": per_pair(lambda src, ref, rng: (title_words(src), title_words(ref))),
    "upper": per_pair(lambda src, ref, rng: (src.upper(), ref.upper())),
    "punct": per_pair(lambda src, ref, rng: without_end_marks(src, ref)),
    "typos": per_pair(lambda src, ref, rng: (with_typos(src, rng), ref)),
    "merge": merged,
    "inline-noise": per_pair(with_noise),
}


def make_sets(sources: list[str], references: list[str], config: RobustnessConfig) -> dict[str, Lines]:
    """{set: (sources, references)}, clean first, then the sets asked for in SET_NAMES' order; each set's draws
    from a generator of its own (seed, set), so that a set does not change when another is left out."""
    sets = {CLEAN: (sources, references)}
    for index, name in enumerate(SET_NAMES):
        if name in config.sets:
            sets[name] = BUILDERS[name](sources, references, np.random.default_rng([config.seed, index]))
    return sets


def changed_lines(name: str, clean: Lines, lines: Lines) -> int:
    """How many lines of a set differ from the clean ones (for merge: how many hold several)."""
    if name == "merge":
        return len(lines[0]) if len(lines[0]) < len(clean[0]) else 0
    return sum(pair != original for pair, original in zip(zip(*lines), zip(*clean), strict=True))


def read_test_set(src: Path, ref: Path, config: RobustnessConfig) -> Lines:
    """The test set's lines, after their files' sizes are checked against max_bytes; the sides must align."""
    for flag, path in (("--src", src), ("--ref", ref)):
        try:
            size = path.stat().st_size
        except OSError as error:
            raise NmtkitError(f"cannot read {flag} {path}: {error.strerror}") from error
        if size > config.max_bytes:
            raise NmtkitError(f"{flag} {path} has {size} bytes, more than max_bytes ({config.max_bytes}): a test set "
                              "this large is likely the wrong file (raise --max-bytes if it is not)")
    sources, references = read_lines(src, config.max_line_bytes), read_lines(ref, config.max_line_bytes)
    if len(sources) != len(references):
        raise NmtkitError(f"--src {src} has {len(sources)} lines but --ref {ref} has {len(references)}; a test set's "
                          "sides must align")
    if not sources:
        raise NmtkitError(f"--src {src} and --ref {ref} are empty")
    return sources, references


def read_record(directory: Path) -> dict | None:
    """The sets.json of `directory` (None if it has none); one that is not a record of this command (not a JSON
    object, larger than RECORD_MAX_BYTES, or a set's name that is not a plain file name) is an error."""
    path = directory / RECORD
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > RECORD_MAX_BYTES:
            raise ValueError(f"more than {RECORD_MAX_BYTES} bytes")
        record = json.loads(path.read_text(encoding="utf-8"))
        names = [entry["name"] for entry in record["sets"]]
        if not all(isinstance(name, str) and SET_NAME.fullmatch(name) for name in names):
            raise ValueError("a set's name is not a plain file name")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise NmtkitError(f"{path} is not a sets record written by nmtkit robustness ({error})") from error
    return record


def check_destination(out: Path, names: list[str], inputs: list[tuple[str, Path]]) -> dict:
    """The files that `out`'s sets.json proves this command wrote ({name: [{"bytes", "sha256"}, ...]}); an error
    when a file to write is an input, or one already in `out` that the record does not prove."""
    if out.exists() and not out.is_dir():
        raise NmtkitError(f"--out {out} is a file; give a directory (absent, or one of its own)")
    refuse_onto_inputs([("--out", out / name) for name in [*names, RECORD]], inputs)
    record = read_record(out) if out.is_dir() else None
    written = {name: [entry for entry in entries if isinstance(entry, dict)]
               for name, entries in (record or {}).get("files", {}).items() if isinstance(entries, list)}
    for name in names:
        path = out / name
        if path.exists() and not (path.is_file() and is_written(path, written.get(name, []))):
            raise NmtkitError(f"{path} exists and {out / RECORD} does not show that nmtkit robustness wrote it; "
                              "move it away or choose another --out")
    return written


def is_written(path: Path, records: list[dict]) -> bool:
    """Whether file `path` is one of those `records` ({"bytes", "sha256"} each, from sets.json) say was written."""
    size = path.stat().st_size
    sizes = [record for record in records if record.get("bytes") == size]
    if not sizes:
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return any(record.get("sha256") == digest.hexdigest() for record in sizes)


def write_sets(src: Path, ref: Path, out: Path, config: RobustnessConfig) -> dict:
    """Write the sets of test set (`src`, `ref`) into directory `out`; returns what sets.json records but the
    files' digests: the inputs, the seed and each set's name, lines and changed lines, clean first. sets.json
    lists each file's digests before and after it is written while they are written, so that a run stopped
    midway leaves files that the next run may replace."""
    names = [CLEAN, *(name for name in SET_NAMES if name in config.sets)]
    written = check_destination(out, [f"{name}.{side}" for name in names for side in ("src", "ref")],
                                [("--src", src), ("--ref", ref)])
    sources, references = read_test_set(src, ref, config)
    sets = make_sets(sources, references, config)
    contents = {f"{name}.{side}": "".join(line + "\n" for line in side_lines).encode("utf-8")
                for name, lines in sets.items() for side, side_lines in zip(("src", "ref"), lines, strict=True)}
    digests = {file: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
               for file, data in contents.items()}
    summary = {"src": str(src), "ref": str(ref), "seed": config.seed,  # the sets in order: sets.json sorts keys
               "sets": [{"name": name, "lines": len(lines[0]), "changed": changed_lines(name, sets[CLEAN], lines)}
                        for name, lines in sets.items()]}
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise NmtkitError(f"cannot create --out {out}: {error.strerror}") from error
    either = {file: [*written.get(file, []), digest] for file, digest in digests.items()}
    write_json_atomic(out / RECORD, {**summary, "files": either})
    for file, data in contents.items():
        write_atomic(out / file, data)
    write_json_atomic(out / RECORD, {**summary, "files": {file: [digest] for file, digest in digests.items()}})
    return {"out": str(out), **summary}
