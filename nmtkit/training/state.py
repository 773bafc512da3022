"""What a run keeps and reads back: its progress counters, its checkpoints (model.pt, last.pt with the training state
of every process, checkpoint_<step>.pt), exact resume from last.pt, and a fine-tuning run's start from another
run's checkpoint (`train.init_from`)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import torch

from nmtkit.checkpoint.file import load_checkpoint
from nmtkit.checkpoint.payload import (
    make_payload,
    rng_state,
    save_atomic,
    set_rng_state,
    step_checkpoints,
    truncate_metrics,
)
from nmtkit.errors import NmtkitError
from nmtkit.training.ema import WeightAverage
from nmtkit.training.finetune import check_start, read_start
from nmtkit.training.setup import RunSetup

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split


@dataclass
class Progress:
    """Everything besides weights and optimizer that exact resume needs."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed: float = 0.0
    best: float | None = None
    bad_validations: int = 0
    tgt_tokens: int = 0
    train_seconds: float = 0.0
    nonfinite_in_row: int = 0
    skipped_updates: int = 0
    precision: str = ""  # what train.amp=auto chose, kept for the rest of the run (resumed runs included)
    mix: dict = dataclasses.field(default_factory=dict)  # train.stages' sampler (`nmtkit.training.mix.MixOrder`)

    def restore(self, saved: dict) -> None:
        """Take the saved counters (in place: the schedule and the updates read this object); keys that later
        versions dropped are ignored."""
        known = {field.name for field in dataclasses.fields(Progress)}
        fresh = Progress(**{key: value for key, value in saved.items() if key in known})
        vars(self).update(vars(fresh))


class Checkpoints:
    """Writes the run's checkpoints (rank 0) and reads them back into the model, the optimizer, the schedule, the
    loss scaler and the progress."""

    def __init__(self, setup: RunSetup, progress: Progress, optimizer: torch.optim.Optimizer,
                 scheduler: torch.optim.lr_scheduler.LRScheduler, scaler: torch.amp.GradScaler,
                 average: WeightAverage | None = None):
        self.setup, self.progress = setup, progress
        self.optimizer, self.scheduler, self.scaler, self.average = optimizer, scheduler, scaler, average

    def train_state(self, rng: list[dict]) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "scaler": self.scaler.state_dict(), "progress": vars(self.progress), "rng": rng}
        if self.average is not None:
            state["weight_average"] = self.average.state_dict()
        return state

    def save(self, name: str, train_state: dict | None = None) -> None:
        setup = self.setup
        save_atomic(make_payload(setup.config, setup.model, setup.subwords, train_state, setup.langs, setup.tags,
                                 setup.placeholders), setup.out_dir / name)

    def save_last(self) -> None:
        """Write last.pt with the random state of every process; every process calls this, rank 0 writes."""
        rng = self.setup.world.gather(rng_state(self.setup.device))
        if self.setup.world.is_main:
            self.save("last.pt", self.train_state(rng))

    def keep(self, count: int) -> None:
        """Save checkpoint_<step>.pt and delete all but the newest `count` of them."""
        self.save(f"checkpoint_{self.progress.step}.pt")
        for old in step_checkpoints(self.setup.out_dir)[:-count]:
            old.unlink()

    def resume(self) -> None:
        setup = self.setup
        path = setup.out_dir / "last.pt"
        payload = load_checkpoint(path, "cannot resume from it: move it away to train from scratch in this --out, "
                                        "or train into a new --out")
        state = payload.get("train_state")
        if state is None:
            raise NmtkitError(f"{path} holds no training state; cannot resume from it")
        saved = payload.get("subword", {})
        if (saved.get("src"), saved.get("tgt")) != (setup.subwords[0].proto, setup.subwords[1].proto):
            raise NmtkitError(f"{path} was trained with other subword vocabularies than {setup.data_dir}; resume "
                              "with the data directory of the run, or train into a new --out")
        try:
            setup.model.load_state_dict(payload["model"])
        except RuntimeError as error:
            raise NmtkitError(f"{path} does not fit this model and data ({str(error).splitlines()[-1].strip()}); "
                              "resume with the data and config of the run, or train into a new --out") from error
        self._load_train_state(state)
        if setup.world.is_main:
            truncate_metrics(setup.out_dir / "metrics.jsonl", self.progress.step)
        log.info("resumed from step %d (epoch %d, batch %d)", self.progress.step, self.progress.epoch,
                 self.progress.batch_in_epoch)

    def _load_train_state(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        self.progress.restore(state["progress"])
        if self.average is not None:
            try:
                self.average.load_state_dict(state.get("weight_average"))
            except ValueError as error:
                raise NmtkitError(f"{error}; resume with the config of the run") from error
        states = state.get("rng") or [{"torch": state["torch_rng"], "cuda": state.get("cuda_rng")}]
        rank = self.setup.world.rank
        if rank < len(states):
            set_rng_state(states[rank], self.setup.device)
        else:
            log.warning("last.pt holds the random state of %d processes; process %d starts a fresh one",
                        len(states), rank)

    def initialize_from(self, path: str, start: dict | None = None) -> None:
        """Fine-tuning: the weights of checkpoint `path` (`start`, when read already; and, with
        train.init_optimizer, its optimizer state and schedule position); the step count, epochs and budgets start
        from zero."""
        setup, init_optimizer = self.setup, self.setup.config.train.init_optimizer
        init_layers, init_width = setup.config.train.init_layers, setup.config.train.init_width
        if (init_layers or init_width) and init_optimizer:
            raise NmtkitError(f"train.init_{'layers' if init_layers else 'width'} starts a model of other "
                              f"{'depths' if init_layers else 'widths'}: its optimizer state cannot continue (leave "
                              "train.init_optimizer out)")
        payload = check_start(start or read_start(path), path, setup.subwords,
                              dataclasses.asdict(setup.config.model), setup.data_dir, init_layers, init_width)
        try:
            setup.model.load_state_dict(payload["model"])
        except RuntimeError as error:  # a model whose layers are not `encoder.N.` / `decoder.N.` modules
            if not init_layers:
                raise
            raise NmtkitError(f"train.init_layers cannot map the layers of {setup.config.model.name} models: "
                              f"{str(error).splitlines()[0]}") from None
        if "layer_maps" in payload:
            log.info("student layers from the checkpoint's: %s", "; ".join(
                f"{stack} {' '.join(map(str, layers))}" for stack, layers in payload["layer_maps"].items()))
        if "widths" in payload:
            log.info("student widths pruned from the checkpoint's: %s", payload["widths"])
        if init_optimizer:
            state = payload.get("train_state")
            if state is None:
                raise NmtkitError(f"{path} holds no optimizer state (train.init_optimizer needs a last.pt)")
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        log.info("starting from the weights of %s%s", path, " and its optimizer and schedule" if init_optimizer else "")
