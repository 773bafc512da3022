"""The train command's one library call: the run's complete config (its file or the resumed run's, `--model`, the
flags, the overrides), then the run. A fine-tuning run's checkpoint (`--init-from`) is read once, for its model
section and its weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmtkit.data.files import refuse_onto_inputs
from nmtkit.training.config import train_config
from nmtkit.training.finetune import read_start
from nmtkit.training.loop import train


def train_command(data: Path, out: Path, config: Path | None, model: str | None, overrides: list[str],
                  resume: bool = False, quiet: bool = False, **train_flags: Any) -> dict | None:
    """Train into `out` on `data`; returns the summary (None in the processes of a torchrun job but rank 0). The
    train flags are those of `train_config` (None: not given)."""
    init_from = train_flags.get("init_from")
    if init_from:  # the run's checkpoints would replace the one it starts from
        refuse_onto_inputs([("--out", out / name) for name in ("model.pt", "last.pt")],
                           [("--init-from", Path(init_from))])
    resumes = resume and (out / "last.pt").exists()  # then the weights come from last.pt, not from init_from
    start = read_start(init_from) if init_from and not resumes else None
    settings = train_config(config, out if resume else None, model, overrides, start, **train_flags)
    return train(settings, data, out, resume, quiet, start)
