"""Run under torchrun by test_training_mix's data-parallel test: `nmtkit train` with train.stages in each process,
recording what the process reads of the training split and the stage and training clock of each update.

    python -m torch.distributed.run --standalone --nproc-per-node=2 tests/mix_ranks.py DATA CONFIG OUT RECORDS

Each process writes RECORDS/rank<r>.json: one entry per update, {step, stage, elapsed, src, tgt}, where src and tgt
are the training lines whose source or target tokens the process read for that update.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from nmtkit.data.dataset import TokenArray
from nmtkit.training.config import train_config
from nmtkit.training.loop import train
from nmtkit.training.mix import MixOrder


def record_reads(updates: list[dict]) -> None:
    """Wrap TokenArray reads and MixOrder.advance so that each update's entry lists the training lines read."""
    reads: list[tuple[int, int]] = []
    read, advance = TokenArray.__getitem__, MixOrder.advance

    def reading(self: TokenArray, index: int):
        reads.append((id(self), int(index)))
        return read(self, index)

    def advancing(self: MixOrder, group: list) -> None:
        sides = {id(self.train_data.src): "src", id(self.train_data.tgt): "tgt"}
        entry = {"step": self.progress.step, "stage": self._pending[0]["stage"], "elapsed": self.progress.elapsed,
                 "src": [], "tgt": []}
        for array, line in reads:
            if array in sides:  # not the dev split's arrays, which validation reads
                entry[sides[array]].append(line)
        updates.append(entry)
        reads.clear()
        advance(self, group)

    TokenArray.__getitem__, MixOrder.advance = reading, advancing


def main(data: str, config: str, out: str, records: str) -> None:
    updates: list[dict] = []
    record_reads(updates)
    train(train_config(Path(config), None, None, []), Path(data), Path(out), quiet=True)
    Path(records, f"rank{os.environ['RANK']}.json").write_text(json.dumps(updates), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:5])
