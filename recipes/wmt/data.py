"""WMT14 English->German data as in Vaswani et al. (2017): download, check, extract, write plain text.

    python recipes/wmt/data.py --out data/wmt14

writes each training corpus apart, under the name that `nmtkit prepare --corpora` and a training mix know it by:
`raw/europarl.{en,de}` (Europarl v7), `raw/commoncrawl.{en,de}` (Common Crawl) and `raw/news-commentary.{en,de}`
(News Commentary v9); `raw/dev.{en,de}` (newstest2013), `raw/test.{en,de}` (newstest2014 as sacrebleu's
`wmt14/full`, 3,003 sentences, the set of Vaswani et al.) and `raw/test-filtered.{en,de}` (sacrebleu's `wmt14`:
the 2,737 sentences of the official WMT14 evaluation); and `corpora.yaml`, the three corpora for
`nmtkit prepare --corpora`, dev and test listed with News Commentary (the news corpus; the test-filtered set is
translated from raw/, not prepared). Archives go to `download/` under their URL paths, are resumed when a
download was interrupted and are checked against the sizes and checksums below before use. `NMTKIT_MIRROR` (a
directory or a base URL) replaces the official hosts; see recipes/wmt/download.py for its layout and checksums.
Dev and test text is read through sacrebleu, whose cache is pointed at `sacrebleu/` inside the data directory and
filled from the archives downloaded here, so sacrebleu never downloads by itself. Every step is skipped when its
output exists.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from download import MIRROR_ENV, RemoteFile, download_all, extract_all, extract_members
from sacrebleu.dataset import DATASETS

from nmtkit.errors import NmtkitError

log = logging.getLogger("wmt.data")

SRC, TGT = "en", "de"


@dataclass(frozen=True)
class Corpus:
    """A training corpus: its name (raw/<name>.<lang>, the corpora.yaml and a training mix), the path of its
    members without the language suffix, and its archive."""

    name: str
    prefix: str
    archive: RemoteFile


# Sizes and SHA-256 sums from tensorflow/datasets, tensorflow_datasets/url_checksums/wmt14_translate.txt
# (commit 333639b37af6c6fedf3610a4a2d42f1c6ef6f7d5, listed there under www.statmt.org); the Europarl and
# Common Crawl sums also appear in stagedml/stagedml, src/stagedml/stages/fetchwmt.py. The member paths are those
# of fairseq's prepare-wmt14en2de.sh and of Sockeye's autopilot task wmt14_en_de.
CORPORA = (
    Corpus("europarl", "training/europarl-v7.de-en", RemoteFile(
        "http://statmt.org/wmt13/training-parallel-europarl-v7.tgz", 657_632_379,
        "sha256:0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7")),
    Corpus("commoncrawl", "commoncrawl.de-en", RemoteFile(
        "http://statmt.org/wmt13/training-parallel-commoncrawl.tgz", 918_311_367,
        "sha256:c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5")),
    Corpus("news-commentary", "training/news-commentary-v9.de-en", RemoteFile(
        "http://statmt.org/wmt14/training-parallel-nc-v9.tgz", 80_418_416,
        "sha256:cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485")),
)

# Dev and test sets as sacrebleu names them; their archive URLs and MD5 sums are sacrebleu's own (sizes unknown).
# newstest2014 English->German exists twice: the 3,003 sentences of `wmt14/full`, on which Vaswani et al.,
# tensor2tensor and fairseq report, and the 2,737 of `wmt14`, the filtered set of the official WMT14 evaluation.
TEST_SETS = {"dev": "wmt13", "test": "wmt14/full", "test-filtered": "wmt14"}
# the corpus that lists dev and test in corpora.yaml: which one only decides where the manifest counts them
NEWS = "news-commentary"


def test_set_archive(name: str) -> RemoteFile:
    dataset = DATASETS[name]
    return RemoteFile(dataset.data[0], None, f"md5:{dataset.md5[0]}")


def all_archives() -> list[RemoteFile]:
    return [corpus.archive for corpus in CORPORA] + [test_set_archive(name) for name in TEST_SETS.values()]


def count_lines(path: Path) -> int:
    """Lines as `\\n` separates them (other Unicode line breaks inside Common Crawl sentences do not count)."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            count, last = count + chunk.count(b"\n"), chunk[-1:]
    return count + (last != b"\n")


def ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def copy_text(source: Path, dest: Path) -> None:
    """Copy a text file (adding a missing last newline), renamed into place when done. Bytes that are not UTF-8
    become U+FFFD: a stray byte in web-crawled text should not stop `nmtkit prepare`, which rejects it."""
    partial = dest.with_name(dest.name + ".partial")
    with open(source, encoding="utf-8", errors="replace", newline="") as handle, \
            open(partial, "w", encoding="utf-8", newline="") as out:
        shutil.copyfileobj(handle, out, 1 << 20)
        if source.stat().st_size and not ends_with_newline(source):
            out.write("\n")
    os.replace(partial, dest)


def extract_corpus(corpus: Corpus, out: Path) -> tuple[Path, Path]:
    """The corpus' English and German files, extracted from its archive unless they are there."""
    targets = {f"{corpus.prefix}.{lang}": out / "extracted" / f"{corpus.name}.{lang}" for lang in (SRC, TGT)}
    if not all(path.exists() for path in targets.values()):
        log.info("extracting %s from %s", ", ".join(targets), corpus.archive.path)
        extract_members(out / "download" / corpus.archive.path, targets)
    src, tgt = targets.values()
    src_lines, tgt_lines = count_lines(src), count_lines(tgt)
    if src_lines != tgt_lines:
        raise NmtkitError(f"{corpus.name}: {src} has {src_lines} lines but {tgt} has {tgt_lines}")
    log.info("%s: %d sentence pairs", corpus.name, src_lines)
    return src, tgt


def make_train(out: Path) -> None:
    """raw/<corpus>.{en,de} for each training corpus not there yet."""
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for corpus in CORPORA:
        if all((raw / f"{corpus.name}.{lang}").exists() for lang in (SRC, TGT)):
            continue
        for lang, path in zip((SRC, TGT), extract_corpus(corpus, out)):
            copy_text(path, raw / f"{corpus.name}.{lang}")
    shutil.rmtree(out / "extracted", ignore_errors=True)  # the archives stay in download/; the text is in raw/ now


def corpora_list() -> list[dict]:
    """corpora.yaml's list: each training corpus by name, dev and test with News Commentary; paths relative to the
    data directory, where the file is written."""
    splits = {split: [f"raw/{split}.{SRC}", f"raw/{split}.{TGT}"] for split in ("dev", "test")}
    return [{"name": corpus.name, "src": f"raw/{corpus.name}.{SRC}", "tgt": f"raw/{corpus.name}.{TGT}",
             **(splits if corpus.name == NEWS else {})} for corpus in CORPORA]


def write_corpora(out: Path) -> None:
    text = yaml.safe_dump(corpora_list(), sort_keys=False, default_flow_style=None, width=120)
    (out / "corpora.yaml").write_text(text, encoding="utf-8")


def install_for_sacrebleu(name: str, archive: Path, cache: Path) -> None:
    """Put a test-set archive where sacrebleu looks for it, extracted, as its own download would have left it."""
    raw = cache / name / "raw"
    # sacrebleu's Dataset._get_tarball_filename: "<test set>.<URL basename>"; a non-empty tarball there is never
    # downloaded again, and sacrebleu extracts only what it downloads, so the archive is extracted here first
    tarball = raw / f"{name.replace('/', '_')}.{Path(urlsplit(test_set_archive(name).url).path).name}"
    if not tarball.exists():
        extract_all(archive, raw)
        shutil.copyfile(archive, tarball)


def read_test_set(name: str, cache: Path) -> tuple[list[str], list[str]]:
    """Source and reference lines of test set `name`, English->German, as sacrebleu reads them."""
    command = [sys.executable, "-m", "sacrebleu", "-t", name, "-l", f"{SRC}-{TGT}", "--echo", "src", "ref"]
    result = subprocess.run(command, env={**os.environ, "SACREBLEU": str(cache.resolve())},
                            capture_output=True, text=True, encoding="utf-8")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise NmtkitError(f"sacrebleu could not read {name} {SRC}-{TGT} from {cache}: {last}")
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    if not rows or any(len(row) != 2 for row in rows):
        raise NmtkitError(f"sacrebleu gave no source<TAB>reference lines for {name} {SRC}-{TGT}")
    return [row[0] for row in rows], [row[1] for row in rows]


def make_test_sets(out: Path) -> None:
    raw, cache = out / "raw", out / "sacrebleu"
    for split, name in TEST_SETS.items():
        if all((raw / f"{split}.{lang}").exists() for lang in (SRC, TGT)):
            continue
        install_for_sacrebleu(name, out / "download" / test_set_archive(name).path, cache)
        src, ref = read_test_set(name, cache)
        raw.mkdir(parents=True, exist_ok=True)
        for lang, lines in ((SRC, src), (TGT, ref)):
            (raw / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        log.info("%s: %s %s-%s, %d sentences", split, name, SRC, TGT, len(src))


def make_data(out: Path, mirror: str | None) -> None:
    download_all(all_archives(), out / "download", mirror)
    make_train(out)
    make_test_sets(out)
    write_corpora(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True,
                        help="data directory (download/, raw/, sacrebleu/, corpora.yaml)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(message)s", datefmt="%H:%M:%S")
    try:
        make_data(args.out, os.environ.get(MIRROR_ENV) or None)
    except NmtkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted (run again to resume)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
