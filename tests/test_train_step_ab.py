"""benchmarks/train_step_ab.py end to end on a tiny model: two workers take turns and the report names both."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml
from scripts import ROOT
from training_runs import copy_task

from nmtkit.config.run import build_config
from nmtkit.training.config import completed
from nmtkit.training.loop import train

CONFIG = """model: {name: transformer, encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn: 32}
train: {batch_tokens: 64, warmup: 5}
"""


def run_ab(tmp_path, a, b, *extra: str) -> subprocess.CompletedProcess:
    data = copy_task(tmp_path)
    config = tmp_path / "tiny.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/train_step_ab.py"), str(a), str(b),
                           "--config", str(config), "--data", str(data), "--amp", "none", "--threads", "1",
                           "--blocks", "3", "--block", "4", "--warmup", "2", *extra],
                          capture_output=True, text=True, timeout=300)


def test_the_same_checkout_twice_is_timed_block_by_block(tmp_path):
    result = run_ab(tmp_path, ROOT, ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(rf"A {re.escape(str(ROOT))} \(tiny.yaml\): \d+\.\d ms/update", lines[0])
    assert re.fullmatch(rf"B {re.escape(str(ROOT))} \(tiny.yaml\): \d+\.\d ms/update", lines[1])
    assert re.fullmatch(r"B/A speed: \d+\.\d{3} \(12 updates each, 3 alternating blocks, amp none, 1 threads\)",
                        lines[2])


def test_b_can_time_other_settings_of_the_same_checkout(tmp_path):
    other = tmp_path / "no_dropout.yaml"
    other.write_text(CONFIG.replace("ffn: 32}", "ffn: 32, dropout: 0.0}"), encoding="utf-8")
    result = run_ab(tmp_path, ROOT, ROOT, "--config-b", str(other))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"A {ROOT} (tiny.yaml): ") and lines[1].startswith(f"B {ROOT} (no_dropout.yaml): ")
    (tmp_path / "again").mkdir()
    missing = run_ab(tmp_path / "again", ROOT, ROOT, "--config-b", str(tmp_path / "missing.yaml"))
    assert missing.returncode != 0 and missing.stderr == f"error: no config file {tmp_path / 'missing.yaml'}\n"


def test_b_can_start_from_a_trained_runs_weights_and_optimizer(tmp_path):
    config = build_config(yaml.safe_load(CONFIG))
    config.train.max_steps, config.train.threads, config.train.amp, config.train.valid_bleu = 6, 1, "none", False
    (tmp_path / "parent").mkdir()
    train(completed(config), copy_task(tmp_path / "parent"), tmp_path / "parent" / "run", quiet=True)
    late = tmp_path / "late.yaml"
    late.write_text(CONFIG.replace("warmup: 5}", f"warmup: 5, init_from: {tmp_path / 'parent/run/last.pt'}, "
                                               "init_optimizer: true}"), encoding="utf-8")
    result = run_ab(tmp_path, ROOT, ROOT, "--config-b", str(late))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith(f"B {ROOT} (late.yaml): ")
    (tmp_path / "again").mkdir()
    missing_checkpoint = tmp_path / "missing.pt"
    late.write_text(CONFIG.replace("warmup: 5}", f"warmup: 5, init_from: {missing_checkpoint}}}"), encoding="utf-8")
    missing = run_ab(tmp_path / "again", ROOT, ROOT, "--config-b", str(late))
    assert missing.returncode != 0 and str(missing_checkpoint) in missing.stderr
    assert f"error: the worker of {ROOT} (late.yaml) stopped" in missing.stderr.splitlines()[-1]


def test_a_checkout_without_nmtkit_is_a_one_line_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_ab(tmp_path, ROOT, empty)
    assert result.returncode != 0
    assert f"error: the worker of {empty} (tiny.yaml) stopped" in result.stderr.splitlines()[-1]
