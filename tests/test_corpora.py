"""Named corpora in one data directory (issue 49): the corpora file, per-corpus ranges and counts in the manifest,
gzip input, and corpus tags added once in the data and only on request at translate time; corpora encoded with a
given vocabulary (`--subword-model`, issue 51) and fine-tuned on."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import assert_error, nmtkit

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.corpora import check_corpus_names, corpus_ranges, read_corpora
from nmtkit.data.corpus import iter_lines
from nmtkit.data.dataset import TokenArray
from nmtkit.data.prepare import load_subwords
from nmtkit.data.prepare_corpora import prepare_corpora
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model
from nmtkit.training.command import train_command
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


SPANISH_BOTH_SIDES = {"langid": False}  # `rows` are Spanish words on both sides, whatever the languages say


def three_corpora(root: Path, **extra: dict) -> Path:
    """clean (two files, one duplicate pair), crawled (gzipped TSV, sharing a pair with clean), bt (tagged <bt>)."""
    clean = rows(30) + rows(1)
    src, tgt = write_parallel(root, "clean", clean)
    entries = [{"name": "clean", "src": src, "tgt": tgt, "dev": write_parallel(root, "dev", rows(5, 100)),
                "clean": SPANISH_BOTH_SIDES},
               {"name": "crawled", "tsv": write_tsv_gz(root / "crawl.tsv.gz", rows(20, 30) + rows(1)),
                "clean": SPANISH_BOTH_SIDES},
               {"name": "bt", "src": "bt.es", "tgt": "bt.en", "tag": "<bt>", "clean": SPANISH_BOTH_SIDES}]
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
    ([{"name": "x", "tsv": "a", "clean": {"vocab_size": 10}}], "corpus 1 (x) clean: unknown key 'vocab_size'"),
    ([{"name": "x", "tsv": "a", "clean": {"numbers": "maybe"}}], "corpus 1 (x) clean.numbers: expected bool"),
    ([{"name": "x", "tsv": "a", "clean": {"copies": 2}}], "corpus 1 (x) clean.copies: must be in [0.0, 1.0]"),
    ([{"name": "x", "tsv": "a", "clean": "hard"}], "corpus 1 (x) clean: expected a mapping of cleaning settings"),
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


def test_each_corpus_is_cleaned_with_its_own_settings(tmp_path: Path):
    """A crawled corpus cleaned hard (numbers, copies), a clean seed left alone (no filter at all), from the YAML
    file; the command's settings (--set) for what a corpus does not set; the manifest counts and records each."""
    seed = [("Copy 3 files now", "Copiar 4 archivos ahora"), ("Open the file now", "Open the file now"),
            ("Copy 3 files now", "Copiar 4 archivos ahora")]
    write_parallel(tmp_path, "seed", seed)
    write_parallel(tmp_path, "crawl", seed + [("Close the window", "Cerrar la ventana")])
    path = write_yaml(tmp_path, [
        {"name": "seed", "src": "seed.es", "tgt": "seed.en", "clean": {"dedup": False, "langid": False}},
        {"name": "crawl", "src": "crawl.es", "tgt": "crawl.en", "clean": {"numbers": True, "copies": 0.9}}])
    result = nmtkit("prepare", "--corpora", str(path), "--subword", "word", "--set", "data.langid=false",
                    "--set", "data.max_ratio=0", "--out", str(tmp_path / "data"))
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    corpora = {corpus["name"]: corpus for corpus in manifest["corpora"]}
    assert corpora["seed"]["filter"]["removed"] == {} and corpora["seed"]["train"]["count"] == 3
    assert corpora["crawl"]["filter"]["removed"] == {"numbers": 2, "copy": 1}
    assert corpora["crawl"]["clean"] == {"numbers": True, "copies": 0.9}
    assert manifest["filter"]["removed"] == {"numbers": 2, "copy": 1}


def test_removed_pairs_of_corpora_name_their_corpus(tmp_path: Path):
    write_parallel(tmp_path, "a", [("uno dos", "one two"), ("tres 3", "three 4")])
    path = write_yaml(tmp_path, [{"name": "a", "src": "a.es", "tgt": "a.en", "clean": {"numbers": True}}])
    removed = tmp_path / "removed.tsv"
    result = nmtkit("prepare", "--corpora", str(path), "--subword", "word", "--set", f"removed_file={removed}",
                    "--out", str(tmp_path / "data"))
    assert result.exit_code == 0, result.stderr
    assert removed.read_text(encoding="utf-8") == "a:numbers\ttres 3\tthree 4\n"
    assert_error(nmtkit("prepare", "--corpora", str(path), "--subword", "word", "--set",
                        f"removed_file={tmp_path / 'a.en'}", "--out", str(tmp_path / "other")),
                 "refusing to write onto an input")


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


def test_a_line_break_the_model_writes_never_splits_an_output_line(data: Path, model: Path, monkeypatch):
    """Found sampling 31,882 back-translations: byte pieces spelled 7 newlines (and 15 carriage returns), so the
    output had 31,889 lines for 31,882 inputs and prepare refused the pair of files."""
    subword, _ = load_subwords(data)
    monkeypatch.setattr(Translator, "search", fake_search([], subword.encode(["uno dos"])[0]))
    monkeypatch.setattr(type(subword), "decode", lambda self, ids: ["uno\ndos\r\n" for _ in ids])
    result = nmtkit("translate", "-m", str(model), "--greedy", stdin="uno dos\n\nuno\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "uno dos  \n\nuno dos  \n"
    assert "line 1: the model wrote a line break" in result.stderr
    assert "line 3: the model wrote a line break" in result.stderr


def test_translate_tag_on_the_command_line(model: Path):
    result = nmtkit("translate", "-m", str(model), "--greedy", "--tag", "<bt>", stdin="uno dos\n\n")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 2, result.stderr
    assert "<bt>" not in result.stdout
    assert_error(nmtkit("translate", "-m", str(model), "--greedy", "--tag", "<xx>", stdin="uno\n"),
                 "unknown --tag '<xx>'", "<bt>")


def line_ids(data: Path, split: str) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    """Each (source, target) line of a prepared split and its ids."""
    src, tgt = TokenArray.load(data / f"{split}.src"), TokenArray.load(data / f"{split}.tgt")
    text = zip(*(iter_lines(data / f"{split}.{side}.txt") for side in ("src", "tgt")))
    return {pair: (src[line].tolist(), tgt[line].tolist()) for line, pair in enumerate(text)}


def other_corpora(root: Path, **extra: dict) -> Path:
    """Lines of the `data` fixture's clean (untagged, with its dev) and bt (tagged <bt>) corpora, and new lines."""
    entries = [{"name": "new", "src": "new.es", "tgt": "new.en", "dev": write_parallel(root, "dev", rows(5, 100))},
               {"name": "old", "src": "old.es", "tgt": "old.en"},
               {"name": "bt", "src": "bt.es", "tgt": "bt.en", "tag": "<bt>"}]
    for stem, pairs in (("new", rows(12, 200)), ("old", rows(10)), ("bt", rows(10, 55))):
        write_parallel(root, stem, pairs)
    return write_yaml(root, [entry | extra.get(entry["name"], {}) for entry in entries])


def test_corpora_take_the_vocabulary_of_another_directory(data: Path, tmp_path: Path):
    result = nmtkit("prepare", "--corpora", str(other_corpora(tmp_path)), "--subword-model", str(data / "spm.model"),
                    "--subword", "bpe", "--vocab-size", "500", "--out", str(tmp_path / "data"))
    assert result.exit_code == 0, result.stderr
    new = tmp_path / "data"
    assert (new / "spm.model").read_bytes() == (data / "spm.model").read_bytes()
    manifest, old_manifest = (json.loads((path / "manifest.json").read_text()) for path in (new, data))
    assert manifest["subword"]["reused"] is True and old_manifest["subword"]["reused"] is False
    assert manifest["vocab"] == old_manifest["vocab"] and manifest["corpus_tags"] == old_manifest["corpus_tags"]
    for split in ("train", "dev"):
        old_ids, new_ids = line_ids(data, split), line_ids(new, split)
        shared = old_ids.keys() & new_ids.keys()
        assert set(rows(10) + rows(10, 55) if split == "train" else rows(5, 100)) <= shared
        assert all(new_ids[pair] == old_ids[pair] for pair in shared)  # a bt line keeps its tag, an old line none
    model, _ = load_subwords(data)
    src, text = TokenArray.load(new / "train.src"), (new / "train.src.txt").read_text().splitlines()
    tagged = corpus_ranges(manifest)["bt"][0]
    bt = manifest["corpus_tags"]["<bt>"]
    for line in range(len(src)):  # new lines too, in the given vocabulary
        assert src[line].tolist() == [bt] * (line in tagged) + model.encode([text[line]])[0]



def test_corpora_prepared_again_in_their_own_vocabulary_are_the_same_ids(tmp_path: Path):
    """A multilingual directory (target-language tags, a corpus tag) and the same corpora prepared with its subword
    model: the same arrays."""
    corpora = read_corpora(other_corpora(tmp_path, **{name: {"src_lang": "es", "tgt_lang": "en"}
                                                      for name in ("new", "old", "bt")}))
    config = DataConfig(subword="bpe", vocab_size=60)
    trained = prepare_corpora(corpora, tmp_path / "trained", config)
    again = prepare_corpora(corpora, tmp_path / "again", config, subwords=load_subwords(tmp_path / "trained"))
    assert again["tags"] == trained["tags"] and again["corpus_tags"] == trained["corpus_tags"]
    assert again["splits"] == trained["splits"] and again["corpora"] == trained["corpora"]
    for name in ("train.src.tok.npy", "train.src.off.npy", "train.tgt.tok.npy", "dev.src.tok.npy", "train.corpus.npy"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "trained" / name).read_bytes()


def test_a_vocabulary_per_side_encodes_each_side_with_its_own(tmp_path: Path):
    src, tgt = write_parallel(tmp_path, "plain", rows(40) + [("nueve", "nine")])
    separate = nmtkit("prepare", "--train-src", str(tmp_path / src), "--train-tgt", str(tmp_path / tgt), "--separate",
                      "--subword", "word", "--vocab-size", "40", "--out", str(tmp_path / "plain"))
    assert separate.exit_code == 0, separate.stderr
    models = load_subwords(tmp_path / "plain")
    corpora = write_yaml(tmp_path, [{"name": "old", "src": "old.es", "tgt": "old.en"}])
    write_parallel(tmp_path, "old", rows(10) + [("nueve uno", "nine uno")])
    manifest = prepare_corpora(read_corpora(corpora), tmp_path / "data", DataConfig(), subwords=models)
    for side, model in zip(("src", "tgt"), models):
        assert (tmp_path / "data" / f"spm.{side}.model").read_bytes() == model.proto
        assert manifest["vocab"][side] == model.vocab_size
        ids, text = TokenArray.load(tmp_path / "data" / f"train.{side}"), (tmp_path / "data" / f"train.{side}.txt")
        assert [ids[line].tolist() for line in range(len(ids))] == model.encode(list(iter_lines(text)))
    assert models[0].proto != models[1].proto and not (tmp_path / "data" / "spm.model").exists()

@pytest.mark.parametrize("extra, needle", [
    ({"bt": {"tag": "<ft>"}}, "corpus 'bt': the given subword model has no tag '<ft>' (its tags are <bt>)"),
    ({name: {"src_lang": "es", "tgt_lang": "en"} for name in ("new", "old", "bt")}, "no tag '<2en>'"),
    ({"placeholders": True}, "data.placeholders masks placeholders to symbols this subword model lacks"),
])
def test_a_vocabulary_without_the_corpora_symbols_is_a_one_line_error(data: Path, tmp_path: Path, extra: dict,
                                                                       needle: str):
    placeholders = ["--set", "data.placeholders=auto"] if extra.pop("placeholders", False) else []
    result = nmtkit("prepare", "--corpora", str(other_corpora(tmp_path, **extra)), "--subword-model",
                    str(data / "spm.model"), *placeholders, "--out", str(tmp_path / "data"))
    assert_error(result, needle)
    assert not (tmp_path / "data").exists()


def test_pairs_do_not_take_a_subword_model(data: Path, tmp_path: Path):
    pairs = other_corpora(tmp_path, **{name: {"src_lang": "es", "tgt_lang": "en"} for name in ("new", "old", "bt")})
    assert_error(nmtkit("prepare", "--pairs", str(pairs), "--subword-model", str(data / "spm.model"), "--out",
                        str(tmp_path / "data")), "--pairs not with --subword-model")


def test_a_model_fine_tunes_on_corpora_in_its_vocabulary(model: Path, tmp_path: Path):
    result = nmtkit("prepare", "--corpora", str(other_corpora(tmp_path)), "--subword-model", str(model), "--out",
                    str(tmp_path / "data"))
    assert result.exit_code == 0, result.stderr
    overrides = ["train.batch_tokens=128", "train.valid_bleu=false", "train.amp=none",
                 "train.stages=[{mix: {new: 1, bt: 1}}]"]
    summary = train_command(tmp_path / "data", tmp_path / "tuned", None, None, overrides, init_from=str(model),
                            max_steps=2, device="cpu", threads=1)
    assert summary["steps"] == 2


def test_a_vocabulary_the_tags_and_placeholder_symbols_fill_is_refused_before_reading(tmp_path: Path):
    path = three_corpora(tmp_path, crawled={"tag": "<web>"})
    args = ["prepare", "--corpora", str(path), "--subword", "char", "--out", str(tmp_path / "data")]
    assert_error(nmtkit(*args, "--vocab-size", "6"), "data.vocab_size 6 leaves no piece for text", "2 tags", "take 6")
    assert_error(nmtkit(*args, "--vocab-size", "70", "--set", "placeholders=auto"), "2 tags", "64 for the placeholder",
                 "take 70")
    assert not (tmp_path / "data").exists()
