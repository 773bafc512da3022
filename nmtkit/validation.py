"""Validation during training: the dev set's loss, and the greedy translations' BLEU and chrF."""

from __future__ import annotations

from pathlib import Path

import sacrebleu
import torch

from nmtkit.checkpoint import LoadedModel
from nmtkit.config import DecodeConfig
from nmtkit.data.corpus import read_lines
from nmtkit.data.dataset import ParallelData
from nmtkit.inputs import Request
from nmtkit.metrics.tokenize import default_tokenizer
from nmtkit.objectives import label_smoothed_nll
from nmtkit.translate import Translator
from nmtkit.translate.torch_engine import TorchEngine


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
                           (read_lines(data_dir / f"dev.{side}.txt") for side in ("src", "tgt")))
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
