"""Decoding for every model through `encode` / `init_state` / `step`: greedy search and batched beam search.

Beam search keeps all sentences and beams of a batch in one tensor of B*K rows. Finished sentences leave the
batch, and Memory/State are reordered generically with `index_select` on their batch dimension.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from nmtkit.data.subword import BOS, EOS
from nmtkit.models.base import EncoderDecoder


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-normalised log-probability used for ranking
    log_prob: float = 0.0  # total log-probability including EOS
    attention: list[list[float]] = field(default_factory=list)


def select_rows(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    """Reorder (or shrink) batch-first tensors along the batch dimension."""
    return {name: value.index_select(0, index) for name, value in tensors.items()}


def repeat_rows(tensors: dict[str, Tensor], times: int) -> dict[str, Tensor]:
    """Repeat each batch row `times` times in place: rows b*times ... b*times+times-1 belong to sentence b."""
    return {name: value.repeat_interleave(times, dim=0) for name, value in tensors.items()}


def normalize_score(log_prob: float, length: int, length_penalty: str) -> float:
    """`none`: the log-probability; `average`: log-probability / length (length counts the EOS)."""
    return log_prob / length if length_penalty == "average" else log_prob


def max_lengths(src_mask: Tensor, a: float, b: int, limit: int = 1024) -> Tensor:
    """Per-sentence output limit a * |src| + b (EOS included), at least 1 and at most `limit`."""
    return (src_mask.sum(dim=1).float() * a + b).long().clamp(1, limit)


@torch.inference_mode()
def greedy_search(model: EncoderDecoder, src: Tensor, src_mask: Tensor, max_len: Tensor) -> list[Hypothesis]:
    """Pick the most probable token at each step; a sentence stops at EOS or at its length limit."""
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    rows = torch.arange(src.size(0), device=src.device)  # sentence index of each live row
    prev = torch.full_like(rows, BOS)
    tokens: list[list[int]] = [[] for _ in range(src.size(0))]
    log_probs_total = [0.0] * src.size(0)
    for step in range(int(max_len.max())):
        log_probs, state, _ = model.step(prev, state, memory)
        prev = log_probs.argmax(dim=-1)
        prev = torch.where(step + 1 >= max_len[rows], torch.full_like(prev, EOS), prev)
        best = log_probs.gather(1, prev.unsqueeze(1)).squeeze(1)
        for row, token, score in zip(rows.tolist(), prev.tolist(), best.tolist()):
            tokens[row].append(token)
            log_probs_total[row] += score
        live = (prev != EOS).nonzero().squeeze(1)
        if live.numel() == 0:
            break
        if live.numel() < rows.numel():
            rows, prev = rows[live], prev[live]
            state, memory = select_rows(state, live), select_rows(memory, live)
    return [Hypothesis(seq[:-1] if seq and seq[-1] == EOS else seq, total, total)
            for seq, total in zip(tokens, log_probs_total)]


@dataclass
class _Beams:
    """The live part of a batched beam search: n sentences times K beams."""

    sentences: Tensor  # (n,) index of each live sentence in the batch
    scores: Tensor  # (n, K) cumulative log-probabilities
    tokens: Tensor  # (n*K, t) tokens so far, BOS first


def _finalize(beams: _Beams, top_scores: Tensor, top_ids: Tensor, vocab: int, step: int,
              finished: list[list[Hypothesis]], length_penalty: str) -> None:
    """Move the EOS candidates ranked within the top K into the finished lists."""
    beam_size = beams.scores.size(1)
    is_eos = (top_ids % vocab == EOS)[:, :beam_size] & torch.isfinite(top_scores[:, :beam_size])
    for row, col in is_eos.nonzero().tolist():
        sentence = int(beams.sentences[row])
        if len(finished[sentence]) >= beam_size:
            continue
        beam = int(top_ids[row, col]) // vocab  # beam index within the sentence
        log_prob = float(top_scores[row, col])
        tokens = beams.tokens[row * beam_size + beam, 1:].tolist()
        finished[sentence].append(Hypothesis(tokens, normalize_score(log_prob, step + 1, length_penalty), log_prob))


@torch.inference_mode()
def beam_search(model: EncoderDecoder, src: Tensor, src_mask: Tensor, max_len: Tensor, beam_size: int,
                length_penalty: str = "average") -> list[list[Hypothesis]]:
    """Batched beam search; returns up to `beam_size` hypotheses per sentence, best first.

    At each step the 2K best continuations of each sentence are ranked; EOS candidates within the top K
    finish, the K best others continue. A sentence is done once it has K finished hypotheses; at its length
    limit only EOS is allowed, so every sentence finishes.
    """
    batch, device = src.size(0), src.device
    memory = repeat_rows(model.encode(src, src_mask), beam_size)
    state = model.init_state(memory)
    scores = torch.full((batch, beam_size), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one
    beams = _Beams(torch.arange(batch, device=device), scores,
                   torch.full((batch * beam_size, 1), BOS, dtype=torch.long, device=device))
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for step in range(int(max_len.max())):
        log_probs, state, _ = model.step(beams.tokens[:, -1], state, memory)  # (n*K, V)
        vocab = log_probs.size(-1)
        candidates = beams.scores.unsqueeze(2) + log_probs.view(-1, beam_size, vocab)  # (n, K, V)
        at_limit = step + 1 >= max_len[beams.sentences]
        candidates[at_limit, :, :EOS] = float("-inf")
        candidates[at_limit, :, EOS + 1 :] = float("-inf")
        top_scores, top_ids = candidates.view(-1, beam_size * vocab).topk(2 * beam_size, dim=1)
        _finalize(beams, top_scores, top_ids, vocab, step, finished, length_penalty)
        top_scores = top_scores.masked_fill(top_ids % vocab == EOS, float("-inf"))
        next_scores, order = top_scores.topk(beam_size, dim=1)  # (n, K)
        next_ids = top_ids.gather(1, order)
        done = torch.tensor([len(finished[s]) >= beam_size for s in beams.sentences.tolist()], device=device)
        if bool(done.all()):
            break
        keep = (~done).nonzero().squeeze(1)
        source_rows = (keep.unsqueeze(1) * beam_size + next_ids[keep] // vocab).view(-1)  # (n'*K,)
        beams = _Beams(beams.sentences[keep], next_scores[keep],
                       torch.cat([beams.tokens[source_rows], (next_ids[keep] % vocab).view(-1, 1)], dim=1))
        state = select_rows(state, source_rows)
        if keep.numel() < done.numel():
            kept_rows = keep.unsqueeze(1) * beam_size + torch.arange(beam_size, device=device)  # (n', K)
            memory = select_rows(memory, kept_rows.view(-1))
    return [sorted(hyps, key=lambda hyp: hyp.score, reverse=True) for hyps in finished]
