"""`nmtkit align` and `nmtkit translate --alignment` end to end on the reverse task, whose true alignment is the
anti-diagonal. The tiny Transformer is trained in-process (a few seconds) rather than through `nmtkit train`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from scripts import load_script
from typer.testing import CliRunner

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.cli import app
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS, EOS, PAD, train_subword
from nmtkit.registry import build_model

make_data = load_script("recipes/reverse/make_data.py", "reverse_make_data")
MODEL = {"name": "transformer", "encoder_layers": 1, "decoder_layers": 2, "d_model": 32, "heads": 2, "ffn": 64,
         "dropout": 0.0}


def nmtkit(*args: str, check: bool = True):
    """Run the command line in-process (a subprocess per call would cost seconds of imports)."""
    result = CliRunner().invoke(app, ["--quiet", *args])
    if check and result.exit_code != 0:
        raise AssertionError(f"nmtkit {' '.join(args)} failed:\n{result.stderr}") from result.exception
    return result


def train_reverse(pairs: list[tuple[str, str]], steps: int = 300) -> tuple:
    subword = train_subword([text for pair in pairs for text in pair], DataConfig(subword="word"), 24)
    config = build_config({"model": MODEL})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    encoded = [(subword.encode([src])[0], subword.encode([tgt])[0]) for src, tgt in pairs]
    rng = random.Random(0)
    for _ in range(steps):
        batch = rng.sample(encoded, 32)
        src, src_mask = encode_sources([src for src, _ in batch])
        tgt_in = pad_sequences([tgt for _, tgt in batch], [BOS], [])
        tgt_out = pad_sequences([tgt for _, tgt in batch], [], [EOS])
        logits, _ = model(src, src_mask, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return config, model.eval(), subword


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("align")
    rng = random.Random(1)
    pairs = make_data.make_pairs(3000, rng, 3, 8)
    config, model, subword = train_reverse(pairs)
    save_atomic(make_payload(config, model, (subword, subword)), root / "model.pt")
    test = make_data.make_pairs(30, rng, 3, 8)
    (root / "test.src").write_text("".join(src + "\n" for src, _ in test))
    (root / "test.tgt").write_text("".join(tgt + "\n" for _, tgt in test))
    gold = [" ".join(f"{i}-{len(src.split()) - 1 - i}" for i in range(len(src.split()))) for src, _ in test]
    (root / "test.gold").write_text("".join(line + "\n" for line in gold))
    return root


def align_args(run: Path, *extra: str) -> list[str]:
    return ["align", "-m", str(run / "model.pt"), "--src", str(run / "test.src"), "--tgt", str(run / "test.tgt"),
            "--threads", "1", *extra]


def test_align_finds_the_anti_diagonal(reverse_run: Path):
    best = min(json.loads(nmtkit(*align_args(reverse_run, "--gold", str(reverse_run / "test.gold"), "--layer",
                                             str(layer))).stdout)["forward"]["aer"] for layer in (0, 1))
    assert best < 0.15


def test_align_writes_pharaoh_lines_and_heatmaps(reverse_run: Path, tmp_path: Path):
    result = nmtkit(*align_args(reverse_run, "--plot", str(tmp_path / "plots"), "--plot-count", "1"))
    lines = result.stdout.splitlines()
    assert len(lines) == 30
    words = len((reverse_run / "test.tgt").read_text().splitlines()[0].split())
    assert len(lines[0].split()) == words and all("-" in link for link in lines[0].split())
    assert sorted(path.name for path in (tmp_path / "plots").iterdir()) == ["00001.png", "00001.svg"]


def test_align_both_directions_symmetrized(reverse_run: Path):
    scores = json.loads(nmtkit(*align_args(reverse_run, "--reverse-model", str(reverse_run / "model.pt"),
                                           "--symmetrize", "intersection", "--gold",
                                           str(reverse_run / "test.gold"))).stdout)
    assert set(scores) == {"forward", "backward", "intersection"}
    assert scores["intersection"]["precision"] >= scores["forward"]["precision"]


def test_align_output_file_leaves_stdout_to_the_scores(reverse_run: Path, tmp_path: Path):
    links = tmp_path / "links.txt"
    result = nmtkit(*align_args(reverse_run, "--output", str(links), "--gold", str(reverse_run / "test.gold")))
    assert set(json.loads(result.stdout)) == {"forward"}
    assert links.read_text() == nmtkit(*align_args(reverse_run)).stdout


def test_align_one_model_symmetrizes_its_two_argmaxes(reverse_run: Path):
    scores = json.loads(nmtkit(*align_args(reverse_run, "--symmetrize", "intersection", "--gold",
                                           str(reverse_run / "test.gold"))).stdout)
    assert set(scores) == {"forward", "backward", "intersection"}
    assert scores["intersection"]["links"] <= scores["forward"]["links"]


def test_empty_lines_get_empty_alignments(reverse_run: Path, tmp_path: Path):
    (tmp_path / "s").write_text("a b c\n\nd e\n")
    (tmp_path / "t").write_text("c b a\n\n\n")
    result = nmtkit("align", "-m", str(reverse_run / "model.pt"), "--src", str(tmp_path / "s"), "--tgt",
                    str(tmp_path / "t"), "--threads", "1")
    lines = result.stdout.split("\n")
    assert len(lines[0].split()) == 3 and lines[1:] == ["", "", ""]


def test_align_soft_json(reverse_run: Path):
    record = json.loads(nmtkit(*align_args(reverse_run, "--format", "soft-json")).stdout.splitlines()[0])
    assert len(record["attention"]) == len(record["tgt"]) and len(record["attention"][0]) == len(record["src"])
    assert sum(record["attention"][0]) == pytest.approx(1.0, abs=1e-2)


def test_translate_prints_alignment(reverse_run: Path):
    result = nmtkit("translate", "-m", str(reverse_run / "model.pt"), "--input", str(reverse_run / "test.src"),
                    "--greedy", "--threads", "1", "--alignment")
    first = result.stdout.splitlines()[0]
    hypothesis, links = first.split(" ||| ")
    assert hypothesis and all("-" in link for link in links.split())


@pytest.mark.parametrize("extra, needle", [(["--layer", "9"], "--layer 9"), (["--symmetrize", "both"], "both"),
                                          (["--format", "xml"], "xml")])
def test_align_bad_options_are_one_line_errors(reverse_run: Path, extra: list[str], needle: str):
    result = nmtkit(*align_args(reverse_run, *extra), check=False)
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")][0].count(needle) == 1


def test_align_refuses_an_output_onto_an_input(reverse_run: Path, tmp_path: Path):
    """STYLE rule 17: `--output` that is `--src` (by any path) would replace the source with its alignments."""
    src = tmp_path / "src.txt"
    src.write_bytes((reverse_run / "test.src").read_bytes())
    (tmp_path / "link.txt").symlink_to(src)
    args = [arg if arg != str(reverse_run / "test.src") else str(src) for arg in align_args(reverse_run)]
    for output in (src, tmp_path / "link.txt", reverse_run / "test.tgt"):
        result = nmtkit(*args, "--output", str(output), check=False)
        assert result.exit_code == 1 and "refusing to write onto an input" in result.stderr
    assert src.read_bytes() == (reverse_run / "test.src").read_bytes()
