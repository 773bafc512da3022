"""Decoding for every model through `encode` / `init_state` / `step`: greedy search and batched beam search.

Beam search keeps all sentences and beams of a batch in one tensor of B*K rows. Finished sentences leave the
batch, and Memory/State are reordered generically with `index_select` on their batch dimension (Memory tensors
that a model keeps at one row per sentence, see `EncoderDecoder.beam_memory`, by sentence). What a search may write
is restricted by `Restrictions` (`nmtkit.decoding.restriction`), composed by `restrictions_for` without the search
knowing which: lexical and prefix constraints (the same search then ranks its candidates by dynamic beam allocation,
`nmtkit.decoding.constraint_tracker`), the `SymbolGuard` (`nmtkit.decoding.placeholder_guard`) that makes every
search, greedy and sampling included, write each masked placeholder of a source exactly once and no other, and the
restrictions lines ask for by a registered request field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from nmtkit.data.subword import BOS, EOS
from nmtkit.decoding.constraint_tracker import Choice, ConstraintTracker
from nmtkit.decoding.constraints import Constraints, WordEnds
from nmtkit.decoding.hypotheses import Hypothesis, LengthPenalty, length_limits
from nmtkit.decoding.placeholder_guard import SymbolGuard
from nmtkit.decoding.restriction import Restrictions, requested
from nmtkit.models.base import EncoderDecoder


def select_rows(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    """Reorder (or shrink) batch-first tensors along the batch dimension."""
    return {name: value.index_select(0, index) for name, value in tensors.items()}


def repeat_rows(tensors: dict[str, Tensor], times: int) -> dict[str, Tensor]:
    """Repeat each batch row `times` times in place: rows b*times ... b*times+times-1 belong to sentence b."""
    return {name: value.repeat_interleave(times, dim=0) for name, value in tensors.items()}


def keep_sentences(memory: dict[str, Tensor], live: int, kept: Tensor, beam_size: int) -> dict[str, Tensor]:
    """Shrink the memory of `live` sentences to the `kept` ones (indices among them): a tensor of live * beam_size
    rows holds each sentence's beams, one of `live` rows is shared by them (`EncoderDecoder.beam_memory`)."""
    beam_rows = (kept.unsqueeze(1) * beam_size + torch.arange(beam_size, device=kept.device)).view(-1)
    return {name: value.index_select(0, kept if value.size(0) == live else beam_rows)
            for name, value in memory.items()}


def coverage_penalty(coverage: Tensor, src_mask: Tensor, weight: float) -> Tensor:
    """cp(X; Y) = weight * sum_i log(min(sum_j p_ij, 1)) over the real source positions i (Wu et al. 2016, Eq. 14).

    coverage (R, S) holds each row's attention summed over its target steps; a source position that got no
    attention at all is floored at 1e-10 so the penalty stays finite. Returns (R,)."""
    covered = coverage.clamp(min=1e-10, max=1.0).log()
    return weight * covered.masked_fill(~src_mask, 0.0).sum(-1)


def max_lengths(src_mask: Tensor, a: float, b: int, limit: int = 1024) -> Tensor:
    """`length_limits` of a batch, on its device."""
    return torch.tensor(length_limits(src_mask.sum(dim=1).tolist(), a, b, limit), device=src_mask.device)


def argmax_choice(log_probs: Tensor) -> Tensor:
    return log_probs.argmax(dim=-1)


@dataclass(frozen=True)
class Sampler:
    """Draw the next token from softmax(log_probs / temperature), restricted to the `top_k` most probable tokens,
    to the smallest set whose probability reaches `top_p` (nucleus sampling, Holtzman et al. 2020) and to the tokens
    the model gives a probability of at least `epsilon` (epsilon sampling, Hewitt et al. 2022)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    generator: torch.Generator | None = None
    epsilon: float = 0.0

    def __call__(self, log_probs: Tensor) -> Tensor:
        if self.epsilon > 0:  # of the model's own probabilities, before the temperature; the best token stays
            log_probs = log_probs.masked_fill(
                (log_probs < math.log(self.epsilon)) & (log_probs < log_probs.max(dim=-1, keepdim=True).values),
                float("-inf"))
        probs = torch.softmax(filter_log_probs(log_probs / self.temperature, self.top_k, self.top_p), dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)


def filter_log_probs(log_probs: Tensor, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """(B, V) -> the same with -inf outside the top-k tokens and outside the top-p nucleus; the best token stays."""
    if top_k > 0:
        kth_best = log_probs.topk(min(top_k, log_probs.size(-1)), dim=-1).values[:, -1:]
        log_probs = log_probs.masked_fill(log_probs < kth_best, float("-inf"))
    if top_p < 1.0:
        sorted_log_probs, order = log_probs.sort(dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_log_probs, dim=-1)
        sorted_outside = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p  # the better tokens already reach p
        outside = torch.zeros_like(sorted_outside).scatter(1, order, sorted_outside)
        log_probs = log_probs.masked_fill(outside, float("-inf"))
    return log_probs


def _greedy_allowed(log_probs: Tensor, step: int, min_len: int, restrictions: Restrictions | None, rows: Tensor,
                    states: tuple, steps_left: Tensor) -> Tensor:
    """log_probs (R, V) with -inf for EOS before `min_len` tokens and for what the restrictions rule out."""
    allowed = log_probs.index_fill(1, torch.tensor([EOS], device=log_probs.device), float("-inf")) \
        if step < min_len else log_probs  # EOS now would give fewer than min_len tokens
    if restrictions is not None:  # in place: they change no score of a token they allow, so log_probs still scores
        restrictions.restrict(allowed, rows, states, steps_left)  # the choice
    return allowed


@torch.inference_mode()
def greedy_search(model: EncoderDecoder, src: Tensor, src_mask: Tensor, max_len: Tensor,
                  choose=argmax_choice, min_len: int = 0, check: Callable[[], None] | None = None,
                  guard: SymbolGuard | None = None, restrictions: Restrictions | None = None) -> list[Hypothesis]:
    """Follow one path per sentence, choosing each token with `choose` (argmax: greedy; a `Sampler`: sampling);
    a sentence stops at EOS or at its length limit, and not with EOS before `min_len` tokens (the length limit
    wins over `min_len`). Scores are the model's log-probabilities of the path. `check` is called before each
    step: it stops the search by raising (`nmtkit serve`'s time budget). `restrictions` (none that ranks), or a
    `guard` alone, restrict each step to what their rules allow (the length limits must leave room for the
    placeholder symbols: `SymbolGuard.constraints`, `constrained_limits`)."""
    if restrictions is None and guard is not None:
        restrictions = Restrictions([guard])
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    rows = torch.arange(src.size(0), device=src.device)  # sentence index of each live row
    prev = torch.full_like(rows, BOS)
    states = () if restrictions is None else restrictions.initial_state(src.size(0))
    tokens: list[list[int]] = [[] for _ in range(src.size(0))]
    log_probs_total = [0.0] * src.size(0)
    for step in range(int(max_len.max())):
        if check is not None:
            check()
        log_probs, state, _ = model.step(prev, state, memory)
        allowed = _greedy_allowed(log_probs, step, min_len, restrictions, rows, states, max_len[rows] - 1 - step)
        prev = torch.where(step + 1 >= max_len[rows], torch.full_like(rows, EOS), choose(allowed))
        chosen = log_probs.gather(1, prev.unsqueeze(1)).squeeze(1)
        for row, token, score in zip(rows.tolist(), prev.tolist(), chosen.tolist()):
            tokens[row].append(token)
            log_probs_total[row] += score
        live = (prev != EOS).nonzero().squeeze(1)
        if live.numel() == 0:
            break
        if restrictions is not None:
            states = restrictions.follow(states, live, prev[live], rows[live])
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
    coverage: Tensor | None = None  # (n*K, S) attention summed over the steps so far (coverage penalty only)
    states: tuple = ()  # (n*K) rows' state of each restriction (`Restrictions`)


def top_choice(candidates: Tensor) -> Choice:
    """Rank the 2K best of a sentence's candidates (n, K, V): EOS candidates among the top K finish, the K best
    others go on (ties in the order of the 2K, as constrained search ranks an unconstrained sentence)."""
    beam_size, vocab = candidates.shape[1:]
    top_scores, top_ids = candidates.view(candidates.size(0), -1).topk(2 * beam_size, dim=1)
    is_eos = top_ids % vocab == EOS
    finish_scores = top_scores[:, :beam_size].masked_fill(~is_eos[:, :beam_size], float("-inf"))
    going = top_scores.masked_fill(is_eos, float("-inf"))
    order = going.argsort(dim=1, descending=True, stable=True)[:, :beam_size]
    return Choice(finish_scores, top_ids[:, :beam_size], going.gather(1, order), top_ids.gather(1, order))


def _finalize(beams: _Beams, choice: Choice, vocab: int, step: int, finished: list[list[Hypothesis]],
              length_penalty: LengthPenalty, src_mask: Tensor) -> None:
    """Move the finishing EOS candidates into the finished lists."""
    beam_size = beams.scores.size(1)
    is_eos = torch.isfinite(choice.finish_scores)
    if not bool(is_eos.any()):
        return
    met = None if choice.finish_met is None else choice.finish_met.tolist()
    covered = None
    if beams.coverage is not None:  # src_mask has a row per sentence or one per beam (see keep_sentences)
        src_mask = src_mask.repeat_interleave(beams.coverage.size(0) // src_mask.size(0), dim=0)
        covered = coverage_penalty(beams.coverage, src_mask, length_penalty.coverage)
    for row, col in is_eos.nonzero().tolist():
        sentence = int(beams.sentences[row])
        if len(finished[sentence]) >= beam_size:
            continue
        source_row = row * beam_size + int(choice.finish_ids[row, col]) // vocab
        log_prob = float(choice.finish_scores[row, col])
        score = length_penalty(log_prob, step + 1) + (0.0 if covered is None else float(covered[source_row]))
        finished[sentence].append(Hypothesis(beams.tokens[source_row, 1:].tolist(), score, log_prob,
                                             constraints_met=met is None or met[row][col]))


def _live_ranking(beams: _Beams, next_scores: Tensor, source_rows: Tensor, step: int,
                  length_penalty: LengthPenalty, src_mask: Tensor) -> Tensor:
    """Each sentence's best live beam ranked as a hypothesis that ended at this step would be (its length
    penalty, word penalty and coverage penalty): what a finished hypothesis must beat to be returned. (n,)"""
    ranked = next_scores / length_penalty.divisor(step + 1) - length_penalty.word_penalty * (step + 1)  # (n, K)
    if beams.coverage is not None:
        src_mask = src_mask.repeat_interleave(beams.coverage.size(0) // src_mask.size(0), dim=0)
        covered = coverage_penalty(beams.coverage, src_mask, length_penalty.coverage)  # (n*K,)
        ranked = ranked + covered[source_rows].view_as(ranked)
    return ranked.max(dim=1).values


def _done(sentences: list[int], best_live: list[float], live_ranking: list[float] | None,
          finished: list[list[Hypothesis]], enough: int, beam_size: int, length_penalty: LengthPenalty) -> list[bool]:
    """Whether each sentence's search is over: with K finished hypotheses; when scores can only fall, once its best
    finished hypothesis scores at least the best live beam's log-probability (an upper bound of what that beam can
    reach); with `enough` < K (`live_ranking` given), once its `enough` best finished hypotheses all rank at least as
    high as every live beam does now (as OpenNMT-py stops when its top-ranked candidate is finished), so a
    hypothesis ranked below a live one is never returned."""
    done = []
    for index, (sentence, live) in enumerate(zip(sentences, best_live)):
        scores = sorted((hyp.score for hyp in finished[sentence]), reverse=True)
        beaten = length_penalty.monotone and bool(scores) and scores[0] >= live
        early = live_ranking is not None and len(scores) >= enough and scores[enough - 1] >= live_ranking[index]
        done.append(len(scores) >= beam_size or beaten or early)
    return done


def _add_coverage(coverage: Tensor | None, attention: Tensor | None) -> Tensor:
    if attention is None:
        raise ValueError("the coverage penalty needs a model whose decoder attends to the source")
    return attention.float() if coverage is None else coverage + attention.float()


def _candidates(beams: _Beams, log_probs: Tensor, step: int, max_len: Tensor, min_len: int) -> tuple[Tensor, Tensor]:
    """Each live beam's score plus each next token's log-prob (n, K, V), without EOS before `min_len` tokens and with
    only EOS at a sentence's length limit; and how many tokens each sentence may still write before the EOS that
    ends it at its limit (n,): 0 at the limit."""
    beam_size = beams.scores.size(1)
    candidates = beams.scores.unsqueeze(2) + log_probs.view(-1, beam_size, log_probs.size(-1))  # (n, K, V)
    steps_left = max_len[beams.sentences] - 1 - step
    at_limit = steps_left <= 0
    if step < min_len:  # EOS now would give fewer than min_len tokens
        candidates[~at_limit, :, EOS] = float("-inf")
    if bool(at_limit.any()):
        candidates[at_limit, :, :EOS] = float("-inf")
        candidates[at_limit, :, EOS + 1 :] = float("-inf")
    return candidates, steps_left


@torch.inference_mode()
def beam_search(model: EncoderDecoder, src: Tensor, src_mask: Tensor, max_len: Tensor, beam_size: int,
                length_penalty: LengthPenalty = LengthPenalty(), min_len: int = 0, stop_finished: int = 0,
                constraints: Sequence[Constraints | None] | None = None, word_ends: WordEnds | None = None,
                check: Callable[[], None] | None = None, guard: SymbolGuard | None = None) -> list[list[Hypothesis]]:
    """Batched beam search; returns up to `beam_size` hypotheses per sentence, best first.

    At each step the 2K best continuations of each sentence are ranked; EOS candidates within the top K
    finish, the K best others continue. A sentence is done once it has K finished hypotheses, or no live beam
    can beat its best finished one, or (with `stop_finished` N < K) once its N best finished hypotheses rank above
    every live beam (see `_done`: fewer steps, but a longer hypothesis that would have scored better later is not
    waited for); before `min_len` tokens EOS is not allowed, and at its length limit only EOS is, so every
    sentence finishes.

    `constraints` (one per sentence, None for none) turns on constrained search for those sentences (see
    `nmtkit.decoding.constraint_tracker`): every hypothesis returned for them meets them (positive phrases as whole
    words, given the target vocabulary's `word_ends`). Where none could within the length limit, the sentence is
    searched again without them (but with the `guard`), and its hypotheses say so (`constraints_met` False).

    A `guard` (`nmtkit.decoding.placeholder_guard`) adds each sentence's placeholder symbols to its constraints and bans
    what its rule rules out; with it every hypothesis keeps the symbols (the length limits must leave room for them:
    `SymbolGuard.constraints`, `constrained_limits`).

    `check` is called before each decoding step: it stops the search by raising (`nmtkit serve`'s time budget).
    """
    restrictions = restrictions_for(constraints, guard, src.device, word_ends)
    found = _search(model, src, src_mask, max_len, beam_size, length_penalty, min_len, stop_finished, restrictions,
                    check)
    if restrictions is None or restrictions.ranker is None:
        return found
    found = [[hyp for hyp in hyps if hyp.constraints_met] for hyps in found]
    unmet = [index for index, hyps in enumerate(found) if not hyps]
    if unmet:
        rows = torch.tensor(unmet, device=src.device)
        lines = None if constraints is None else [Constraints(requested=(constraints[index] or Constraints()).requested)
                                                  for index in unmet]  # searched again: all but phrases and prefix
        again = restrictions_for(lines, None if guard is None else guard.take(rows), src.device, word_ends)
        again = _search(model, src[rows], src_mask[rows], max_len[rows], beam_size, length_penalty, min_len,
                        stop_finished, again, check)
        for index, hyps in zip(unmet, again):
            found[index] = [replace(hyp, constraints_met=False) for hyp in hyps]
    return found


def restrictions_for(lines: Sequence[Constraints | None] | None, guard: SymbolGuard | None, device: torch.device,
                     word_ends: WordEnds | None = None) -> Restrictions | None:
    """The restrictions of a search of `lines` (None: no line asks for any) and the placeholder `guard`: the guard,
    the constraint tracker where a line has phrases or a prefix or the guard symbols to keep (its one-token goals),
    and the registered restrictions the lines ask for by request field. None where there is none."""
    parts: list = [] if guard is None else [guard]
    goals = guard.constraints(lines) if guard is not None and guard.active else lines
    if goals is not None and any(line is not None and line.lexical for line in goals):
        parts.append(ConstraintTracker(goals, device, word_ends))
    if lines is not None:
        parts += requested(lines, device)
    return Restrictions(parts) if parts else None


def _search(model: EncoderDecoder, src: Tensor, src_mask: Tensor, max_len: Tensor, beam_size: int,
            length_penalty: LengthPenalty, min_len: int, stop_finished: int,
            restrictions: Restrictions | None = None,
            check: Callable[[], None] | None = None) -> list[list[Hypothesis]]:
    """The search loop of `beam_search`; with `restrictions`, its candidates are restricted by them (and ranked by
    the one that ranks)."""
    enough = min(stop_finished, beam_size) if stop_finished > 0 else beam_size
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    state = repeat_rows(model.init_state(memory), beam_size)
    memory = model.beam_memory(memory, beam_size)
    scores = torch.full((batch, beam_size), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one
    beams = _Beams(torch.arange(batch, device=device), scores,
                   torch.full((batch * beam_size, 1), BOS, dtype=torch.long, device=device),
                   states=() if restrictions is None else restrictions.initial_state(batch * beam_size))
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for step in range(int(max_len.max())):
        if check is not None:
            check()
        log_probs, state, attention = model.step(beams.tokens[:, -1], state, memory)  # (n*K, V)
        if length_penalty.coverage > 0:
            beams.coverage = _add_coverage(beams.coverage, attention)
        vocab = log_probs.size(-1)
        candidates, steps_left = _candidates(beams, log_probs, step, max_len, min_len)
        if restrictions is None:
            choice = top_choice(candidates)
        else:
            restrictions.restrict(candidates.view(-1, vocab), beams.sentences.repeat_interleave(beam_size),
                                  beams.states, steps_left.repeat_interleave(beam_size))
            choice = restrictions.choose(candidates, beams.sentences, beams.states, top_choice)
        _finalize(beams, choice, vocab, step, finished, length_penalty, memory["src_mask"])
        all_rows = (torch.arange(choice.next_ids.size(0), device=device).unsqueeze(1) * beam_size
                    + choice.next_ids // vocab)  # (n, K) the row each continuation extends
        ranking = _live_ranking(beams, choice.next_scores, all_rows.view(-1), step, length_penalty,
                                memory["src_mask"]) if enough < beam_size else None
        done = _done(beams.sentences.tolist(), choice.next_scores.max(dim=1).values.tolist(),
                     None if ranking is None else ranking.tolist(), finished, enough, beam_size, length_penalty)
        done = torch.tensor(done, device=device)
        if bool(done.all()):
            break
        keep = (~done).nonzero().squeeze(1)
        source_rows = all_rows[keep].view(-1)  # (n'*K,)
        beams = _next_beams(beams, choice, keep, source_rows, vocab, restrictions)
        state = select_rows(state, source_rows)
        if keep.numel() < done.numel():
            memory = keep_sentences(memory, done.numel(), keep, beam_size)
    return [sorted(hyps, key=lambda hyp: hyp.score, reverse=True) for hyps in finished]


def _next_beams(beams: _Beams, choice: Choice, keep: Tensor, source_rows: Tensor, vocab: int,
                restrictions: Restrictions | None) -> _Beams:
    """The beams of the `keep` sentences after this step's continuations; source_rows (n'*K,) are the rows they
    extend."""
    beam_size = beams.scores.size(1)
    kept_rows = (keep.unsqueeze(1) * beam_size + torch.arange(beam_size, device=keep.device)).view(-1)
    sentences, tokens = beams.sentences[keep], (choice.next_ids[keep] % vocab).view(-1)
    states = () if restrictions is None else restrictions.follow(
        beams.states, source_rows, tokens, sentences.repeat_interleave(beam_size),
        None if choice.next_state is None else choice.next_state.take(kept_rows))
    return _Beams(sentences, choice.next_scores[keep],
                  torch.cat([beams.tokens[source_rows], tokens.view(-1, 1)], dim=1),
                  None if beams.coverage is None else beams.coverage[source_rows], states)
