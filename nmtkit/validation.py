"""Validation during training: the dev set's loss, and the greedy translations' BLEU and chrF."""

from __future__ import annotations

from pathlib import Path

import sacrebleu
import torch

from nmtkit.checkpoint import LoadedModel
from nmtkit.config import DecodeConfig
from nmtkit.data.corpus import read_lines
from nmtkit.data.dataset import ParallelData
from nmtkit.objectives import label_smoothed_nll
from nmtkit.translate import Translator


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


def dev_scores(loaded: LoadedModel, dev: ParallelData, data_dir: Path, device: torch.device, tokenizer: str,
               max_sentences: int = 0) -> tuple[float, float]:
    """Greedy BLEU and chrF of the dev pairs that `dev_loss` scores (the first `max_sentences`, 0 = all), BLEU with
    sacrebleu's `tokenizer` for the target language (`default_tokenizer`: 13a would make a Chinese or Thai
    sentence one or two "words")."""
    loaded.model.eval()
    kept = dev.kept[: max_sentences or None]
    sources, references = ([lines[index] for index in kept] for lines in
                           (read_lines(data_dir / f"dev.{side}.txt") for side in ("src", "tgt")))
    decode = DecodeConfig(beam=1, batch_tokens=loaded.config.decode.batch_tokens)
    hypotheses = Translator(loaded, decode, device).translate(sources)
    return (sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenizer).score,
            sacrebleu.corpus_chrf(hypotheses, [references]).score)
