"""Teacher-forced token log-probabilities of given translations (`nmtkit.decoding.confidence` sums them up): the
model reads each source and its translation in one forward pass, batched by length, and gives log p(y_t | y_<t, x)
of each target token and of the EOS that ends it."""

from __future__ import annotations

import torch

from nmtkit.data.batching import token_batches
from nmtkit.data.dataset import encode_sources, pad_sequences
from nmtkit.data.subword import BOS, EOS
from nmtkit.models.base import EncoderDecoder


@torch.inference_mode()
def forced_log_probs(model: EncoderDecoder, sources: list[list[int]], targets: list[list[int]],
                     device: torch.device) -> list[list[float]]:
    """log p of each target token and of its EOS (len(target) + 1 values) for one batch of (source, target) ids,
    computed in float32 whatever the model's dtype."""
    src, src_mask = encode_sources(sources)
    tgt_in = pad_sequences(list(targets), [BOS], [])  # (B, T + 1)
    tgt_out = pad_sequences(list(targets), [], [EOS]).to(device)  # (B, T + 1)
    logits, _ = model(src.to(device), src_mask.to(device), tgt_in.to(device))  # (B, T + 1, V)
    log_probs = torch.log_softmax(logits.float(), dim=-1).gather(2, tgt_out.unsqueeze(2)).squeeze(2)  # (B, T + 1)
    return [row[: len(target) + 1] for row, target in zip(log_probs.cpu().tolist(), targets)]


CPU_BATCH_TOKENS = 1000  # (B, T, V) log-probabilities of at most this many positions at once on a CPU


def token_log_probs(model: EncoderDecoder, sources: list[list[int]], targets: list[list[int]],
                    device: torch.device, batch_tokens: int) -> list[list[float]]:
    """`forced_log_probs` of every pair, in input order, in batches of at most `batch_tokens` tokens of the longer
    side (padding included); on a CPU at most CPU_BATCH_TOKENS, measured faster than larger batches
    (docs/benchmarks.md, sentence confidence)."""
    if device.type == "cpu":
        batch_tokens = min(batch_tokens, CPU_BATCH_TOKENS)
    longer = [max(len(source), len(target)) + 1 for source, target in zip(sources, targets)]
    found: list[list[float]] = [[] for _ in sources]
    for batch in token_batches(longer, longer, batch_tokens):
        rows = [int(row) for row in batch]
        scored = forced_log_probs(model, [sources[row] for row in rows], [targets[row] for row in rows], device)
        for row, values in zip(rows, scored):
            found[row] = values
    return found
