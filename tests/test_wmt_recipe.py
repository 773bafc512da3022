"""recipes/wmt end to end on a tiny mirror in the official formats, and its one-line errors.

The mirror holds the six archives under their official URL paths, with the official member names: the three
training .tgz files (Europarl and News Commentary under training/, Common Crawl at the top, other language pairs
beside the de-en files), the test sets of sacrebleu's wmt13 (test.tgz), wmt14/full (test-full.tgz) and wmt14
(test-filtered.tgz) as WMT's SGML files, and a SHA256SUMS file, since its bytes cannot match the official checksums.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from scripts import ROOT, load_script, recipe_path

from nmtkit.config_files import load_yaml
from nmtkit.run_config import build_config

load_script("recipes/wmt/download.py", "download")  # data.py imports it as its neighbour
data = load_script("recipes/wmt/data.py", "wmt_data")

WORDS = {"the": "die", "house": "Haus", "small": "klein", "is": "ist", "green": "grün", "we": "wir", "see": "sehen",
         "a": "ein", "dog": "Hund", "and": "und", "cat": "Katze", "today": "heute", "city": "Stadt", "big": "groß",
         "old": "alt", "new": "neu", "tree": "Baum", "river": "Fluss", "red": "rot", "they": "sie"}
CORPORA = {  # official archive path -> (de-en member prefix, other members)
    "wmt13/training-parallel-europarl-v7.tgz": ("training/europarl-v7.de-en", ["training/europarl-v7.fr-en.fr"]),
    "wmt13/training-parallel-commoncrawl.tgz": ("commoncrawl.de-en", ["commoncrawl.fr-en.fr"]),
    "wmt14/training-parallel-nc-v9.tgz": ("training/news-commentary-v9.de-en",
                                          ["training/news-commentary-v9.cs-en.cs"]),
}


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
    """Write the tiny mirror; returns the text each split should end up with."""
    expected = {"train.en": [], "train.de": []}
    for seed, (archive, (prefix, others)) in enumerate(CORPORA.items()):
        english, german = sentence_pairs(120, seed)
        expected["train.en"] += english
        expected["train.de"] += german
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


def test_recipe_end_to_end_on_a_tiny_mirror(mirror, tmp_path):
    root, expected = mirror
    (tmp_path / "tiny.yaml").write_text(TINY)
    result = run_recipe(NMTKIT_MIRROR=str(root), DATA=str(tmp_path / "data"), OUT=str(tmp_path / "run"),
                        CONFIG=str(tmp_path / "tiny.yaml"), VOCAB="100", THREADS="1", AVERAGE="2")
    assert result.returncode == 0, result.stderr[-3000:]
    raw = tmp_path / "data/raw"
    for name, lines in expected.items():
        assert (raw / name).read_text(encoding="utf-8").splitlines() == lines, name
    assert "against the SHA-256 in the mirror's SHA256SUMS" in result.stderr
    assert not (tmp_path / "data/extracted").exists()
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


def test_concatenate_adds_missing_newlines_and_replaces_invalid_utf8(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"one\ntwo")
    second.write_bytes(b"caf\xe9\n\xe2\x80\xa8inside\rone line\n")  # Latin-1 byte; U+2028 and CR stay in the line
    data.concatenate([first, second], tmp_path / "both")
    assert (tmp_path / "both").read_bytes() == "one\ntwo\ncaf\ufffd\n\u2028inside\rone line\n".encode()
    assert (data.count_lines(first), data.count_lines(tmp_path / "both")) == (2, 4)
