"""Named corpora in one data directory (issue 49): the corpora file, per-corpus ranges and counts in the manifest,
gzip input, and corpus tags added once in the data and only on request at translate time."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import assert_error, nmtkit

from nmtkit.checkpoint import make_payload, save_atomic
from nmtkit.config import DataConfig
from nmtkit.data.corpora import check_corpus_names, corpus_ranges, read_corpora
from nmtkit.data.corpus import iter_lines
from nmtkit.data.dataset import TokenArray
from nmtkit.data.prepare import load_subwords
from nmtkit.data.prepare_corpora import prepare_corpora
from nmtkit.errors import NmtkitError
from nmtkit.inputs import Request
from nmtkit.registry import build_model
from nmtkit.run_config import build_config
from nmtkit.translate import Translator

WORDS = "uno dos tres cuatro cinco seis siete ocho".split()
TINY = {"name": "transformer", "encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32}


def rows(count: int, offset: int = 0) -> list[tuple[str, str]]:
    """Distinct word-for-word pairs (the target is the source reversed)."""
    pairs = []
    for index in range(offset, offset + count):
        words = [WORDS[(index >> (3 * position)) % 8] for position in range(2 + index % 3)]
        pairs.append((" ".join(words), " ".join(reversed(words))))
    return pairs


def write_parallel(root: Path, stem: str, pairs: list[tuple[str, str]]) -> list[str]:
    for side, suffix in ((0, "es"), (1, "en")):
        (root / f"{stem}.{suffix}").write_text("".join(pair[side] + "\n" for pair in pairs))
    return [f"{stem}.es", f"{stem}.en"]


def write_tsv_gz(path: Path, pairs: list[tuple[str, str]]) -> str:
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.writelines(f"{src}\t{tgt}\n" for src, tgt in pairs)
    return path.name


def write_yaml(root: Path, entries: list[dict]) -> Path:
    (root / "corpora.yaml").write_text(json.dumps(entries))  # JSON is YAML
    return root / "corpora.yaml"


def three_corpora(root: Path, **extra: dict) -> Path:
    """clean (two files, one duplicate pair), crawled (gzipped TSV, sharing a pair with clean), bt (tagged <bt>)."""
    clean = rows(30) + rows(1)
    src, tgt = write_parallel(root, "clean", clean)
    entries = [{"name": "clean", "src": src, "tgt": tgt, "dev": write_parallel(root, "dev", rows(5, 100))},
               {"name": "crawled", "tsv": write_tsv_gz(root / "crawl.tsv.gz", rows(20, 30) + rows(1))},
               {"name": "bt", "src": "bt.es", "tgt": "bt.en", "tag": "<bt>"}]
    write_parallel(root, "bt", rows(25, 50))
    for entry in entries:
        entry.update(extra.get(entry["name"], {}))
    return write_yaml(root, [{key: value for key, value in entry.items() if value is not None} for entry in entries])


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpora")
    prepare_corpora(read_corpora(three_corpora(root)), root / "data", DataConfig(subword="word", vocab_size=40),
                    ("es", "en"))
    return root / "data"


def test_manifest_gives_each_corpus_its_range_counts_and_filters(data: Path):
    manifest = json.loads((data / "manifest.json").read_text())
    corpora = {corpus["name"]: corpus for corpus in manifest["corpora"]}
    assert list(corpora) == ["clean", "crawled", "bt"]
    assert [corpora[name]["filter"]["read"] for name in corpora] == [31, 21, 25]
    # duplicates go within a corpus only: clean's repeated pair goes, crawled keeps the pair it shares with clean
    assert corpora["clean"]["filter"]["removed"] == {"duplicate": 1} and corpora["crawled"]["filter"]["removed"] == {}
    assert [corpora[name]["train"]["count"] for name in corpora] == [30, 21, 25]
    assert [corpora[name]["train"]["start"] for name in corpora] == [0, 30, 51]
    assert corpora["clean"]["sentences"] == {"train": 30, "dev": 5} and corpora["bt"]["sentences"]["dev"] == 0
    assert [corpora[name]["tag"] for name in corpora] == [None, None, "<bt>"]
    assert manifest["filter"]["kept"] == manifest["splits"]["train"]["sentences"] == 76
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("es", "en") and "pairs" not in manifest
    assert not (data / "train.corpus.npy").exists()  # one language pair: training sees a plain directory
    assert corpus_ranges(manifest) == {"clean": (range(0, 30),), "crawled": (range(30, 51),),
                                       "bt": (range(51, 76),)}


def test_the_tag_starts_each_source_of_its_corpus_once_and_nothing_else(data: Path):
    manifest = json.loads((data / "manifest.json").read_text())
    bt = manifest["corpus_tags"]["<bt>"]
    src, tgt = TokenArray.load(data / "train.src"), TokenArray.load(data / "train.tgt")
    text = (data / "train.src.txt").read_text().splitlines()
    model, _ = load_subwords(data)
    for line in range(len(src)):
        tagged = 51 <= line
        assert src[line].tolist() == [bt] * tagged + model.encode([text[line]])[0]
        assert bt not in tgt[line].tolist()
    dev = TokenArray.load(data / "dev.src")
    assert all(bt not in dev[line].tolist() for line in range(len(dev)))  # dev stands for untagged input


def test_a_tag_is_not_text_and_decodes_to_nothing(data: Path):
    model, _ = load_subwords(data)
    bt = json.loads((data / "manifest.json").read_text())["corpus_tags"]["<bt>"]
    assert bt not in model.encode(["<bt> uno"])[0]
    assert model.decode([[bt, *model.encode(["uno dos"])[0], bt]]) == ["uno dos"]


def test_corpus_names_asked_for_must_be_prepared(data: Path):
    manifest = json.loads((data / "manifest.json").read_text())
    check_corpus_names(manifest, ["bt", "clean"])
    with pytest.raises(NmtkitError, match=r"corpus 'news' is not in the data directory \(its corpora are clean, "):
        check_corpus_names(manifest, ["clean", "news"])
    with pytest.raises(NmtkitError, match="prepared without --corpora"):
        check_corpus_names({"splits": {"train": {}}}, ["clean"])


def test_copies_and_language_tags_keep_one_tag_each_in_a_fixed_order(tmp_path: Path):
    """With subword_samples 2 and target-language tags: <2xx> then <bt>, once in every copy of a bt line."""
    path = three_corpora(tmp_path, clean={"src_lang": "es", "tgt_lang": "en"},
                         crawled={"src_lang": "es", "tgt_lang": "en"}, bt={"src_lang": "en", "tgt_lang": "es"})
    config = DataConfig(subword="bpe", vocab_size=60, subword_samples=2, subword_alpha=0.3)
    manifest = prepare_corpora(read_corpora(path), tmp_path / "data", config)
    tags, bt = manifest["tags"], manifest["corpus_tags"]["<bt>"]
    ranges = corpus_ranges(manifest)
    assert ranges == {"clean": (range(0, 30), range(76, 106)), "crawled": (range(30, 51), range(106, 127)),
                      "bt": (range(51, 76), range(127, 152))}
    assert [(pair["src_lang"], pair["tgt_lang"], pair["corpora"]) for pair in manifest["pairs"]] == \
        [("es", "en", ["clean", "crawled"]), ("en", "es", ["bt"])]
    line_pairs = np.load(tmp_path / "data" / "train.corpus.npy")
    assert line_pairs.tolist() == ([0] * 51 + [1] * 25) * 2
    src = TokenArray.load(tmp_path / "data" / "train.src")
    special = {bt, *tags.values()}
    for name, expected in (("clean", [tags["en"]]), ("crawled", [tags["en"]]), ("bt", [tags["es"], bt])):
        for line in (line for span in ranges[name] for line in span):
            ids = src[line].tolist()
            assert ids[:len(expected)] == expected and not special & set(ids[len(expected):])


@pytest.mark.parametrize("entries, needle", [
    ([{"src": "a", "tgt": "b"}], "corpus 1: no name"),
    ([{"name": "a b", "tsv": "x"}], "name 'a b' is not a simple name"),
    ([{"name": "x", "tsv": "x"}, {"name": "x", "tsv": "y"}], "corpus 'x' is listed twice"),
    ([{"name": "x", "src": "a"}], "corpus 1 (x): give the training files one way"),
    ([{"name": "x", "src": "a", "tgt": "b", "tsv": "c"}], "one way: src and tgt, tsv, or train (got src, tgt, tsv)"),
    ([{"name": "x", "tsv": "a", "tag": "bt"}], "corpus 1 (x): tag 'bt' is not a corpus tag"),
    ([{"name": "x", "tsv": "a", "tag": "<2de>"}], "tag '<2de>' is not a corpus tag"),
    ([{"name": "x", "tsv": "a", "weight": 2}], "unknown key 'weight'"),
    ([{"name": "x", "tsv": "a", "src_lang": "es"}], "language None is not a language code"),
    ([{"name": "x", "tsv": "a", "src_lang": "es", "tgt_lang": "en"}, {"name": "y", "tsv": "b"}],
     "corpus 'y' has no src_lang/tgt_lang while others have"),
])
def test_bad_corpora_files_are_one_line_errors_naming_the_entry(tmp_path: Path, entries: list, needle: str):
    with pytest.raises(NmtkitError, match=re.escape(needle)) as caught:
        read_corpora(write_yaml(tmp_path, entries))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("content, needle", [
    (None, "corpus 'bt': cannot read"),
    (b"", "corpus 'bt': "),
    (b"not gzip data\n", "corpus 'bt': cannot read"),
    (gzip.compress(b"uno\tone\n", mtime=0)[:-12], "corpus 'bt': cannot read"),
], ids=["missing", "empty", "not-gzip", "cut-short"])  # ids, not gzip's bytes: the same under every xdist worker
def test_missing_empty_or_damaged_files_are_errors_naming_the_corpus(tmp_path: Path, content: bytes | None,
                                                                    needle: str):
    path = three_corpora(tmp_path, bt={"src": None, "tgt": None, "tsv": "bt.tsv.gz"})
    if content is not None:
        (tmp_path / "bt.tsv.gz").write_bytes(gzip.compress(content) if content == b"" else content)
    result = nmtkit("prepare", "--corpora", str(path), "--subword", "word", "--out", str(tmp_path / "data"))
    assert_error(result, needle, "bt.tsv.gz")
    assert not (tmp_path / "data").exists()


def test_gzip_files_read_as_their_text(tmp_path: Path):
    text = "uno dos\r\nñandú 中文\n\nlast"
    (tmp_path / "plain.txt").write_text(text, encoding="utf-8", newline="")
    (tmp_path / "packed.txt.gz").write_bytes(gzip.compress(text.encode()))
    assert list(iter_lines(tmp_path / "packed.txt.gz")) == list(iter_lines(tmp_path / "plain.txt"))
    assert len(list(iter_lines(tmp_path / "packed.txt.gz"))) == 4


def test_prepare_corpora_on_the_command_line(tmp_path: Path):
    result = nmtkit("prepare", "--corpora", str(three_corpora(tmp_path)), "--subword", "word", "--src-lang", "es",
                    "--tgt-lang", "en", "--out", str(tmp_path / "data"))
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert [corpus["name"] for corpus in manifest["corpora"]] == ["clean", "crawled", "bt"]
    assert_error(nmtkit("prepare", "--corpora", str(tmp_path / "corpora.yaml"), "--train-tsv", "x.tsv",
                        "--out", str(tmp_path / "other")), "does not combine")


@pytest.fixture(scope="module")
def model(data: Path) -> Path:
    """An untrained Transformer on the tagged vocabulary: what it writes does not matter, only what it is fed."""
    subwords = load_subwords(data)
    config = build_config({"model": TINY})
    torch.manual_seed(0)
    network = build_model(config.model, subwords[0].vocab_size, subwords[1].vocab_size, True).eval()
    save_atomic(make_payload(config, network, subwords, langs=("es", "en")), data.parent / "model.pt")
    return data.parent / "model.pt"


def fake_search(seen: list, emitted: list[int]):
    """A search that records its sources and answers every one with `emitted`."""
    hypothesis = type("Hyp", (), {"tokens": emitted, "score": 0.0, "constraints_met": True})()
    return lambda self, sources, constraints=None: seen.extend(sources) or [[hypothesis]] * len(sources)


def test_translate_adds_the_tag_only_when_asked_and_never_writes_it(data: Path, model: Path, monkeypatch):
    subword, _ = load_subwords(data)
    bt = json.loads((data / "manifest.json").read_text())["corpus_tags"]["<bt>"]
    uno, dos = subword.encode(["uno dos"])[0]
    seen: list = []
    monkeypatch.setattr(Translator, "search", fake_search(seen, [bt, uno, bt, dos]))  # a model that emits the tag
    untagged = Translator.load(model, device="cpu", threads=1, beam=1)
    tagged = untagged.with_decode(tag="<bt>")
    assert untagged.translate_requests([Request("uno dos")]) == [[("uno dos", 0.0)]]
    assert tagged.translate_requests([Request("uno dos"), Request("<bt> dos")]) == [[("uno dos", 0.0)]] * 2
    assert [list(source) for source in seen] == [[uno, dos], [bt, uno, dos],
                                                 [bt, *subword.encode(["<bt> dos"])[0]]]
    with pytest.raises(NmtkitError, match=r"unknown --tag '<ft>'; this model's tags are <bt>"):
        untagged.with_decode(tag="<ft>")


def test_translate_tag_on_the_command_line(model: Path):
    result = nmtkit("translate", "-m", str(model), "--greedy", "--tag", "<bt>", stdin="uno dos\n\n")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 2, result.stderr
    assert "<bt>" not in result.stdout
    assert_error(nmtkit("translate", "-m", str(model), "--greedy", "--tag", "<xx>", stdin="uno\n"),
                 "unknown --tag '<xx>'", "<bt>")
