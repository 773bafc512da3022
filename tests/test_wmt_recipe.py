"""recipes/wmt end to end on a tiny mirror in the official formats, and its one-line errors.

The mirror holds the six archives under their official URL paths, with the official member names: the three
training .tgz files (Europarl and News Commentary under training/, Common Crawl at the top, other language pairs
beside the de-en files), the test sets of sacrebleu's wmt13 (test.tgz), wmt14/full (test-full.tgz) and wmt14
(test-filtered.tgz) as WMT's SGML files, and a SHA256SUMS file, since its bytes cannot match the official checksums.
`run.sh data` on it (once for the module) writes and prepares the three named corpora that the other tests read.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
from scripts import ROOT, load_script, recipe_path

from nmtkit.config.files import load_yaml
from nmtkit.config.run import build_config
from nmtkit.data.corpora import read_corpora
from nmtkit.errors import NmtkitError

load_script("recipes/wmt/download.py", "download")  # data.py imports it as its neighbour
data = load_script("recipes/wmt/data.py", "wmt_data")
stages = load_script("recipes/wmt/stages.py", "wmt_stages")

WORDS = {"the": "die", "house": "Haus", "small": "klein", "is": "ist", "green": "grün", "we": "wir", "see": "sehen",
         "a": "ein", "dog": "Hund", "and": "und", "cat": "Katze", "today": "heute", "city": "Stadt", "big": "groß",
         "old": "alt", "new": "neu", "tree": "Baum", "river": "Fluss", "red": "rot", "they": "sie"}
CORPORA = {  # official archive path -> (corpus name, de-en member prefix, other members, sentence pairs)
    "wmt13/training-parallel-europarl-v7.tgz": ("europarl", "training/europarl-v7.de-en",
                                                ["training/europarl-v7.fr-en.fr"], 150),
    "wmt13/training-parallel-commoncrawl.tgz": ("commoncrawl", "commoncrawl.de-en", ["commoncrawl.fr-en.fr"], 120),
    "wmt14/training-parallel-nc-v9.tgz": ("news-commentary", "training/news-commentary-v9.de-en",
                                          ["training/news-commentary-v9.cs-en.cs"], 90),
}
NOISY = "commoncrawl"  # ends with a copy of its first pair and a pair without German: what its filters remove


def sentence_pairs(count: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    english = [" ".join(rng.choice(list(WORDS)) for _ in range(rng.randint(3, 8))) for _ in range(count)]
    return english, [" ".join(WORDS[word] for word in line.split()) for line in english]


def text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def sgm(lines: list[str], setid: str, lang: str, kind: str) -> bytes:
    """A test-set file in WMT's SGML format (what sacrebleu's FakeSGMLDataset reads)."""
    tag = "srcset" if kind == "src" else "refset"
    head = f'<{tag} setid="{setid}" srclang="any"' + ("" if kind == "src" else f' trglang="{lang}"') + ">"
    segs = "".join(f'<seg id="{number}">{line}</seg>\n' for number, line in enumerate(lines, 1))
    doc = f'<doc sysid="{kind}" docid="tiny-{lang}" genre="news" origlang="en">\n<p>\n{segs}</p>\n</doc>\n'
    return f"{head}\n{doc}</{tag}>\n".encode()


def write_tgz(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def build_mirror(root: Path) -> dict:
    """Write the tiny mirror; returns the text each raw/ file should end up with."""
    expected = {}
    for seed, (archive, (name, prefix, others, count)) in enumerate(CORPORA.items()):
        english, german = sentence_pairs(count, seed)
        if name == NOISY:
            english, german = english + [english[0], "the city"], german + [german[0], ""]
        expected |= {f"{name}.en": english, f"{name}.de": german}
        members = {f"{prefix}.en": text(english), f"{prefix}.de": text(german)}
        write_tgz(root / archive, {**members, **{name: b"autre\n" for name in others}})
    dev_en, dev_de = sentence_pairs(30, 10)
    write_tgz(root / "wmt13/test.tgz", {"test/newstest2013-src.en.sgm": sgm(dev_en, "newstest2013", "en", "src"),
                                        "test/newstest2013-src.de.sgm": sgm(dev_de, "newstest2013", "de", "src")})
    test_en, test_de = sentence_pairs(40, 11)
    for archive, folder, (english, german) in (("test-full.tgz", "test-full", (test_en, test_de)),
                                               ("test-filtered.tgz", "test", (test_en[5:], test_de[5:]))):
        write_tgz(root / "wmt14" / archive, {
            f"{folder}/newstest2014-deen-src.en.sgm": sgm(english, "newstest2014", "en", "src"),
            f"{folder}/newstest2014-deen-ref.de.sgm": sgm(german, "newstest2014", "de", "ref"),
            f"{folder}/newstest2014-deen-src.de.sgm": sgm(german, "newstest2014", "de", "src"),
            f"{folder}/newstest2014-deen-ref.en.sgm": sgm(english, "newstest2014", "en", "ref")})
    sums = "".join(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(root).as_posix()}\n"
                   for path in sorted(root.rglob("*.tgz")))
    (root / "SHA256SUMS").write_text(sums)
    return {**expected, "dev.en": dev_en, "dev.de": dev_de, "test.en": test_en, "test.de": test_de,
            "test-filtered.en": test_en[5:], "test-filtered.de": test_de[5:]}


TINY = """\
model: {name: transformer, encoder_layers: 1, decoder_layers: 1, d_model: 32, heads: 2, ffn: 64, dropout: 0.1}
train: {max_steps: 30, batch_tokens: 400, lr: 3.0e-3, warmup: 10, valid_every: 15, keep_checkpoints: 2,
        log_every: 10, amp: none}
decode: {beam: 2, max_len_a: 1.0, max_len_b: 5}
"""


def recipe_env(**settings: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("NMTKIT_MIRROR", "MAX_TIME", "TRAIN_ARGS", "CONFIG", "AVERAGE")}
    env["PATH"] = recipe_path(env.get('PATH', ''))
    return {**env, **settings}


def run_recipe(*args: str, **settings: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "recipes/wmt/run.sh"), *args], env=recipe_env(**settings),
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    return root, build_mirror(root)


@pytest.fixture(scope="module")
def prepared(mirror, tmp_path_factory):
    """The data directory that `run.sh data` writes from the tiny mirror, and that run's output."""
    root, _ = mirror
    data_dir = tmp_path_factory.mktemp("wmt14")
    result = run_recipe("data", NMTKIT_MIRROR=str(root), DATA=str(data_dir), VOCAB="100")
    assert result.returncode == 0, result.stderr[-3000:]
    return data_dir, result


def test_data_keeps_each_corpus_apart_and_prepares_them_by_name(mirror, prepared):
    (_, expected), (data_dir, result) = mirror, prepared
    for name, lines in expected.items():
        assert (data_dir / "raw" / name).read_text(encoding="utf-8").splitlines() == lines, name
    assert not (data_dir / "raw/train.en").exists() and not (data_dir / "extracted").exists()
    assert "against the SHA-256 in the mirror's SHA256SUMS" in result.stderr
    listed = read_corpora(data_dir / "corpora.yaml")
    assert [corpus.name for corpus in listed] == ["europarl", "commoncrawl", "news-commentary"]
    assert [sorted(corpus.splits) for corpus in listed] == [["train"], ["train"], ["dev", "test", "train"]]
    assert listed[2].splits["dev"].src == data_dir / "raw/dev.en"
    manifest = json.loads((data_dir / "bpe100/manifest.json").read_text(encoding="utf-8"))
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("en", "de")
    assert manifest["data"]["character_coverage"] == pytest.approx(0.9999)
    start = 0
    for corpus, (name, _, _, count) in zip(manifest["corpora"], CORPORA.values(), strict=True):
        removed = {"duplicate": 1, "empty": 1} if name == NOISY else {}
        assert corpus["name"] == name and corpus["filter"]["read"] == len(expected[f"{name}.en"])
        assert corpus["filter"]["removed"] == removed and corpus["filter"]["kept"] == count
        assert corpus["train"] == {"start": start, "count": count} and corpus["sentences"]["train"] == count
        start += count
    assert manifest["filter"]["removed"] == {"duplicate": 1, "empty": 1}
    assert [corpus["sentences"]["dev"] for corpus in manifest["corpora"]] == [0, 0, len(expected["dev.en"])]
    assert manifest["splits"]["test"]["sentences"] == len(expected["test.en"])


def test_recipe_end_to_end_on_a_tiny_mirror(mirror, prepared, tmp_path):
    (_, expected), (data_dir, _) = mirror, prepared
    (tmp_path / "tiny.yaml").write_text(TINY)
    result = run_recipe(DATA=str(data_dir), OUT=str(tmp_path / "run"), CONFIG=str(tmp_path / "tiny.yaml"),
                        VOCAB="100", THREADS="1", AVERAGE="2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "extracting" not in result.stderr  # the data is there: skipped, no mirror needed
    for name, split in (("newstest2014", "test"), ("newstest2014-filtered", "test-filtered")):
        hypotheses = (tmp_path / f"run/{name}.hyp").read_text(encoding="utf-8").splitlines()
        assert len(hypotheses) == len(expected[f"{split}.en"])
    lines = result.stdout.splitlines()
    assert (tmp_path / "run/scores.txt").read_text().splitlines() == lines
    assert lines[0] == "newstest2014: 40 sentences, sacrebleu -t wmt14/full -l en-de (as Vaswani et al. 2017)"
    assert lines[5].startswith("newstest2014-filtered: 35 sentences, sacrebleu -t wmt14 -l en-de")
    for first in (1, 6):
        assert lines[first].startswith("BLEU = ")
        assert lines[first + 1].startswith("  signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert len(list((tmp_path / "run").glob("checkpoint_*.pt"))) == 2


def test_offline_without_a_mirror_stops_at_once_with_one_line(tmp_path):
    with socket.socket() as probe:  # every connection goes to a closed local port: offline, whatever the machine
        probe.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{probe.getsockname()[1]}"
    start = time.monotonic()
    result = run_recipe("data", DATA=str(tmp_path / "data"), http_proxy=proxy, https_proxy=proxy, no_proxy="",
                        HTTP_PROXY=proxy, HTTPS_PROXY=proxy, NO_PROXY="")
    assert time.monotonic() - start < 20
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert errors[0].startswith("error: cannot reach http://statmt.org/wmt13/training-parallel-europarl-v7.tgz")
    for needed in ("training-parallel-commoncrawl.tgz (918.3 MB)", "training-parallel-nc-v9.tgz (80.4 MB)",
                   "wmt13/test.tgz", "wmt14/test-full.tgz", "wmt14/test-filtered.tgz", "NMTKIT_MIRROR"):
        assert needed in errors[0]


def test_a_damaged_mirror_file_is_rejected_with_one_line(mirror, tmp_path):
    root, _ = mirror
    damaged = tmp_path / "damaged"
    for path in root.rglob("*"):
        if path.is_file():
            target = damaged / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    news = damaged / "wmt14/training-parallel-nc-v9.tgz"
    news.write_bytes(news.read_bytes()[:-1] + b"!")
    result = run_recipe("data", NMTKIT_MIRROR=str(damaged), DATA=str(tmp_path / "data"))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "training-parallel-nc-v9.tgz is damaged or not the expected file (sha256" in errors[0]
    assert not (tmp_path / "data/download/wmt14/training-parallel-nc-v9.tgz").exists()
    assert (tmp_path / "data/download/wmt13/training-parallel-europarl-v7.tgz").exists()


@pytest.mark.parametrize("size, d_model, heads, ffn, dropout, steps", [("base", 512, 8, 2048, 0.1, 100_000),
                                                                     ("big", 1024, 16, 4096, 0.3, 300_000)])
def test_configs_load_and_follow_the_paper(size, d_model, heads, ffn, dropout, steps):
    config = build_config(load_yaml(ROOT / f"recipes/wmt/transformer-{size}.yaml"))
    model, train = config.model, config.train
    assert (model.encoder_layers, model.decoder_layers, model.d_model, model.heads, model.ffn, model.dropout) == (
        6, 6, d_model, heads, ffn, dropout)
    assert (train.warmup, train.adam_beta1, train.adam_beta2, train.label_smoothing) == (4000, 0.9, 0.98, 0.1)
    assert train.lr == pytest.approx(d_model ** -0.5 * 4000 ** -0.5, rel=1e-3)  # Eq. 3 at step = warmup
    assert train.batch_tokens * train.update_freq == 25_000 and train.max_steps == steps
    assert (config.decode.beam, config.decode.alpha) == (4, 0.6)
    assert train.stages == []  # every pair once an epoch: the corpora in proportion to their sizes, as the paper


def corpus_target_tokens(data_dir: Path) -> dict[str, int]:
    """Each corpus' target tokens with an EOS a line, from the manifest's ranges and the target offsets."""
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    lengths = np.diff(np.load(data_dir / "train.tgt.off.npy")) + 1
    return {corpus["name"]: int(lengths[corpus["train"]["start"] : corpus["train"]["start"] +
                                        corpus["train"]["count"]].sum()) for corpus in manifest["corpora"]}


@pytest.mark.parametrize("max_time, until", [("", {"updates": 90_000}), ("2h", {"updates": 90_000, "time": 6480.0})])
def test_finetune_config_mixes_by_size_then_news_commentary_alone(prepared, tmp_path, max_time, until):
    data_dir = prepared[0] / "bpe100"
    out = tmp_path / "stages.yaml"
    assert stages.main(["--base", str(ROOT / "recipes/wmt/transformer-base.yaml"), "--data", str(data_dir),
                        "--finetune", "0.1", "--max-time", max_time, "--out", str(out)]) == 0
    config = build_config(load_yaml(out))
    first, second = config.train.stages
    tokens = corpus_target_tokens(data_dir)
    assert first.mix == tokens and len(set(tokens.values())) == 3  # shares of target tokens, as the mix draws them
    assert (first.until.updates, first.until.time) == (until["updates"], until.get("time", 0.0))
    assert second.mix == {"news-commentary": 1.0} and second.until.updates == 0 and second.until.time == 0
    assert config.model.d_model == 512 and config.train.max_steps == 100_000  # the rest is the base config


@pytest.mark.parametrize("finetune, message", [("1", "FINETUNE=1: give the share"), ("x", "FINETUNE=x: give")])
def test_finetune_share_outside_0_1_is_one_line(prepared, tmp_path, capsys, finetune, message):
    assert stages.main(["--base", str(ROOT / "recipes/wmt/transformer-base.yaml"), "--data",
                        str(prepared[0] / "bpe100"), "--finetune", finetune, "--out", str(tmp_path / "s.yaml")]) == 1
    assert capsys.readouterr().err.startswith(f"error: {message}")
    assert not (tmp_path / "s.yaml").exists()


def test_finetune_needs_a_corpora_directory(tmp_path):
    with pytest.raises(NmtkitError, match="no corpus 'news-commentary'"):
        stages.stages({"train": 10}, 0.1, 100, 0.0)
    with pytest.raises(NmtkitError, match="FINETUNE needs a budget"):
        stages.stages({"news-commentary": 10}, 0.1, 0, 0.0)


def test_recipe_finetunes_on_news_commentary_at_the_end(prepared, tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY.replace("max_steps: 30", "max_steps: 12").replace("log_every: 10",
                                                                                                "log_every: 4"))
    out = tmp_path / "runs/tiny-finetune0.5"
    result = run_recipe(DATA=str(prepared[0]), OUT=str(out), CONFIG=str(tmp_path / "tiny.yaml"), VOCAB="100",
                        THREADS="1", AVERAGE="0", FINETUNE="0.5")
    assert result.returncode == 0, result.stderr[-3000:]
    log = (out / "train.log").read_text(encoding="utf-8")
    assert "stage 2 of 2 from step 7: mix {'news-commentary': 1.0}" in log
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [record for record in records if "shares" in record][-1]
    assert last["stage"] == 2 and last["shares"]["news-commentary"] == 1.0
    assert (out / "scores.txt").read_text().startswith("newstest2014: 40 sentences")


def test_copy_text_adds_a_missing_newline_and_replaces_invalid_utf8(tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"caf\xe9\n\xe2\x80\xa8inside\rone line\nlast")  # Latin-1 byte; U+2028 and CR stay in the line
    data.copy_text(source, tmp_path / "copy")
    assert (tmp_path / "copy").read_bytes() == "caf\ufffd\n\u2028inside\rone line\nlast\n".encode()
    assert data.count_lines(source) == data.count_lines(tmp_path / "copy") == 3
    assert not (tmp_path / "copy.partial").exists()
