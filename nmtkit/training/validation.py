"""Validation during training: the dev set's loss, and the greedy translations' BLEU and chrF; the best model so far
(model.pt), patience, and the checkpoints kept for averaging."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import sacrebleu
import torch

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.config.sections import DecodeConfig
from nmtkit.data.corpus import read_lines
from nmtkit.data.dataset import ParallelData
from nmtkit.decoding.inputs import Request
from nmtkit.metrics.tokenize import default_tokenizer
from nmtkit.training.ema import WeightAverage
from nmtkit.training.objectives import label_smoothed_nll
from nmtkit.training.setup import RunSetup
from nmtkit.training.state import Checkpoints, Progress
from nmtkit.translate import Translator
from nmtkit.translate.torch_engine import TorchEngine

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split


@torch.inference_mode()
def dev_loss(model: torch.nn.Module, dev: ParallelData, batch_tokens: int, device: torch.device) -> float:
    """The dev pairs' NLL per target token (the pairs training keeps, see `ParallelData.kept`)."""
    model.eval()
    loss_total = tokens = 0.0
    for indices in dev.epoch_batches(batch_tokens, 0, 0):
        batch = dev.batch(indices).to(device)
        logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)
        _, nll = label_smoothed_nll(logits, batch.tgt_out, 0.0)
        loss_total, tokens = loss_total + nll.item(), tokens + batch.num_tgt_tokens
    return loss_total / max(tokens, 1)


def dev_scores(loaded: LoadedModel, dev: ParallelData, data_dir: Path, device: torch.device,
               pairs: list[tuple[str, str]] = (), max_sentences: int = 0) -> tuple[float, float]:
    """Greedy BLEU and chrF of the dev pairs that `dev_loss` scores (the first `max_sentences`, 0 = all), BLEU with
    sacrebleu's tokenizer for the target language (`default_tokenizer`: 13a would make a Chinese or Thai sentence
    one or two "words"). With several language `pairs` (multilingual data), each pair is translated into its target
    language and scored alone; the scores are the means over the pairs."""
    loaded.model.eval()
    kept = dev.kept[: max_sentences or None]
    sources, references = ([lines[index] for index in kept] for lines in
                           (read_lines(data_dir / f"dev.{side}.txt", None) for side in ("src", "tgt")))
    translator = Translator(TorchEngine(loaded, DecodeConfig(beam=1, batch_tokens=loaded.config.decode.batch_tokens),
                                        device))
    groups = [(loaded.langs[1], list(range(len(kept))))] if dev.corpus is None else \
        [(tgt, [row for row, index in enumerate(kept) if dev.corpus[index] == pair])
         for pair, (_, tgt) in enumerate(pairs)]
    scores = [_scores(translator, [sources[row] for row in rows], [references[row] for row in rows], tgt)
              for tgt, rows in groups if rows]
    return tuple(sum(score[metric] for score in scores) / max(len(scores), 1) for metric in (0, 1))


def _scores(translator: Translator, sources: list[str], references: list[str], lang: str | None) -> tuple[float, float]:
    requests = [Request(source, tgt_lang=lang or "") for source in sources] if translator.loaded.tags else \
        [Request(source) for source in sources]
    hypotheses = [hyps[0][0] for hyps in translator.translate_requests(requests)]
    return (sacrebleu.corpus_bleu(hypotheses, [references], tokenize=default_tokenizer(lang)).score,
            sacrebleu.corpus_chrf(hypotheses, [references]).score)


def validation_score(record: dict, best_metric: str, step: int) -> float:
    """What a validation record scores, higher is better: its BLEU (best_metric bleu, when computed), else minus its
    dev loss; without a dev set, the step (the newest model is the best one)."""
    if best_metric == "bleu" and "valid_bleu" in record:
        return record["valid_bleu"]
    if "valid_nll" in record:
        return -record["valid_nll"]
    return float(step)


class Validator:
    """Validates the model (rank 0), keeps the best one as model.pt and counts the validations without
    improvement (patience)."""

    def __init__(self, setup: RunSetup, progress: Progress, checkpoints: Checkpoints,
                 write_metrics: Callable[[dict], None], average: WeightAverage | None = None):
        self.setup, self.progress, self.checkpoints, self.write_metrics = setup, progress, checkpoints, write_metrics
        self.average = average
        self.last_validated = 0

    def dev_scores(self) -> tuple[float, float]:
        setup = self.setup
        loaded = LoadedModel(setup.config, setup.model.eval(), *setup.subwords, setup.langs, setup.tags,
                             setup.placeholders)
        return dev_scores(loaded, setup.dev_data, setup.data_dir, setup.device, setup.pairs,
                          setup.config.train.valid_max_sentences)

    def validate(self) -> bool:
        """Validate (rank 0), save model.pt when best and last.pt; on every process, True when patience ran out."""
        self.last_validated = self.progress.step
        if self.setup.world.is_main:
            with self.average.swapped_in() if self.average is not None else nullcontext():
                self._validate_and_keep_best()  # the average (train.ema) is validated and kept as model.pt
        self.checkpoints.save_last()
        patience = self.setup.config.train.patience
        return self.setup.world.main_decides(patience > 0 and self.progress.bad_validations >= patience)

    def _validate_and_keep_best(self) -> None:
        started, train = time.monotonic(), self.setup.config.train
        record = {"step": self.progress.step, "epoch": self.progress.epoch, **self._dev_record()}
        improved = self.track_best(validation_score(record, train.best_metric, self.progress.step))
        record["best"] = self.progress.best
        record["valid_seconds"] = round(time.monotonic() - started, 1)
        self.write_metrics(record)
        log.info("validation %s", record)
        if improved:
            self.checkpoints.save("model.pt")
        if train.keep_checkpoints > 0:
            self.checkpoints.keep(train.keep_checkpoints)

    def _dev_record(self) -> dict:
        """The dev set's loss and perplexity, and its BLEU and chrF with train.valid_bleu; nothing without one."""
        setup, record = self.setup, {}
        if setup.dev_data is not None:
            record["valid_nll"] = round(dev_loss(setup.model, setup.dev_data, setup.config.train.batch_tokens,
                                                 setup.device), 4)
            record["valid_ppl"] = round(math.exp(min(record["valid_nll"], 50)), 2)
            if setup.config.train.valid_bleu:
                record["valid_bleu"], record["valid_chrf"] = (round(score, 2) for score in self.dev_scores())
        return record

    def track_best(self, score: float) -> bool:
        """True when `score` beats the best so far (which it becomes); otherwise one more bad validation."""
        if self.progress.best is None or score > self.progress.best:
            self.progress.best, self.progress.bad_validations = score, 0
            return True
        self.progress.bad_validations += 1
        return False
