"""The training loop: token-budget batches in the order of each epoch, shared among data-parallel processes (DDP);
time/step/epoch budgets, early stopping and a clean stop on SIGINT/SIGTERM; periodic logging and validation; and
`train`, which runs it in a run directory. The parts it drives: `setup` (data and model), `step` (the update),
`state` (checkpoints and resume), `validation` (dev scores and the best model), `amp` (the precision)."""

from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm import tqdm

from nmtkit.config.files import save_yaml
from nmtkit.config.sections import Config, TrainConfig
from nmtkit.data.dataset import Batch
from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import StopSignals, set_threads
from nmtkit.runtime.distributed import World, init_world, leave_world
from nmtkit.training.amp import configured_precision, settle_precision
from nmtkit.training.ema import weight_average
from nmtkit.training.mix import batch_order
from nmtkit.training.run_log import RunLog
from nmtkit.training.setup import set_up
from nmtkit.training.state import Checkpoints, Progress
from nmtkit.training.step import Updater
from nmtkit.training.validation import Validator

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split


def budget_left(train: TrainConfig, progress: Progress) -> bool:
    """False once train.max_steps updates or train.max_time seconds are spent (0: no such budget)."""
    if train.max_steps and progress.step >= train.max_steps:
        return False
    return not (train.max_time and progress.elapsed >= train.max_time)


class TrainingClock:
    """The run's training time (`Progress.elapsed`, validation included), as rank 0 counts it. Each process reads its
    clock at the end of an update; the next update's vote hands rank 0's reading to every process (`Trainer._loop`),
    so that whatever reads the count (train.max_time, a stage's until.time, the linear schedule, late dropout)
    reads the same value on every process. A resumed run goes on from the count saved in last.pt."""

    def __init__(self, progress: Progress):
        self.progress, self.last = progress, progress.elapsed
        self.since = self.read_at = time.monotonic()

    def read(self) -> None:
        """This process's count now (`last`): the agreed seconds and those since they were agreed."""
        self.read_at = time.monotonic()
        self.last = self.progress.elapsed + self.read_at - self.since

    def agree(self, seconds: float) -> None:
        """Take `seconds`, rank 0's `last`, as the count at the moment of this process's last reading."""
        self.progress.elapsed, self.since = seconds, self.read_at


def new_window() -> dict:
    """The sums over the updates since the last training log record."""
    return {"loss": 0.0, "nll": 0.0, "grad_norm": 0.0, "tokens": 0, "updates": 0, "seconds": 0.0}


def training_record(progress: Progress, window: dict, lr: float) -> dict:
    """The metrics.jsonl record of the updates in `window`: their means, and their target tokens per second."""
    updates, seconds = window["updates"], max(window["seconds"], 1e-9)
    return {"step": progress.step, "epoch": progress.epoch,
            "train_loss": round(window["loss"] / updates, 4), "train_nll": round(window["nll"] / updates, 4),
            "grad_norm": round(window["grad_norm"] / updates, 4), "lr": lr,
            "tgt_tokens": window["tokens"], "tgt_tokens_per_s": round(window["tokens"] / seconds, 1),
            "elapsed": round(progress.elapsed, 1)}


class Trainer:
    """One run directory's training (in each process under torchrun): the loop over the parts that set it up,
    update, checkpoint and validate it."""

    def __init__(self, config: Config, data_dir: Path, out_dir: Path, quiet: bool = False,
                 world: World | None = None):
        world = world or init_world(config.train.device)
        self.quiet, self.threads = quiet, set_threads(config.train.threads)
        precision = configured_precision(config.train.amp)  # auto: measured (settle_precision)
        self.setup = setup = set_up(config, data_dir, out_dir, world)
        self.progress = progress = Progress()
        self.updater = updater = Updater(setup, progress, precision)
        self.average = weight_average(setup.model, config.train.ema)
        self.checkpoints = Checkpoints(setup, progress, updater.optimizer, updater.scheduler, updater.scaler,
                                       self.average)
        self.validator = Validator(setup, progress, self.checkpoints, self.write_metrics, self.average)
        self.batches = batch_order(setup.train_data, config.train, world, progress, data_dir, setup.subwords)
        self.run_log: RunLog | None = None
        if world.rank > 0:  # the same initial weights everywhere, then each process its own dropout masks
            torch.manual_seed(config.train.seed + world.rank)

    @property
    def config(self) -> Config:
        return self.setup.config

    def resume(self) -> None:
        self.checkpoints.resume()
        self.validator.last_validated = self.progress.step

    def settle_precision(self) -> None:
        self.updater.precision = settle_precision(self.setup, self.progress, self.updater.precision)

    def write_metrics(self, record: dict) -> None:
        if self.run_log is None:  # opened at the first record: after resume, which purges TensorBoard's later steps
            self.run_log = RunLog(self.setup.out_dir, self.progress.step)
        self.run_log.write(record)

    def log_training(self, window: dict) -> None:
        record = {**training_record(self.progress, window, self.updater.scheduler.get_last_lr()[0]),
                  **self.batches.window_record()}
        if self.setup.world.is_main:
            self.write_metrics(record)
        log.info("train %s", record)

    def _train_one(self, batches: list[Batch], tokens: float, weight: float, window: dict) -> dict | None:
        started = time.monotonic()
        stats = self.updater.update(batches, tokens, weight)
        if stats is not None and self.average is not None:
            self.average.update(self.progress.step + 1)
        seconds = time.monotonic() - started
        if stats is None:
            return None
        self.progress.step += 1
        self.progress.tgt_tokens += stats["tokens"]
        self.progress.train_seconds += seconds
        for key, value in (("loss", stats["loss"]), ("nll", stats["nll"]), ("grad_norm", stats["grad_norm"]),
                           ("tokens", stats["tokens"]), ("updates", 1), ("seconds", seconds)):
            window[key] += value
        return stats

    def _loop(self, signals: StopSignals, bar: tqdm) -> str:
        """Run updates until a budget is spent ('budget'), patience runs out ('patience') or a signal arrives (its
        name). Every process votes before each update, so that all of them stop at the same one."""
        train, world, progress = self.config.train, self.setup.world, self.progress
        window, clock = new_window(), TrainingClock(progress)
        while (group := self.batches.next_group()) is not None:
            batches, weight = self.batches.local_batches(group)
            local_tokens = weight * sum(batch.num_tgt_tokens for batch in batches)
            tokens, signalled, seconds = world.sum(
                [local_tokens, float(signals.received is not None), clock.last if world.is_main else 0.0])
            if signalled:  # elapsed stays what next_group read: a resumed run draws this group alike
                return signals.received or "SIGTERM"
            clock.agree(seconds)
            if not budget_left(train, progress):
                return "budget"
            stats = self._train_one(batches, tokens, weight, window)
            self.batches.advance(group)
            clock.read()
            if stats is None:
                continue
            bar.update(1)
            bar.set_postfix(loss=f"{stats['loss']:.3f}", refresh=False)
            if progress.step % train.log_every == 0:
                self.log_training(window)
                window = new_window()
            if progress.step % train.valid_every == 0:
                if self.validator.validate():
                    log.info("no improvement in %d validations: stopping", train.patience)
                    return "patience"
        return "budget"

    def run(self) -> dict:
        """Train until a budget is spent, patience runs out or SIGINT/SIGTERM asks to stop (then last.pt is saved
        and the summary says `interrupted`); validates at the end when the last update was not validated."""
        world = self.setup.world
        bar = tqdm(total=self.config.train.max_steps or None, initial=self.progress.step, unit="step",
                   disable=self.quiet or not world.is_main or not sys.stderr.isatty(), file=sys.stderr,
                   dynamic_ncols=True)
        with StopSignals(second_interrupt_stops=not world.distributed) as signals:
            try:
                reason = self._loop(signals, bar)
            finally:
                bar.close()
            if reason in ("SIGINT", "SIGTERM"):
                self.checkpoints.save_last()
                log.warning("%s: stopped at step %d; last.pt saved, continue with --resume", reason,
                            self.progress.step)
                return {**self.summary(stopped_early=False), "interrupted": reason}
            unvalidated = (self.progress.step != self.validator.last_validated
                           or not (self.setup.out_dir / "model.pt").exists())
            if world.main_decides(unvalidated):
                self.validator.validate()
        return self.summary(stopped_early=reason == "patience")

    def summary(self, stopped_early: bool) -> dict:
        progress, setup = self.progress, self.setup
        return {"steps": progress.step, "epochs": progress.epoch, "elapsed_seconds": round(progress.elapsed, 1),
                "tgt_tokens_per_s": round(progress.tgt_tokens / max(progress.train_seconds, 1e-9), 1),
                "best": progress.best, "best_metric": self.config.train.best_metric,
                "stopped_early": stopped_early, "skipped_updates": progress.skipped_updates,
                "device": str(setup.device), "processes": setup.world.size, "threads": self.threads,
                "precision": self.updater.precision_name,
                "parameters": sum(p.numel() for p in setup.model.parameters())}


@contextmanager
def run_directory(out_dir: Path, resume: bool, world: World):
    """The run directory, with train.log receiving nmtkit's log (rank 0); the other processes log warnings only."""
    if (out_dir / "last.pt").exists() and not resume:
        raise NmtkitError(f"{out_dir} already holds a run (last.pt); pass --resume or choose another --out")
    logger, handler = logging.getLogger("nmtkit"), None
    level = logger.level
    try:
        if world.is_main:
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise NmtkitError(f"cannot create run directory {out_dir}: {error.strerror}") from error
            handler = logging.FileHandler(out_dir / "train.log", encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
        else:
            logger.setLevel(logging.WARNING)
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)
            handler.close()


def _start(trainer: Trainer, resume: bool, start: dict | None) -> None:
    """Where the run starts: from last.pt (resume), from another run's weights (train.init_from: `start`, when
    read already), or from the initial weights; then the precision is settled."""
    init_from = trainer.config.train.init_from
    if resume and (trainer.setup.out_dir / "last.pt").exists():
        trainer.resume()
    elif init_from:
        trainer.checkpoints.initialize_from(init_from, start)
    trainer.settle_precision()


def train(config: Config, data_dir: Path, out_dir: Path, resume: bool = False, quiet: bool = False,
          start: dict | None = None) -> dict | None:
    """Train the complete `config` (`nmtkit.training.config`) on `data_dir`, writing config.yaml, train.log,
    metrics.jsonl, model.pt and last.pt; `start` is train.init_from's checkpoint when the caller has read it.

    Under torchrun every process calls this: rank 0 writes the run directory and returns the summary, the other
    processes return None (and log warnings only)."""
    world = init_world(config.train.device)
    trainer, finished = None, False
    try:
        with run_directory(out_dir, resume, world):
            trainer = Trainer(config, data_dir, out_dir, quiet, world)
            _start(trainer, resume, start)
            if world.is_main:
                save_yaml(config, out_dir / "config.yaml")
            log.info("model %s: %d parameters on %s (%d process(es), %d threads, %s); validation BLEU tokenizer %s",
                     config.model.name, sum(p.numel() for p in trainer.setup.model.parameters()),
                     trainer.setup.device, world.size, trainer.threads, trainer.updater.precision_name,
                     trainer.setup.bleu_tokenizer)
            try:
                summary = trainer.run()
            finally:
                if trainer.run_log is not None:
                    trainer.run_log.close()
        finished = True
        return summary if world.is_main else None
    finally:
        del trainer  # DDP and its pending work go before the process group they use
        leave_world(world, wait_for_all=finished)
