"""What a run records as it trains: one JSON record per line in `metrics.jsonl`, and the same numbers as TensorBoard
scalars (`tensorboard --logdir runs/`), written by TensorBoard's own `SummaryWriter`.

A resumed run redoes the updates after `last.pt`: their metrics.jsonl lines are dropped (`truncate_metrics`) and
TensorBoard is told to purge its events from that step on, so neither holds a step twice.
"""

from __future__ import annotations

import json
from pathlib import Path

# metrics.jsonl keys shown in TensorBoard, under the tag each gets there
SCALARS = {"train_loss": "train/loss", "train_nll": "train/nll", "lr": "train/lr",
           "tgt_tokens_per_s": "train/tgt_tokens_per_s", "grad_norm": "train/grad_norm",
           "valid_nll": "valid/nll", "valid_ppl": "valid/ppl", "valid_bleu": "valid/bleu", "valid_chrf": "valid/chrf"}


def scalars(record: dict) -> dict[str, float]:
    """The TensorBoard tags and values of one metrics record (the keys of SCALARS that it holds, and the stage and
    corpus shares of a run with train.stages)."""
    values = {tag: float(record[key]) for key, tag in SCALARS.items() if key in record}
    if "stage" in record:  # train.stages: the stage and each corpus' share of the target tokens
        values["mix/stage"] = float(record["stage"])
        values |= {f"mix/share/{name}": float(share) for name, share in record["shares"].items()}
    return values


class RunLog:
    """metrics.jsonl and TensorBoard events in the run directory (written by the main process only)."""

    def __init__(self, out_dir: Path, first_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter  # imported here: TensorBoard takes a second to import

        self.path = out_dir / "metrics.jsonl"
        self.writer = SummaryWriter(str(out_dir), purge_step=first_step or None)

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(record) + "\n")
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, record["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
