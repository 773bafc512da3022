"""The training loop: label-smoothed cross-entropy, Adam with inverse square-root warmup, token-budget batches,
gradient clipping and accumulation, mixed precision, data-parallel processes (DDP), periodic validation (loss and
greedy BLEU), best/last checkpoints written atomically, exact resume, time/step/epoch budgets, early stopping,
a clean stop on SIGINT/SIGTERM, skipped non-finite updates and out-of-memory batches split in two.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from nmtkit.checkpoint import (
    LoadedModel,
    load_checkpoint,
    make_payload,
    rng_state,
    save_atomic,
    set_rng_state,
    step_checkpoints,
    truncate_metrics,
)
from nmtkit.config import Config, save_yaml
from nmtkit.data.dataset import Batch, ParallelData
from nmtkit.data.multilingual import language_pairs
from nmtkit.data.prepare import load_subwords, read_manifest
from nmtkit.distributed import World, init_world, leave_world
from nmtkit.errors import NmtkitError
from nmtkit.metrics.tokenize import default_tokenizer
from nmtkit.modules.checkpointing import checkpoint_activations
from nmtkit.precision import auto_candidates, describe, dtype_name, fastest, time_precisions
from nmtkit.registry import build_model
from nmtkit.runtime import StopSignals, autocast_dtype, set_threads
from nmtkit.training.config import check_train_config
from nmtkit.training.finetune import init_payload
from nmtkit.training.late_dropout import LateDropout
from nmtkit.training.objectives import TrainingForward, label_smoothed_nll
from nmtkit.training.run_log import RunLog
from nmtkit.training.schedule import inverse_sqrt, linear_to_budget, resolve_schedule
from nmtkit.training.validation import dev_loss, dev_scores

log = logging.getLogger(__name__)
FUSED_ADAM_DEVICES = ("cpu", "cuda")


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


def new_window() -> dict:
    return {"loss": 0.0, "nll": 0.0, "grad_norm": 0.0, "tokens": 0, "updates": 0, "seconds": 0.0}


class Trainer:
    """Holds the model, data and optimisation state of one run directory (in each process under torchrun)."""

    def __init__(self, config: Config, data_dir: Path, out_dir: Path, quiet: bool = False,
                 world: World | None = None):
        self.config, self.data_dir, self.out_dir, self.quiet = config, data_dir, out_dir, quiet
        self.world = world or init_world(config.train.device)
        self.device = self.world.device
        config.train = train = resolve_schedule(config.train, self.device.type)  # config.yaml keeps what it ran
        check_train_config(train)
        self.threads = set_threads(train.threads)
        self.precision = None if train.amp == "auto" else autocast_dtype(train.amp)  # auto: measured
        torch.manual_seed(train.seed)
        manifest = read_manifest(data_dir)
        self.langs = (manifest.get("src_lang"), manifest.get("tgt_lang"))
        self.tags, self.pairs = manifest.get("tags", {}), language_pairs(manifest)  # multilingual data
        self.bleu_tokenizer = "per target language" if self.pairs else default_tokenizer(self.langs[1])
        self.subwords = load_subwords(data_dir)
        self.model = self._build_model()
        self.train_data = self._load_split("train")
        self.has_dev = "dev" in manifest["splits"]
        self.dev_data = self._load_split("dev") if self.has_dev else None
        self.ddp = self._distribute(TrainingForward(self.model))
        self.forward = torch.compile(self.ddp) if train.compile else self.ddp
        # fused: one kernel over all parameters (for the Bible model on a CPU thread 8 against 27-42 ms per step;
        # the same values up to float rounding); torch's default on a CPU is a Python loop over the tensors
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=train.lr, betas=(train.adam_beta1, train.adam_beta2), eps=train.adam_eps,
            weight_decay=train.weight_decay, fused=self.device.type in FUSED_ADAM_DEVICES)
        self.progress = Progress()
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor(train))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision is torch.float16)
        self.last_validated = 0
        self.late_dropout = LateDropout(self.model, train)
        self.run_log: RunLog | None = None
        self._epoch: tuple[int, list] = (-1, [])
        if self.world.rank > 0:  # the same initial weights everywhere, then each process its own dropout masks
            torch.manual_seed(train.seed + self.world.rank)

    def _lr_factor(self, train):
        """The schedule as LambdaLR's function of the step; the linear decay also reads the seconds trained so far
        (self.progress, restored on resume)."""
        if train.lr_schedule == "linear":
            factor = linear_to_budget(train.warmup, train.max_steps, train.max_time)
            return lambda step: factor(step, self.progress.elapsed)
        return inverse_sqrt(train.warmup)

    def _build_model(self) -> nn.Module:
        shared = self.subwords[0] is self.subwords[1]
        model = build_model(self.config.model, self.subwords[0].vocab_size, self.subwords[1].vocab_size, shared)
        if self.config.train.activation_checkpointing:
            layers = model.checkpoint_layers()
            if not layers:
                raise NmtkitError(f"model {self.config.model.name} does not support train.activation_checkpointing "
                                  "(transformer and convs2s do)")
            checkpoint_activations(layers)
        return model.to(self.device)

    def _load_split(self, split: str) -> ParallelData:
        """A split without the pairs too long for train.max_length or the model."""
        limit = min(self.config.train.max_length, self.model.max_length() or self.config.train.max_length)
        data = ParallelData(self.data_dir, split, limit)
        if not len(data.src):
            raise NmtkitError(f"the {split} split of {self.data_dir} has no pairs; prepare it from non-empty files")
        if not len(data):
            raise NmtkitError(f"every {split} pair of {self.data_dir} is longer than {limit} positions; "
                              "raise train.max_length (and the model's max_positions) or prepare shorter data")
        if data.left_out and self.world.is_main:
            log.warning("%s: left out %d of %d pairs longer than %d positions (train.max_length or the model's "
                        "max_positions)", split, data.left_out, len(data.src), limit)
        return data

    def _distribute(self, forward: TrainingForward) -> nn.Module:
        if not self.world.distributed:
            return forward
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(forward, device_ids=device_ids)

    @property
    def precision_name(self) -> str:
        return {torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}.get(self.precision, "float32")

    # ---------------------------------------------------------------- checkpoints
    def train_state(self, rng: list[dict]) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(), "progress": vars(self.progress), "rng": rng}

    def save(self, name: str, train_state: dict | None = None) -> None:
        save_atomic(make_payload(self.config, self.model, self.subwords, train_state, self.langs,
                                 self.tags), self.out_dir / name)

    def save_last(self) -> None:
        """Write last.pt with the random state of every process; every process calls this, rank 0 writes."""
        rng = self.world.gather(rng_state(self.device))
        if self.world.is_main:
            self.save("last.pt", self.train_state(rng))

    def resume(self) -> None:
        path = self.out_dir / "last.pt"
        payload = load_checkpoint(path, "cannot resume from it: move it away to train from scratch in this --out, "
                                        "or train into a new --out")
        state = payload.get("train_state")
        if state is None:
            raise NmtkitError(f"{path} holds no training state; cannot resume from it")
        saved = payload.get("subword", {})
        if (saved.get("src"), saved.get("tgt")) != (self.subwords[0].proto, self.subwords[1].proto):
            raise NmtkitError(f"{path} was trained with other subword vocabularies than {self.data_dir}; resume with "
                              "the data directory of the run, or train into a new --out")
        try:
            self.model.load_state_dict(payload["model"])
        except RuntimeError as error:
            raise NmtkitError(f"{path} does not fit this model and data ({str(error).splitlines()[-1].strip()}); "
                              "resume with the data and config of the run, or train into a new --out") from error
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        known = {field.name for field in dataclasses.fields(Progress)}
        self.progress = Progress(**{key: value for key, value in state["progress"].items() if key in known})
        self.last_validated = self.progress.step
        self._restore_rng(state)
        if self.world.is_main:
            truncate_metrics(self.out_dir / "metrics.jsonl", self.progress.step)
        log.info("resumed from step %d (epoch %d, batch %d)", self.progress.step, self.progress.epoch,
                 self.progress.batch_in_epoch)

    def initialize_from(self, path: str) -> None:
        """Fine-tuning: the weights of checkpoint `path` (and, with train.init_optimizer, its optimizer state and
        schedule position); the step count, epochs and budgets start from zero."""
        payload = init_payload(path, self.subwords, dataclasses.asdict(self.config.model), self.data_dir)
        self.model.load_state_dict(payload["model"])
        if self.config.train.init_optimizer:
            state = payload.get("train_state")
            if state is None:
                raise NmtkitError(f"{path} holds no optimizer state (train.init_optimizer needs a last.pt)")
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        log.info("starting from the weights of %s%s", path,
                 " and its optimizer and schedule" if self.config.train.init_optimizer else "")

    def _restore_rng(self, state: dict) -> None:
        states = state.get("rng") or [{"torch": state["torch_rng"], "cuda": state.get("cuda_rng")}]
        if self.world.rank < len(states):
            set_rng_state(states[self.world.rank], self.device)
        else:
            log.warning("last.pt holds the random state of %d processes; process %d starts a fresh one",
                        len(states), self.world.rank)

    # ---------------------------------------------------------------- precision
    def settle_precision(self) -> None:
        """With train.amp=auto, the precision this run measured before (when resumed), or the faster one of
        float32 and bf16 on two real training batches (rank 0 measures, every process follows)."""
        if self.config.train.amp != "auto":
            return
        if not self.progress.precision:
            chosen = self._measure_precision() if self.world.is_main else None
            use_bf16 = self.world.main_decides(chosen is torch.bfloat16)
            self.progress.precision = dtype_name(torch.bfloat16 if use_bf16 else None)
        self.precision = None if self.progress.precision == "float32" else getattr(torch, self.progress.precision)

    def _measure_precision(self) -> torch.dtype | None:
        candidates = auto_candidates(self.device)
        if len(candidates) == 1:
            log.info("train.amp=auto: float32 (%s has no bf16 kernels)", self.device)
            return None
        batches = [self.train_data.batch(indices).to(self.device)
                   for indices in self.train_data.epoch_batches(self.config.train.batch_tokens, 0, 0)[:2]]
        saved = rng_state(self.device)  # dropout masks drawn here must not change the run
        try:
            timings = time_precisions(lambda dtype: self._trial_step(batches, dtype), candidates, self.device)
        finally:
            set_rng_state(saved, self.device)
        chosen = fastest(timings)
        log.info("train.amp=auto: %s (forward and backward of two batches: %s)", dtype_name(chosen),
                 describe(timings))
        return chosen

    def _trial_step(self, batches: list[Batch], dtype: torch.dtype | None) -> None:
        self.model.train()
        for batch in batches:
            with torch.autocast(self.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                logits = self.model(batch.src, batch.src_mask, batch.tgt_in)[0]
            label_smoothed_nll(logits, batch.tgt_out, self.config.train.label_smoothing)[0].backward()
        self.model.zero_grad(set_to_none=True)

    # ---------------------------------------------------------------- one update
    def sampling_probability(self) -> float:
        train = self.config.train
        ramp = min(1.0, self.progress.step / train.sampling_ramp) if train.sampling_ramp > 0 else 1.0
        return train.scheduled_sampling * ramp

    def _loss(self, batch: Batch, probability: float) -> tuple[Tensor, Tensor]:
        with torch.autocast(self.device.type, dtype=self.precision or torch.bfloat16,
                            enabled=self.precision is not None):
            logits = self.forward(batch.src, batch.src_mask, batch.tgt_in, probability)
        return label_smoothed_nll(logits, batch.tgt_out, self.config.train.label_smoothing)

    def _backward(self, batches: list[Batch], tokens: float, weight: float) -> tuple[float, float]:
        """Forward and backward of this process's batches. Each loss is scaled so that the gradients add up to the
        update's loss per target token over all processes (DDP averages over processes, hence the factor of
        their number); DDP exchanges gradients in the backward pass of the last batch only."""
        scale = weight * self.world.size / max(tokens, 1.0)
        probability = self.sampling_probability()
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss, nll: one device sync per update
        for index, batch in enumerate(batches):
            hold_back = self.world.distributed and index < len(batches) - 1
            with self.ddp.no_sync() if hold_back else nullcontext():
                loss, nll = self._loss(batch.to(self.device), probability)
                self.scaler.scale(loss * scale).backward()
            sums += torch.stack([loss.detach(), nll]).double() * weight
        loss_sum, nll_sum = sums.tolist()
        return loss_sum, nll_sum

    def update(self, batches: list[Batch], tokens: float, weight: float = 1.0) -> dict | None:
        """One optimizer step over this process's `batches` (gradient accumulation); `tokens` counts the target
        tokens of the whole update on every process. Returns the update's statistics, or None if it was skipped
        (a non-finite loss or gradient, or an fp16 overflow that the gradient scaler handles)."""
        self.model.train()
        if self.late_dropout.follow(self.progress.step, self.progress.elapsed):
            log.info("step %d: dropout on (train.dropout_from %g)", self.progress.step, self.config.train.dropout_from)
        try:
            loss_sum, nll_sum = self._backward(batches, tokens, weight)
            out_of_memory = False
        except torch.OutOfMemoryError:
            out_of_memory = True
        if out_of_memory:  # outside the except block, so that the failed batch's tensors are freed first
            return self._retry_smaller(batches, tokens, weight)
        loss_sum, nll_sum = self.world.sum([loss_sum, nll_sum])
        if not math.isfinite(loss_sum):
            return self._skip(f"the loss is {loss_sum}")
        self.scaler.unscale_(self.optimizer)
        norm = self._clip_gradients()
        if not math.isfinite(norm) and not self.scaler.is_enabled():
            return self._skip(f"the gradient norm is {norm}")
        scale = self.scaler.get_scale()
        self.scaler.step(self.optimizer)
        self.optimizer.__dict__.pop("grad_scale", None)  # the clip's divisor (_clip_gradients): this step only
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler.get_scale() < scale:
            log.info("step %d: fp16 gradient overflow, update skipped, loss scale now %g", self.progress.step + 1,
                     self.scaler.get_scale())
            return None
        self.scheduler.step()
        self.progress.nonfinite_in_row = 0
        return {"loss": loss_sum / tokens, "nll": nll_sum / tokens, "tokens": int(tokens), "grad_norm": norm}

    def _clip_gradients(self) -> float:
        """Clip the gradient norm to train.clip_norm (when > 0); returns the norm before clipping. The fused step
        divides the gradients by clip_grad_norm_'s factor (`grad_scale`, as GradScaler hands it to fused optimizers)
        instead of a pass of its own over them: 1.4% faster updates in the bf16 Bible recipe. fp16 keeps the pass."""
        clip = self.config.train.clip_norm
        if not self.optimizer.defaults.get("fused") or self.scaler.is_enabled():
            return float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip if clip > 0 else math.inf))
        norm = float(torch.nn.utils.get_total_norm([p.grad for p in self.model.parameters() if p.grad is not None]))
        if 0 < clip < norm + 1e-6 and math.isfinite(norm):
            self.optimizer.grad_scale = torch.tensor((norm + 1e-6) / clip, device=self.device)
        return norm

    def _skip(self, reason: str) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        progress, limit = self.progress, self.config.train.max_nonfinite
        progress.nonfinite_in_row += 1
        progress.skipped_updates += 1
        log.warning("step %d: %s; update skipped (%d in a row, %d allowed)", progress.step + 1, reason,
                    progress.nonfinite_in_row, limit)
        if progress.nonfinite_in_row >= limit:
            raise NmtkitError(f"training diverged at step {progress.step + 1}: {limit} updates in a row were skipped "
                              f"({reason}); lower train.lr or raise train.warmup, then --resume from last.pt")
        return None

    def _retry_smaller(self, batches: list[Batch], tokens: float, weight: float) -> dict | None:
        """After running out of memory: the same update again, each batch split in two."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        where = f"out of memory on {self.device} at step {self.progress.step + 1}"
        if self.world.distributed:
            raise NmtkitError(f"{where} in process {self.world.rank}: lower train.batch_tokens (and raise "
                              "train.update_freq to keep the update size)")
        halves = [half for batch in batches for half in batch.split()]
        if len(halves) == len(batches):
            raise NmtkitError(f"{where} with one sentence per batch: lower data.max_words or use a smaller model")
        log.warning("%s: retrying the update in %d batches instead of %d", where, len(halves), len(batches))
        return self.update(halves, tokens, weight)

    # ---------------------------------------------------------------- validation
    def dev_scores(self) -> tuple[float, float]:
        loaded = LoadedModel(self.config, self.model.eval(), *self.subwords, self.langs, self.tags)
        return dev_scores(loaded, self.dev_data, self.data_dir, self.device, self.pairs,
                          self.config.train.valid_max_sentences)

    def validate(self) -> bool:
        """Validate (rank 0), save model.pt when best and last.pt; on every process, True when patience ran out."""
        self.last_validated = self.progress.step
        if self.world.is_main:
            self._validate_and_keep_best()
        self.save_last()
        patience = self.config.train.patience
        return self.world.main_decides(patience > 0 and self.progress.bad_validations >= patience)

    def _validate_and_keep_best(self) -> None:
        started = time.monotonic()
        record = {"step": self.progress.step, "epoch": self.progress.epoch}
        if self.has_dev:
            record["valid_nll"] = round(dev_loss(self.model, self.dev_data, self.config.train.batch_tokens,
                                                 self.device), 4)
            record["valid_ppl"] = round(math.exp(min(record["valid_nll"], 50)), 2)
            if self.config.train.valid_bleu:
                record["valid_bleu"], record["valid_chrf"] = (round(score, 2) for score in self.dev_scores())
        improved = self._track_best(record)
        record["best"] = self.progress.best
        record["valid_seconds"] = round(time.monotonic() - started, 1)
        self.write_metrics(record)
        log.info("validation %s", record)
        if improved:
            self.save("model.pt")
        if self.config.train.keep_checkpoints > 0:
            self.save(f"checkpoint_{self.progress.step}.pt")
            for old in step_checkpoints(self.out_dir)[: -self.config.train.keep_checkpoints]:
                old.unlink()

    def _track_best(self, record: dict) -> bool:
        metric = self.config.train.best_metric
        if metric == "bleu" and "valid_bleu" in record:
            score = record["valid_bleu"]
        elif "valid_nll" in record:
            score = -record["valid_nll"]
        else:
            score = float(self.progress.step)  # no dev set: the newest model is the best one
        if self.progress.best is None or score > self.progress.best:
            self.progress.best, self.progress.bad_validations = score, 0
            return True
        self.progress.bad_validations += 1
        return False

    def write_metrics(self, record: dict) -> None:
        if self.run_log is None:  # opened at the first record: after resume, which purges TensorBoard's later steps
            self.run_log = RunLog(self.out_dir, self.progress.step)
        self.run_log.write(record)

    # ---------------------------------------------------------------- the loop
    def budget_left(self) -> bool:
        train, progress = self.config.train, self.progress
        if train.max_steps and progress.step >= train.max_steps:
            return False
        return not (train.max_time and progress.elapsed >= train.max_time)

    def epoch_batches(self, epoch: int) -> list:
        if self._epoch[0] != epoch:
            train = self.config.train
            self._epoch = (epoch, self.train_data.epoch_batches(train.batch_tokens, train.seed, epoch,
                                                                train.pair_temperature))
        return self._epoch[1]

    def next_group(self) -> list | None:
        """The batches of the next update on all processes together (update_freq per process; fewer at the end
        of an epoch), from where the progress says; None once train.max_epochs are done."""
        train, progress = self.config.train, self.progress
        while not (train.max_epochs and progress.epoch >= train.max_epochs):
            batches = self.epoch_batches(progress.epoch)
            if progress.batch_in_epoch < len(batches):
                start = progress.batch_in_epoch
                return batches[start : start + train.update_freq * self.world.size]
            progress.epoch, progress.batch_in_epoch = progress.epoch + 1, 0
        return None

    def local_batches(self, group: list) -> tuple[list[Batch], float]:
        """This process's share of an update's batches and their weight. A process left without a batch at the end
        of an epoch runs the first one with weight 0, so that it still joins DDP's gradient exchange."""
        per_process = self.config.train.update_freq
        mine = group[self.world.rank * per_process : (self.world.rank + 1) * per_process]
        if not mine:
            return [self.train_data.batch(group[0])], 0.0
        return [self.train_data.batch(indices) for indices in mine], 1.0

    def log_training(self, window: dict) -> None:
        train_seconds = max(window["seconds"], 1e-9)
        record = {"step": self.progress.step, "epoch": self.progress.epoch,
                  "train_loss": round(window["loss"] / window["updates"], 4),
                  "train_nll": round(window["nll"] / window["updates"], 4),
                  "grad_norm": round(window["grad_norm"] / window["updates"], 4),
                  "lr": self.scheduler.get_last_lr()[0],
                  "tgt_tokens": window["tokens"], "tgt_tokens_per_s": round(window["tokens"] / train_seconds, 1),
                  "elapsed": round(self.progress.elapsed, 1)}
        if self.world.is_main:
            self.write_metrics(record)
        log.info("train %s", record)

    def _train_one(self, batches: list[Batch], tokens: float, weight: float, window: dict) -> dict | None:
        started = time.monotonic()
        stats = self.update(batches, tokens, weight)
        seconds = time.monotonic() - started
        if stats is None:
            return None
        self.progress.step += 1
        self.progress.tgt_tokens += stats["tokens"]
        self.progress.train_seconds += seconds
        for key, value in (("loss", stats["loss"]), ("nll", stats["nll"]), ("grad_norm", stats["grad_norm"]),
                           ("tokens", stats["tokens"]),
                           ("updates", 1), ("seconds", seconds)):
            window[key] += value
        return stats

    def _loop(self, signals: StopSignals, bar: tqdm) -> str:
        """Run updates until a budget is spent ('budget'), patience runs out ('patience') or a signal arrives (its
        name). Every process votes before each update, so that all of them stop at the same one."""
        train, window, clock = self.config.train, new_window(), time.monotonic()
        while (group := self.next_group()) is not None:
            batches, weight = self.local_batches(group)
            local_tokens = weight * sum(batch.num_tgt_tokens for batch in batches)
            tokens, spent, signalled = self.world.sum(
                [local_tokens, float(not self.budget_left()), float(signals.received is not None)])
            if signalled:
                return signals.received or "SIGTERM"
            if spent:
                return "budget"
            stats = self._train_one(batches, tokens, weight, window)
            self.progress.batch_in_epoch += len(group)
            self.progress.elapsed, clock = self.progress.elapsed + time.monotonic() - clock, time.monotonic()
            if stats is None:
                continue
            bar.update(1)
            bar.set_postfix(loss=f"{stats['loss']:.3f}", refresh=False)
            if self.progress.step % train.log_every == 0:
                self.log_training(window)
                window = new_window()
            if self.progress.step % train.valid_every == 0:
                if self.validate():
                    log.info("no improvement in %d validations: stopping", train.patience)
                    return "patience"
                self.progress.elapsed, clock = self.progress.elapsed + time.monotonic() - clock, time.monotonic()
        return "budget"

    def run(self) -> dict:
        """Train until a budget is spent, patience runs out or SIGINT/SIGTERM asks to stop (then last.pt is saved
        and the summary says `interrupted`); validates at the end when the last update was not validated."""
        bar = tqdm(total=self.config.train.max_steps or None, initial=self.progress.step, unit="step",
                   disable=self.quiet or not self.world.is_main or not sys.stderr.isatty(), file=sys.stderr,
                   dynamic_ncols=True)
        with StopSignals(second_interrupt_stops=not self.world.distributed) as signals:
            try:
                reason = self._loop(signals, bar)
            finally:
                bar.close()
            if reason in ("SIGINT", "SIGTERM"):
                self.save_last()
                log.warning("%s: stopped at step %d; last.pt saved, continue with --resume", reason,
                            self.progress.step)
                return {**self.summary(stopped_early=False), "interrupted": reason}
            unvalidated = self.progress.step != self.last_validated or not (self.out_dir / "model.pt").exists()
            if self.world.main_decides(unvalidated):
                self.validate()
        return self.summary(stopped_early=reason == "patience")

    def summary(self, stopped_early: bool) -> dict:
        progress = self.progress
        return {"steps": progress.step, "epochs": progress.epoch, "elapsed_seconds": round(progress.elapsed, 1),
                "tgt_tokens_per_s": round(progress.tgt_tokens / max(progress.train_seconds, 1e-9), 1),
                "best": progress.best, "best_metric": self.config.train.best_metric,
                "stopped_early": stopped_early, "skipped_updates": progress.skipped_updates,
                "device": str(self.device), "processes": self.world.size, "threads": self.threads,
                "precision": self.precision_name, "parameters": sum(p.numel() for p in self.model.parameters())}


def _log_to_run_dir(out_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(out_dir / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("nmtkit").addHandler(handler)
    return handler


def train(config: Config, data_dir: Path, out_dir: Path, resume: bool = False, quiet: bool = False) -> dict | None:
    """Train `config` on `data_dir`, writing config.yaml, train.log, metrics.jsonl, model.pt and last.pt.

    Under torchrun every process calls this: rank 0 writes the run directory and returns the summary, the other
    processes return None (and log warnings only)."""
    world = init_world(config.train.device)
    logger, handler = logging.getLogger("nmtkit"), None
    level, trainer, finished = logger.level, None, False
    try:
        if (out_dir / "last.pt").exists() and not resume:
            raise NmtkitError(f"{out_dir} already holds a run (last.pt); pass --resume or choose another --out")
        if world.is_main:
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise NmtkitError(f"cannot create run directory {out_dir}: {error.strerror}") from error
            handler = _log_to_run_dir(out_dir)
        else:
            logger.setLevel(logging.WARNING)
        trainer = Trainer(config, data_dir, out_dir, quiet, world)
        if resume and (out_dir / "last.pt").exists():
            trainer.resume()
        elif config.train.init_from:
            trainer.initialize_from(config.train.init_from)
        trainer.settle_precision()
        if world.is_main:
            save_yaml(config, out_dir / "config.yaml")
        log.info("model %s: %d parameters on %s (%d process(es), %d threads, %s); validation BLEU tokenizer %s",
                 config.model.name, sum(p.numel() for p in trainer.model.parameters()), trainer.device, world.size,
                 trainer.threads, trainer.precision_name, trainer.bleu_tokenizer)
        summary = trainer.run()
        finished = True
        return summary if world.is_main else None
    finally:
        if trainer is not None and trainer.run_log is not None:
            trainer.run_log.close()
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)
            handler.close()
        del trainer  # DDP and its pending work go before the process group they use
        leave_world(world, wait_for_all=finished)
