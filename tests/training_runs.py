"""Reading a run directory while `nmtkit train` runs in another process (for the resume and signal tests)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path


def train_losses(run_dir: Path) -> dict[int, float]:
    """Step -> training loss of every logged update in the run's metrics.jsonl."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {record["step"]: record["train_loss"] for record in records if "train_loss" in record}


def wait_for_step(run_dir: Path, step: int, process: subprocess.Popen) -> None:
    """Wait until training has logged `step` (its metrics.jsonl may end in a line being written)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if max(train_losses(run_dir), default=0) >= step:
                return
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"training did not reach step {step} (exit status {process.poll()})")
