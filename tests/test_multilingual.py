"""Multilingual data and models (Johnson et al. 2017): one data directory for several language pairs, a target
language tag at the start of every source, added once and never written or read as text."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from nmtkit.cli import app
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.dataset import TokenArray
from nmtkit.data.multilingual import read_pairs
from nmtkit.data.prepare import load_subwords
from nmtkit.data.prepare_corpora import prepare_corpora
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.training.config import completed
from nmtkit.training.loop import train
from nmtkit.translate import Translator
from nmtkit.translate.torch_engine import TorchEngine

WORDS = {"en": "one two three four five six".split(), "de": "eins zwei drei vier fuenf sechs".split(),
         "fr": "un deux trois quatre cinq six".split()}


def sentences(lang: str, indices: list[list[int]]) -> list[str]:
    return [" ".join(WORDS[lang][index] for index in sentence) for sentence in indices]


def write_pairs(root: Path, pairs: list[tuple[str, str]], count: int = 120) -> Path:
    """Word-for-word 'translations' between the three toy languages, and the pairs YAML that lists them."""
    rng = random.Random(0)
    entries = []
    for src, tgt in pairs:
        entry = {"src_lang": src, "tgt_lang": tgt}
        for split, size in (("train", count), ("dev", 10)):
            indices = [[rng.randrange(6) for _ in range(rng.randint(2, 5))] for _ in range(size)]
            for lang in (src, tgt):
                (root / f"{split}.{src}-{tgt}.{lang}").write_text("\n".join(sentences(lang, indices)) + "\n")
            entry[split] = [f"{split}.{src}-{tgt}.{src}", f"{split}.{src}-{tgt}.{tgt}"]
        entries.append(entry)
    (root / "pairs.yaml").write_text(json.dumps(entries))  # JSON is YAML
    return root / "pairs.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("multi")
    pairs = read_pairs(write_pairs(root, [("en", "de"), ("de", "en"), ("en", "fr")]))
    prepare_corpora(pairs, root / "data", DataConfig(subword="word", vocab_size=40))
    return root / "data"


def test_every_source_starts_with_exactly_its_pairs_tag_and_targets_hold_none(data: Path):
    manifest = json.loads((data / "manifest.json").read_text())
    tags = manifest["tags"]
    assert sorted(tags) == ["de", "en", "fr"] and len(set(tags.values())) == 3
    assert [(pair["src_lang"], pair["tgt_lang"]) for pair in manifest["pairs"]] == [("en", "de"), ("de", "en"),
                                                                                  ("en", "fr")]
    assert [pair["sentences"]["train"] for pair in manifest["pairs"]] == \
        [pair["filter"]["kept"] for pair in manifest["pairs"]]  # each pair filtered (deduplicated) on its own
    corpus = np.load(data / "train.corpus.npy")
    src, tgt = TokenArray.load(data / "train.src"), TokenArray.load(data / "train.tgt")
    assert len(src) == len(corpus) == sum(pair["filter"]["kept"] for pair in manifest["pairs"])
    expected = [tags[lang] for lang in ("de", "en", "fr")]
    for line in range(len(src)):
        assert src[line][0] == expected[corpus[line]]
        assert not set(src[line][1:].tolist()) & set(tags.values())
        assert not set(tgt[line].tolist()) & set(tags.values())


def test_tags_are_not_text(data: Path):
    model, _ = load_subwords(data)
    tags = json.loads((data / "manifest.json").read_text())["tags"]
    assert not set(model.encode(["<2de> one"])[0]) & set(tags.values())  # the literal text is not the tag
    assert model.decode([[tags["de"], *model.encode(["one two"])[0]]]) == ["one two"]  # a tag decodes to nothing


@pytest.mark.parametrize("content, needle", [
    ("[]", "list of language pairs"),
    ('[{"src_lang": "en", "tgt_lang": "de"}]', "no train files"),
    ('[{"src_lang": "en", "tgt_lang": "d e", "train": "x.tsv"}]', "not a language code"),
    ('[{"src_lang": "en", "tgt_lang": "de", "train": "x.tsv", "valid": "y.tsv"}]', "unknown key 'valid'"),
    ('[{"src_lang": "en", "tgt_lang": "de", "train": "x.tsv"}, {"src_lang": "en", "tgt_lang": "de", "train": "y"}]',
     "listed twice"),
    ('[{"src_lang": "en", "tgt_lang": "de", "train": ["only one file"]}]', "TSV file or [source file"),
    ('[{"name": "clean", "train": "x.tsv"}]', "--pairs lists language pairs"),
])
def test_bad_pair_lists_are_errors(tmp_path: Path, content: str, needle: str):
    (tmp_path / "pairs.yaml").write_text(content)
    with pytest.raises(NmtkitError, match=re.escape(needle)):
        read_pairs(tmp_path / "pairs.yaml")


@pytest.fixture(scope="module")
def model(data: Path, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run")
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32},
                           "train": {"batch_tokens": 256, "warmup": 10, "threads": 1, "amp": "none", "max_steps": 10,
                                     "valid_every": 10, "pair_temperature": 2.0}})
    summary = train(completed(config), data, run)
    assert summary["steps"] == 10
    return run / "model.pt"


def test_translate_adds_the_chosen_tag_once(model: Path, monkeypatch):
    import torch

    from nmtkit.decoding.ensemble import load_models

    loaded = load_models([model], torch.device("cpu"))
    assert sorted(loaded.tags) == ["de", "en", "fr"]
    seen = []
    monkeypatch.setattr(Translator, "search", lambda self, sources, constraints=None: seen.extend(sources) or
                        [[type("Hyp", (), {"tokens": [], "score": 0.0, "constraints_met": True})()]] * len(sources))
    translator = Translator(TorchEngine(loaded, DecodeConfig(beam=1, tgt_lang="fr"), torch.device("cpu")))
    translator.translate_requests([Request("one two"), Request("three", tgt_lang="de")])
    assert {len(source): source[0] for source in seen} == {3: loaded.tags["fr"], 2: loaded.tags["de"]}
    assert all(list(source[1:]).count(loaded.tags["fr"]) == 0 for source in seen)


def one_line_error(args: list[str], stdin: str, *needles: str) -> None:
    result = CliRunner().invoke(app, args, input=stdin)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1 and all(n in errors[0] for n in needles), result.output


def test_target_language_errors_list_the_known_ones(model: Path):
    translate = ["translate", "-m", str(model), "--greedy"]
    one_line_error([*translate, "--tgt-lang", "xx"], "one\n", "unknown --tgt-lang 'xx'", "de, en, fr")
    one_line_error(translate, "one\n", "needs a target language", "de, en, fr")
    one_line_error([*translate, "--input-format", "jsonl"], '{"text": "one", "tgt_lang": "it"}\n', "'it'", "de, en, fr")
    result = CliRunner().invoke(app, [*translate, "--tgt-lang", "de", "--input-format", "jsonl"],
                                input='{"text": "one two"}\n{"text": "three", "tgt_lang": "fr"}\n{"text": ""}\n')
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 3


def test_serve_asks_a_multilingual_model_for_the_target_language(model: Path):
    from nmtkit.serve.app import ServeConfig, Service
    from nmtkit.serve.requests import parse_request

    service = Service(Translator.load(model, device="cpu", threads=1, beam=1), ServeConfig())
    sentences, options, _ = parse_request({"sentences": ["one two", {"text": "three", "tgt_lang": "fr"}],
                                           "tgt_lang": "de"}, service.config)
    translator = service.variant(options)
    assert translator.decode.tgt_lang == "de"
    tags = translator.loaded.tags
    assert [ids[0] for ids in service.encode(translator, sentences)[0]] == [tags["de"], tags["fr"]]
    with pytest.raises(NmtkitError, match="sentence 0: a multilingual model needs a target language.*de, en, fr"):
        service.encode(service.variant({}), sentences)
    with pytest.raises(NmtkitError, match="unknown --tgt-lang 'xx'"):
        service.variant({"tgt_lang": "xx"})
    with pytest.raises(NmtkitError, match="sentence 1: unknown target language 'it'"):
        service.encode(translator, [sentences[0], Request("four", tgt_lang="it")])


def test_subword_samples_repeat_each_lines_pair_with_its_copies(tmp_path: Path):
    pairs = read_pairs(write_pairs(tmp_path, [("en", "de"), ("de", "en")], count=40))
    config = DataConfig(subword="bpe", vocab_size=40, subword_samples=2, subword_alpha=0.2, dedup=False)
    manifest = prepare_corpora(pairs, tmp_path / "data", config)
    corpus = np.load(tmp_path / "data" / "train.corpus.npy")
    assert manifest["splits"]["train"]["sentences"] == len(corpus) == 160
    assert corpus.tolist() == [0] * 40 + [1] * 40 + [0] * 40 + [1] * 40
    tokens = TokenArray.load(tmp_path / "data" / "train.src")
    assert [tokens[i][0] for i in (0, 40, 80, 120)] == [tokens[0][0], tokens[40][0], tokens[0][0], tokens[40][0]]


def test_pairs_stream_into_the_joined_text_without_a_file_read_whole(tmp_path: Path, monkeypatch):
    """Issue 47.3: each pair's text was read whole (`read_bytes`) to join the pairs: 0.8 GB a side for 5M pairs."""
    read_whole = Path.read_bytes

    def small_files_only(path: Path) -> bytes:
        assert not path.name.endswith(".txt"), f"{path} read whole"
        return read_whole(path)

    monkeypatch.setattr(Path, "read_bytes", small_files_only)
    pairs = read_pairs(write_pairs(tmp_path, [("en", "de"), ("de", "en")], count=30))
    prepare_corpora(pairs, tmp_path / "data", DataConfig(subword="word", vocab_size=40, dedup=False))
    for side, index in (("src", 0), ("tgt", 1)):
        expected = "".join(Path(corpus.splits["train"].src if index == 0 else corpus.splits["train"].tgt).read_text()
                           for corpus in pairs)
        assert (tmp_path / "data" / f"train.{side}.txt").read_text() == expected
    assert sorted(path.name for path in (tmp_path / "data").glob("*part*")) == []
