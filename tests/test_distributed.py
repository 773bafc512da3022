"""Data-parallel training (nmtkit/runtime/distributed.py): two gloo processes under torchrun against one process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from training_runs import copy_task, train_losses, wait_for_step

from nmtkit.data.dataset import ParallelData
from nmtkit.runtime.distributed import World, child_processes

CONFIG = {"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32, "dropout": 0.0},
          "train": {"batch_tokens": 100, "warmup": 10, "lr": 3e-3, "log_every": 1, "valid_every": 4,
                    "valid_bleu": False, "threads": 1, "device": "cpu", "amp": "none"}}
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def copy_task_run(tmp_path_factory) -> tuple[Path, Path]:
    """A data directory of 260 training pairs (copy the sentence) and a config whose epoch has an odd number of
    batches, so that one process runs out of batches at the end of each epoch."""
    root = tmp_path_factory.mktemp("copy")
    data = copy_task(root)
    assert len(ParallelData(data, "train").epoch_batches(100, 1, 0)) % 2 == 1
    (root / "config.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    return data, root / "config.yaml"


def train_command(data: Path, config: Path, out: Path, *extra: str, processes: int = 1) -> list[str]:
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", "-m", "nmtkit"]
    return [sys.executable, *(launcher if processes > 1 else ["-m", "nmtkit"]), "-q", "train", "--data", str(data),
            "--config", str(config), "--out", str(out), *extra]


def run(command: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, env=ENV, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return result


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def test_two_processes_equal_one_process_with_the_same_global_batch(copy_task_run, tmp_path: Path):
    data, config = copy_task_run
    single = run(train_command(data, config, tmp_path / "one", "--max-steps", "12", "--update-freq", "2"))
    double = run(train_command(data, config, tmp_path / "two", "--max-steps", "12", processes=2))
    summaries = [json.loads(result.stdout) for result in (single, double)]
    assert [summary["processes"] for summary in summaries] == [1, 2]
    assert double.stdout.decode().count("\n") == 1  # rank 0 alone prints its summary
    one, two = train_losses(tmp_path / "one"), train_losses(tmp_path / "two")
    assert sorted(two) == list(range(1, 13))  # 12 updates over the end of an epoch of 13 batches
    assert two == pytest.approx(one, rel=1e-4)
    for name, value in weights(tmp_path / "one" / "last.pt").items():
        torch.testing.assert_close(weights(tmp_path / "two" / "last.pt")[name], value, rtol=1e-4, atol=1e-5)
    assert not list((tmp_path / "two").glob(".*"))  # no temporary files of another rank


def test_early_stopping_agrees_across_processes(copy_task_run, tmp_path: Path):
    data, config = copy_task_run
    result = run(train_command(data, config, tmp_path / "run", "--max-steps", "100", "--set", "train.lr=0",
                               "--set", "train.patience=2", "--set", "train.valid_every=2",
                               "--set", "train.best_metric=loss", processes=2))
    summary = json.loads(result.stdout)
    assert summary["stopped_early"] and summary["steps"] == 6


def test_interrupting_the_launcher_stops_every_process_after_saving(copy_task_run, tmp_path: Path):
    data, config = copy_task_run
    out = tmp_path / "run"
    argv = ["-q", "train", "--data", str(data), "--config", str(config), "--out", str(out), "--max-steps", "100000"]
    script = f"import sys; from nmtkit.runtime.distributed import launch; sys.exit(launch(2, {argv!r}))"
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=ENV)
    wait_for_step(out, 5, launcher)
    torchrun = child_processes(launcher.pid)
    workers = [pid for parent in torchrun for pid in child_processes(parent)]
    assert len(torchrun) == 1 and len(workers) == 2
    launcher.send_signal(signal.SIGINT)  # as Ctrl-C would: the workers are in another session
    stdout, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 130, stderr.decode()[-3000:]
    assert "Traceback" not in stderr.decode()
    summary = json.loads(stdout)
    assert summary["interrupted"] == "SIGINT"
    saved = torch.load(out / "last.pt", weights_only=True)["train_state"]
    assert saved["progress"]["step"] == summary["steps"] >= 5 and len(saved["rng"]) == 2
    assert not child_processes(launcher.pid) and all(not Path(f"/proc/{pid}").exists() for pid in workers)
    resumed = run(train_command(data, config, out, "--resume", "--max-steps", str(summary["steps"] + 3), processes=2))
    assert json.loads(resumed.stdout)["steps"] == summary["steps"] + 3


def test_a_world_of_one_passes_values_through():
    world = World()
    assert world.is_main and not world.distributed
    assert world.sum([1.5, 2.0]) == [1.5, 2.0]
    assert world.any(True) and not world.any(False) and world.main_decides(True)
    assert world.gather({"a": 1}) == [{"a": 1}]


def test_gpus_without_cuda_is_a_one_line_error(copy_task_run, tmp_path: Path):
    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has the GPUs; the error is for machines without them")
    data, config = copy_task_run
    result = subprocess.run(train_command(data, config, tmp_path / "run", "--gpus", "2"), capture_output=True,
                            env=ENV)
    stderr = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("error: --gpus 2 needs 2 CUDA devices")
