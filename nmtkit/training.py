"""The training loop: label-smoothed cross-entropy, Adam with inverse square-root warmup, token-budget batches,
gradient clipping and accumulation, periodic validation (loss and greedy BLEU), best/last checkpoints written
atomically, exact resume, time/step/epoch budgets and early stopping.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from nmtkit.checkpoint import LoadedModel, load_checkpoint, make_payload, save_atomic, step_checkpoints
from nmtkit.config import Config, DecodeConfig, save_yaml
from nmtkit.data.corpus import read_lines
from nmtkit.data.dataset import Batch, ParallelData
from nmtkit.data.prepare import load_subwords, read_manifest
from nmtkit.data.subword import PAD
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model
from nmtkit.runtime import pick_device, set_threads, use_bf16
from nmtkit.translate import Translator

log = logging.getLogger(__name__)


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL (no gradient) over non-PAD targets.

    The smoothed target puts 1 - epsilon on the reference and spreads epsilon uniformly over the whole
    vocabulary (Szegedy et al. 2016, Section 7), which is what `F.cross_entropy(label_smoothing=...)` computes
    with a fused backward pass.
    """
    logits, target = logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1)
    loss = F.cross_entropy(logits, target, ignore_index=PAD, label_smoothing=epsilon, reduction="sum")
    if epsilon == 0.0:
        return loss, loss.detach()
    with torch.no_grad():
        nll = F.cross_entropy(logits, target, ignore_index=PAD, reduction="sum")
    return loss, nll


def scheduled_sampling_log_probs(model, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                                 probability: float) -> Tensor:
    """Log-probs (B, T, V) of a decoder unrolled with `step`, where each input after BOS is, with `probability`,
    a token sampled from the model's own previous distribution instead of the reference (Bengio et al. 2015,
    Section 2.4). Works for every model through the one step interface; padding inputs stay padding."""
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    prev, outputs = tgt_in[:, 0], []
    for t in range(tgt_in.size(1)):
        log_probs, state, _ = model.step(prev, state, memory)  # (B, V)
        outputs.append(log_probs)
        if t + 1 < tgt_in.size(1):
            gold = tgt_in[:, t + 1]
            sampled = torch.multinomial(log_probs.detach().exp(), 1).squeeze(1)
            use_model = (torch.rand(gold.shape, device=gold.device) < probability) & (gold != PAD)
            prev = torch.where(use_model, sampled, gold)
    return torch.stack(outputs, dim=1)


def inverse_sqrt(warmup: int):
    """lr factor: linear warmup to 1 over `warmup` steps, then sqrt(warmup / step) (Vaswani et al. 2017, Eq. 3)."""

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup, math.sqrt(warmup / step)) if warmup > 0 else 1.0 / math.sqrt(step)

    return factor


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


class Trainer:
    """Holds the model, data and optimisation state of one run directory."""

    def __init__(self, config: Config, data_dir: Path, out_dir: Path, quiet: bool = False):
        self.config, self.data_dir, self.out_dir, self.quiet = config, data_dir, out_dir, quiet
        if not 0.0 <= config.train.scheduled_sampling <= 1.0:
            raise NmtkitError(f"train.scheduled_sampling must be a probability, got {config.train.scheduled_sampling}")
        self.device = pick_device(config.train.device)
        self.threads = set_threads(config.train.threads)
        self.bf16 = use_bf16(config.train.amp, self.device)
        torch.manual_seed(config.train.seed)
        manifest = read_manifest(data_dir)
        self.subwords = load_subwords(data_dir)
        self.train_data = ParallelData(data_dir, "train")
        self.has_dev = "dev" in manifest["splits"]
        self.dev_data = ParallelData(data_dir, "dev") if self.has_dev else None
        shared = self.subwords[0] is self.subwords[1]
        self.model = build_model(config.model, self.subwords[0].vocab_size, self.subwords[1].vocab_size, shared)
        self.model.to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.train.lr, betas=(config.train.adam_beta1, config.train.adam_beta2),
            eps=config.train.adam_eps, weight_decay=config.train.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, inverse_sqrt(config.train.warmup))
        self.progress = Progress()

    # ---------------------------------------------------------------- checkpoints
    def train_state(self) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "progress": vars(self.progress), "torch_rng": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return state

    def save(self, name: str, with_train_state: bool) -> None:
        state = self.train_state() if with_train_state else None
        save_atomic(make_payload(self.config, self.model, self.subwords, state), self.out_dir / name)

    def resume(self) -> None:
        payload = load_checkpoint(self.out_dir / "last.pt")
        if payload.get("train_state") is None:
            raise NmtkitError(f"{self.out_dir / 'last.pt'} holds no training state; cannot resume from it")
        self.model.load_state_dict(payload["model"])
        state = payload["train_state"]
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        known = {field.name for field in dataclasses.fields(Progress)}
        self.progress = Progress(**{key: value for key, value in state["progress"].items() if key in known})
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        log.info("resumed from step %d (epoch %d, batch %d)", self.progress.step, self.progress.epoch,
                 self.progress.batch_in_epoch)

    # ---------------------------------------------------------------- one update
    def sampling_probability(self) -> float:
        train = self.config.train
        ramp = min(1.0, self.progress.step / train.sampling_ramp) if train.sampling_ramp > 0 else 1.0
        return train.scheduled_sampling * ramp

    def _loss(self, batch: Batch) -> tuple[Tensor, Tensor]:
        probability = self.sampling_probability()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            if probability > 0:  # log-probs are valid logits: log_softmax leaves them unchanged
                logits = scheduled_sampling_log_probs(self.model, batch.src, batch.src_mask, batch.tgt_in,
                                                      probability)
            else:
                logits, _ = self.model(batch.src, batch.src_mask, batch.tgt_in)
        return label_smoothed_nll(logits, batch.tgt_out, self.config.train.label_smoothing)

    def update(self, batches: list[Batch]) -> dict:
        """One optimizer step over `batches` (gradient accumulation), normalised by their target tokens."""
        self.model.train()
        tokens = sum(batch.num_tgt_tokens for batch in batches)
        loss_total = nll_total = 0.0
        for batch in batches:
            loss, nll = self._loss(batch.to(self.device))
            (loss / tokens).backward()
            loss_total, nll_total = loss_total + loss.item(), nll_total + nll.item()
        if self.config.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.train.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return {"loss": loss_total / tokens, "nll": nll_total / tokens, "tokens": tokens}

    # ---------------------------------------------------------------- validation
    @torch.inference_mode()
    def dev_loss(self) -> float:
        self.model.eval()
        loss_total = tokens = 0.0
        for indices in self.dev_data.epoch_batches(self.config.train.batch_tokens, 0, 0):
            batch = self.dev_data.batch(indices).to(self.device)
            logits, _ = self.model(batch.src, batch.src_mask, batch.tgt_in)
            _, nll = label_smoothed_nll(logits, batch.tgt_out, 0.0)
            loss_total, tokens = loss_total + nll.item(), tokens + batch.num_tgt_tokens
        return loss_total / max(tokens, 1)

    def dev_bleu(self) -> float:
        limit = self.config.train.valid_max_sentences or None
        sources = read_lines(self.data_dir / "dev.src.txt")[:limit]
        references = read_lines(self.data_dir / "dev.tgt.txt")[:limit]
        loaded = LoadedModel(self.config, self.model.eval(), *self.subwords)
        decode = DecodeConfig(beam=1, batch_tokens=self.config.decode.batch_tokens)
        hypotheses = Translator(loaded, decode, self.device).translate(sources)
        return sacrebleu.corpus_bleu(hypotheses, [references]).score

    def validate(self) -> bool:
        """Validate, save last.pt (and model.pt when best); returns True when patience has run out."""
        started = time.monotonic()
        record = {"step": self.progress.step, "epoch": self.progress.epoch}
        if self.has_dev:
            record["valid_nll"] = round(self.dev_loss(), 4)
            record["valid_ppl"] = round(math.exp(min(record["valid_nll"], 50)), 2)
            if self.config.train.valid_bleu:
                record["valid_bleu"] = round(self.dev_bleu(), 2)
        improved = self._track_best(record)
        record["best"] = self.progress.best
        record["valid_seconds"] = round(time.monotonic() - started, 1)
        self.write_metrics(record)
        log.info("validation %s", record)
        if improved:
            self.save("model.pt", with_train_state=False)
        if self.config.train.keep_checkpoints > 0:
            self.save(f"checkpoint_{self.progress.step}.pt", with_train_state=False)
            for old in step_checkpoints(self.out_dir)[: -self.config.train.keep_checkpoints]:
                old.unlink()
        self.save("last.pt", with_train_state=True)
        patience = self.config.train.patience
        return patience > 0 and self.progress.bad_validations >= patience

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
        with open(self.out_dir / "metrics.jsonl", "a", encoding="utf-8") as stream:
            stream.write(json.dumps(record) + "\n")

    # ---------------------------------------------------------------- the loop
    def budget_left(self) -> bool:
        train, progress = self.config.train, self.progress
        if train.max_steps and progress.step >= train.max_steps:
            return False
        if train.max_time and progress.elapsed >= train.max_time:
            return False
        return not (train.max_epochs and progress.epoch >= train.max_epochs)

    def next_update(self):
        """Yield lists of `update_freq` batches, continuing exactly where the progress says."""
        train, progress = self.config.train, self.progress
        while True:
            batches = self.train_data.epoch_batches(train.batch_tokens, train.seed, progress.epoch)
            while progress.batch_in_epoch < len(batches):
                start = progress.batch_in_epoch
                chunk = batches[start : start + train.update_freq]
                progress.batch_in_epoch += len(chunk)
                yield [self.train_data.batch(indices) for indices in chunk]
            progress.epoch, progress.batch_in_epoch = progress.epoch + 1, 0
            if train.max_epochs and progress.epoch >= train.max_epochs:
                return

    def log_training(self, window: dict) -> None:
        train_seconds = max(window["seconds"], 1e-9)
        record = {"step": self.progress.step, "epoch": self.progress.epoch,
                  "train_loss": round(window["loss"] / window["updates"], 4),
                  "train_nll": round(window["nll"] / window["updates"], 4),
                  "lr": self.scheduler.get_last_lr()[0],
                  "tgt_tokens": window["tokens"], "tgt_tokens_per_s": round(window["tokens"] / train_seconds, 1),
                  "elapsed": round(self.progress.elapsed, 1)}
        self.write_metrics(record)
        log.info("train %s", record)

    def _train_one(self, batches: list[Batch], window: dict) -> dict:
        started = time.monotonic()
        stats = self.update(batches)
        seconds = time.monotonic() - started
        self.progress.step += 1
        self.progress.tgt_tokens += stats["tokens"]
        self.progress.train_seconds += seconds
        for key, value in (("loss", stats["loss"]), ("nll", stats["nll"]), ("tokens", stats["tokens"]),
                           ("updates", 1), ("seconds", seconds)):
            window[key] += value
        return stats

    def run(self) -> dict:
        """Train until a budget is spent or patience runs out; validates at the end too."""
        train = self.config.train
        bar = tqdm(total=train.max_steps or None, initial=self.progress.step, unit="step",
                   disable=self.quiet or not sys.stderr.isatty(), file=sys.stderr, dynamic_ncols=True)
        window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "updates": 0, "seconds": 0.0}
        stopped_early, last_validated, updates = False, self.progress.step, self.next_update()
        clock = time.monotonic()
        try:
            while self.budget_left() and (batches := next(updates, None)) is not None:
                stats = self._train_one(batches, window)
                self.progress.elapsed, clock = self.progress.elapsed + time.monotonic() - clock, time.monotonic()
                bar.update(1)
                bar.set_postfix(loss=f"{stats['loss']:.3f}", refresh=False)
                if self.progress.step % train.log_every == 0:
                    self.log_training(window)
                    window = dict.fromkeys(window, 0)
                if self.progress.step % train.valid_every == 0:
                    last_validated, stopped_early = self.progress.step, self.validate()
                    self.progress.elapsed, clock = self.progress.elapsed + time.monotonic() - clock, time.monotonic()
                if stopped_early:
                    log.info("no improvement in %d validations: stopping", train.patience)
                    break
        except KeyboardInterrupt:
            log.warning("interrupted at step %d: saving last.pt", self.progress.step)
            self.save("last.pt", with_train_state=True)
            raise
        finally:
            bar.close()
        if self.progress.step != last_validated or not (self.out_dir / "model.pt").exists():
            self.validate()
        return self.summary(stopped_early)

    def summary(self, stopped_early: bool) -> dict:
        progress = self.progress
        return {"steps": progress.step, "epochs": progress.epoch, "elapsed_seconds": round(progress.elapsed, 1),
                "tgt_tokens_per_s": round(progress.tgt_tokens / max(progress.train_seconds, 1e-9), 1),
                "best": progress.best, "best_metric": self.config.train.best_metric,
                "stopped_early": stopped_early, "device": str(self.device), "threads": self.threads,
                "precision": "bf16 autocast" if self.bf16 else "float32",
                "parameters": sum(p.numel() for p in self.model.parameters())}


def train(config: Config, data_dir: Path, out_dir: Path, resume: bool = False, quiet: bool = False) -> dict:
    """Train `config` on `data_dir`, writing config.yaml, train.log, metrics.jsonl, model.pt and last.pt."""
    has_last = (out_dir / "last.pt").exists()
    if has_last and not resume:
        raise NmtkitError(f"{out_dir} already holds a run (last.pt); pass --resume or choose another --out")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise NmtkitError(f"cannot create run directory {out_dir}: {error.strerror}") from error
    handler = logging.FileHandler(out_dir / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("nmtkit").addHandler(handler)
    try:
        trainer = Trainer(config, data_dir, out_dir, quiet)
        if resume and has_last:
            trainer.resume()
        save_yaml(config, out_dir / "config.yaml")
        log.info("model %s: %d parameters on %s (%d threads, %s)", config.model.name,
                 sum(p.numel() for p in trainer.model.parameters()), trainer.device, trainer.threads,
                 "bf16 autocast" if trainer.bf16 else "float32")
        return trainer.run()
    finally:
        logging.getLogger("nmtkit").removeHandler(handler)
        handler.close()
