"""Tests for nmtkit/decoding/search.py with a fake decoder of fixed probabilities (as fairseq's search tests do)
and with a tiny random Transformer for batching invariants."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from devices import DEVICES
from torch import Tensor

from nmtkit.data.dataset import encode_sources
from nmtkit.data.subword import BOS, EOS
from nmtkit.decoding.hypotheses import length_limits
from nmtkit.decoding.search import (
    LengthPenalty,
    Sampler,
    beam_search,
    coverage_penalty,
    filter_log_probs,
    greedy_search,
    keep_sentences,
    max_lengths,
)
from nmtkit.models.base import EncoderDecoder, Memory, State

A, B = 4, 5  # the two ordinary tokens of the fake vocabulary
VOCAB = 6


class FixedDecoder(EncoderDecoder):
    """Log-probabilities read from a table indexed by (step, previous token); the source is ignored."""

    def __init__(self, probs: Tensor):
        super().__init__()
        self.log_probs = probs.log()  # (T, V, V): step, previous token, next token

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        return {"src_mask": src_mask}

    def init_state(self, memory: Memory) -> State:
        return {"step": torch.zeros(memory["src_mask"].size(0), dtype=torch.long)}

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, None]:
        step = state["step"].clamp(max=self.log_probs.size(0) - 1)
        return self.log_probs[step, prev], {"step": state["step"] + 1}, None

    def path_log_prob(self, tokens: list[int]) -> float:
        """Log-probability of BOS tokens EOS, summed in float64."""
        sequence = [BOS, *tokens, EOS]
        return sum(float(self.log_probs[t, prev, token].double())
                   for t, (prev, token) in enumerate(zip(sequence, sequence[1:])))


def distribution(vocab: int = VOCAB, **named: float) -> Tensor:
    """Probabilities for the named tokens (A, B, EOS); what is left is spread evenly over the others."""
    ids = {"A": A, "B": B, "EOS": EOS}
    probs = torch.zeros(vocab)
    for name, prob in named.items():
        probs[ids[name]] = prob
    others = [token for token in range(vocab) if token not in {ids[name] for name in named}]
    probs[others] = (1.0 - sum(named.values())) / len(others)
    return probs


def table(steps: int, rows: dict[tuple[int, int], Tensor], default: Tensor | None = None) -> Tensor:
    """(steps, V, V) probabilities: rows[(step, prev)], and `default` (mostly EOS) everywhere else."""
    default = distribution(EOS=0.99) if default is None else default
    probs = default.repeat(steps, VOCAB, 1)
    for (step, prev), row in rows.items():
        probs[step, prev] = row
    return probs


def sources(batch: int, length: int = 3) -> tuple[Tensor, Tensor]:
    return encode_sources([[A] * length] * batch)


# Greedy takes A (0.55) and is then stuck with a flat distribution; B then EOS is far more probable.
MISLEADING = table(4, {
    (0, BOS): distribution(A=0.55, B=0.44),
    (1, A): distribution(A=0.34, B=0.32, EOS=0.33),
    (1, B): distribution(EOS=0.99),
})

# "none" prefers [A] (total -1.02); "average" prefers [B, B, B] (total -1.79 but -0.45 per token).
LENGTH_CASE = table(4, {
    (0, BOS): distribution(A=0.6, B=0.38),
    (1, A): distribution(EOS=0.6, A=0.38),
    (1, B): distribution(B=0.7, EOS=0.01),
    (2, A): distribution(A=0.9, EOS=0.01),
    (2, B): distribution(B=0.7, EOS=0.01),
    (3, A): distribution(EOS=0.1),
    (3, B): distribution(EOS=0.9),
})


def test_greedy_follows_the_argmax_path():
    model = FixedDecoder(MISLEADING)
    src, src_mask = sources(1)
    [hyp] = greedy_search(model, src, src_mask, torch.tensor([4]))
    assert hyp.tokens == [A, A]
    expected = math.log(0.55) + math.log(0.34) + math.log(0.99)
    assert hyp.log_prob == pytest.approx(expected, abs=1e-5)
    assert hyp.log_prob == pytest.approx(model.path_log_prob([A, A]), abs=1e-5)


def test_beam_finds_a_more_probable_sequence_than_greedy():
    model = FixedDecoder(MISLEADING)
    src, src_mask = sources(1)
    max_len = torch.tensor([4])
    [greedy] = greedy_search(model, src, src_mask, max_len)
    [hyps] = beam_search(model, src, src_mask, max_len, beam_size=2, length_penalty=LengthPenalty("none"))
    assert hyps[0].tokens == [B]
    assert hyps[0].log_prob == pytest.approx(math.log(0.44) + math.log(0.99), abs=1e-5)
    assert hyps[0].log_prob > greedy.log_prob


@pytest.mark.parametrize("probs", [MISLEADING, LENGTH_CASE], ids=["misleading", "length"])
def test_beam_size_one_equals_greedy_on_fixed_tables(probs):
    model = FixedDecoder(probs)
    src, src_mask = sources(2)
    max_len = torch.tensor([4, 2])
    greedy = greedy_search(model, src, src_mask, max_len)
    beams = beam_search(model, src, src_mask, max_len, beam_size=1, length_penalty=LengthPenalty("none"))
    for single, [beam] in zip(greedy, beams):
        assert beam.tokens == single.tokens
        assert beam.log_prob == pytest.approx(single.log_prob, abs=1e-5)


def test_length_penalty_changes_the_ranking_and_scores_are_hand_computed():
    model = FixedDecoder(LENGTH_CASE)
    src, src_mask = sources(1)
    max_len = torch.tensor([4])
    short, long = [A], [B, B, B]
    short_log_prob = math.log(0.6) + math.log(0.6)
    long_log_prob = math.log(0.38) + 2 * math.log(0.7) + math.log(0.9)
    assert long_log_prob < short_log_prob and long_log_prob / 4 > short_log_prob / 2  # the case is what it claims

    [plain] = beam_search(model, src, src_mask, max_len, beam_size=2, length_penalty=LengthPenalty("none"))
    assert plain[0].tokens == short and plain[0].score == pytest.approx(short_log_prob, abs=1e-5)
    # gnmt with alpha 0 scores like "none" but is not flagged monotone, so the search keeps both hypotheses
    [unnormalised] = beam_search(model, src, src_mask, max_len, beam_size=2, length_penalty=LengthPenalty("gnmt", 0.0))
    assert [hyp.tokens for hyp in unnormalised] == [short, long]
    assert [hyp.score for hyp in unnormalised] == pytest.approx([short_log_prob, long_log_prob], abs=1e-5)
    [average] = beam_search(model, src, src_mask, max_len, beam_size=2, length_penalty=LengthPenalty("average"))
    assert [hyp.tokens for hyp in average] == [long, short]
    assert [hyp.score for hyp in average] == pytest.approx([long_log_prob / 4, short_log_prob / 2], abs=1e-5)
    assert [hyp.log_prob for hyp in average] == pytest.approx([long_log_prob, short_log_prob], abs=1e-5)


def test_stop_finished_ends_a_sentence_at_its_first_finished_hypothesis():
    """With `average`, [B, B, B] beats [A] but finishes two steps later: stopping at the first finished
    hypothesis returns [A] alone; the default (K = 2 finished) waits for both."""
    model = FixedDecoder(LENGTH_CASE)
    src, src_mask = sources(1)
    search = dict(max_len=torch.tensor([4]), beam_size=2, length_penalty=LengthPenalty("average"))
    [first] = beam_search(model, src, src_mask, stop_finished=1, **search)
    assert [hyp.tokens for hyp in first] == [[A]]
    for stop in (0, 2, 5):
        [both] = beam_search(model, src, src_mask, stop_finished=stop, **search)
        assert [hyp.tokens for hyp in both] == [[B, B, B], [A]]


# The empty hypothesis finishes first (EOS 0.3 at step 0) but ranks below the live [A] (0.5), which then finishes.
EMPTY_FIRST = table(3, {(0, BOS): distribution(A=0.5, B=0.2, EOS=0.3), (1, A): distribution(EOS=0.9)})


@pytest.mark.parametrize("length_penalty", [LengthPenalty("average"), LengthPenalty("gnmt", alpha=0.6)],
                         ids=["average", "gnmt"])
def test_stop_finished_does_not_return_a_hypothesis_ranked_below_a_live_one(length_penalty):
    [hyps] = beam_search(FixedDecoder(EMPTY_FIRST), *sources(1), torch.tensor([3]), beam_size=3,
                         length_penalty=length_penalty, stop_finished=1)
    assert hyps[0].tokens == [A]


class HistoryDecoder(FixedDecoder):
    """A FixedDecoder whose state carries each row's tokens, so a test can see the prefixes of the last step."""

    def init_state(self, memory: Memory) -> State:
        return {**super().init_state(memory), "history": torch.full((memory["src_mask"].size(0), 1), BOS)}

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, State, None]:
        log_probs, next_state, _ = super().step(prev, {"step": state["step"]}, memory)
        history = torch.cat([state["history"][:, :-1], prev.unsqueeze(1), prev.unsqueeze(1)], dim=1)
        self.last_prefixes = [row[1:-1].tolist() for row in history]
        return log_probs, {**next_state, "history": history}, None


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("length_penalty", [
    LengthPenalty("average"), LengthPenalty("gnmt", alpha=0.6), LengthPenalty("none", word_penalty=-0.3)],
    ids=["average", "gnmt", "word-penalty"])
def test_stop_finished_returns_only_hypotheses_ranked_above_every_live_beam(seed, length_penalty):
    """On random tables: when the search stops early (fewer than K finished), no continuation of the last step's
    prefixes that stays live ranks above a returned hypothesis (ranked as if it ended at that step)."""
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(3 * torch.randn(7, VOCAB, VOCAB, generator=generator), dim=-1)
    model = HistoryDecoder(probs)
    for stop in (1, 2):
        [hyps] = beam_search(model, *sources(1), torch.tensor([7]), beam_size=3, length_penalty=length_penalty,
                             stop_finished=stop)
        continuations = [model.path_log_prob(prefix) - float(model.log_probs[len(prefix), prefix[-1] if prefix else BOS,
                                                                             EOS].double())
                         + float(model.log_probs[len(prefix), prefix[-1] if prefix else BOS, token].double())
                         for prefix in model.last_prefixes for token in range(VOCAB) if token != EOS]
        length = len(model.last_prefixes[0]) + 1
        live = max(length_penalty(log_prob, length) for log_prob in continuations)
        if length < 7 and len(hyps) < 3:  # at the length limit nothing stays live; K finished end any search
            assert all(hyp.score >= live - 1e-5 for hyp in hyps[:stop]), (stop, [h.tokens for h in hyps])


def test_length_penalty_none_and_average():
    assert LengthPenalty("none")(-6.0, 3) == -6.0
    assert LengthPenalty("average")(-6.0, 3) == -2.0


PENALTIES = [LengthPenalty("none"), LengthPenalty("average"), LengthPenalty("gnmt", alpha=0.6),
             LengthPenalty("sockeye", alpha=1.2, beta=3.0), LengthPenalty("none", word_penalty=-0.5)]


@pytest.mark.parametrize("length_penalty", PENALTIES, ids=lambda penalty: f"{penalty.kind}-wp{penalty.word_penalty}")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_beam_finds_the_exhaustive_optimum(length_penalty, seed):
    vocab, limit = 5, 4  # sequences of at most 3 tokens, then EOS
    generator = torch.Generator().manual_seed(seed)
    model = FixedDecoder(torch.softmax(torch.randn(limit, vocab, vocab, generator=generator) * 2, dim=-1))
    ordinary = [token for token in range(vocab) if token != EOS]
    candidates = [list(seq) for length in range(limit) for seq in itertools.product(ordinary, repeat=length)]
    scored = [(length_penalty(model.path_log_prob(seq), len(seq) + 1), seq) for seq in candidates]
    best_score, best_tokens = max(scored)

    src, src_mask = sources(1)
    # wider than the number of candidates at any step: nothing is ever pruned
    [hyps] = beam_search(model, src, src_mask, torch.tensor([limit]), len(candidates), length_penalty)
    assert hyps[0].tokens == best_tokens
    assert hyps[0].score == pytest.approx(best_score, abs=1e-5)
    if not length_penalty.monotone:  # otherwise the search may stop once no live beam can win
        assert len(hyps) == len(candidates)


def test_every_hypothesis_respects_its_length_limit():
    never_eos = distribution(A=0.5, B=0.49, EOS=0.001)
    model = FixedDecoder(never_eos.repeat(6, VOCAB, 1))
    src, src_mask = sources(4)
    max_len = torch.tensor([1, 2, 6, 4])
    for hyp, limit in zip(greedy_search(model, src, src_mask, max_len), max_len.tolist()):
        assert len(hyp.tokens) == limit - 1
        assert EOS not in hyp.tokens
    for hyps, limit in zip(beam_search(model, src, src_mask, max_len, beam_size=3), max_len.tolist()):
        assert hyps
        assert all(len(hyp.tokens) <= limit - 1 and EOS not in hyp.tokens for hyp in hyps)
        assert len(hyps[0].tokens) == limit - 1


def test_max_lengths():
    _, src_mask = encode_sources([[4, 5], [4, 5, 6, 7], [4] * 30])  # 3, 5 and 31 tokens with EOS
    assert max_lengths(src_mask, 1.5, 2).tolist() == [6, 9, 48]
    assert max_lengths(src_mask, 1.5, 2, limit=20).tolist() == [6, 9, 20]
    assert max_lengths(src_mask, 0.0, 0).tolist() == [1, 1, 1]


def test_length_limits_compute_in_float32_as_torch_does():
    """The limits without torch (CTranslate2's path) are those torch computes in float32: 100 * 0.29 is 28.99...
    in float64 but 29 in float32."""
    assert length_limits([100], 0.29, 0) == [29]
    lengths = list(range(0, 300))
    grid = [(1.2, 10), (0.29, 0), (1.1, 5), (0.7, -3), (2.0, 0), (1.5, 2)]
    generator = torch.Generator().manual_seed(0)
    grid += [(float(a), int(b)) for a, b in zip(torch.rand(200, generator=generator, dtype=torch.float64) * 3,
                                                  torch.randint(-5, 50, (200,), generator=generator))]
    for a, b in grid:
        expected = (torch.tensor(lengths).float() * a + b).long().clamp(1, 256).tolist()
        assert length_limits(lengths, a, b, 256) == expected, (a, b)


def rescore(model: EncoderDecoder, src: Tensor, src_mask: Tensor, tokens: list[int]) -> float:
    """Teacher-forced log-probability of BOS tokens EOS."""
    tgt_in = torch.tensor([[BOS, *tokens]], device=src.device)
    logits, _ = model(src, src_mask, tgt_in)
    log_probs = F.log_softmax(logits[0], dim=-1)
    return float(log_probs.gather(1, torch.tensor([[*tokens, EOS]], device=src.device).T).sum())


# Untied output layers, so that a random model does not just copy its input: with seed 0 the outputs vary
# from token to token; with seed 1 some sentences end early, so finished sentences leave the batch.
SEARCH_MODELS = [dict(seed=0, tie_output=False, share_embeddings=False), dict(seed=1, tie_output=False)]


@pytest.fixture(params=[(settings, device) for device in DEVICES for settings in SEARCH_MODELS],
                ids=[f"{name}-{device}" for device in DEVICES for name in ("varied", "early_eos")])
def search_model(request, make_transformer):
    settings, device = request.param
    return make_transformer(**settings).to(device)


@pytest.fixture
def source_batch(source_batch, search_model):
    """The shared source batch on the search model's device."""
    sentences, src, src_mask = source_batch
    device = next(search_model.parameters()).device
    return sentences, src.to(device), src_mask.to(device)


def encoded_on(model, sentences: list[list[int]]) -> tuple[Tensor, Tensor]:
    device = next(model.parameters()).device
    return tuple(tensor.to(device) for tensor in encode_sources(sentences))


def test_transformer_batch_equals_one_sentence_at_a_time(search_model, source_batch):
    sentences, src, src_mask = source_batch
    max_len = max_lengths(src_mask, 1.0, 3)
    greedy = greedy_search(search_model, src, src_mask, max_len)
    beams = beam_search(search_model, src, src_mask, max_len, beam_size=3)
    for index, sentence in enumerate(sentences):
        one_src, one_mask = encoded_on(search_model, [sentence])
        one_max_len = max_lengths(one_mask, 1.0, 3)
        assert one_max_len.tolist() == [int(max_len[index])]
        [one_greedy] = greedy_search(search_model, one_src, one_mask, one_max_len)
        [one_beams] = beam_search(search_model, one_src, one_mask, one_max_len, beam_size=3)
        assert greedy[index].tokens == one_greedy.tokens
        assert greedy[index].log_prob == pytest.approx(one_greedy.log_prob, abs=1e-4)
        assert [hyp.tokens for hyp in beams[index]] == [hyp.tokens for hyp in one_beams]
        assert [hyp.score for hyp in beams[index]] == pytest.approx([hyp.score for hyp in one_beams], abs=1e-4)


def test_transformer_beam_one_equals_greedy_and_scores_match_forward(search_model, source_batch):
    sentences, src, src_mask = source_batch
    max_len = max_lengths(src_mask, 1.5, 2)
    greedy = greedy_search(search_model, src, src_mask, max_len)
    beams = beam_search(search_model, src, src_mask, max_len, beam_size=1)
    nbest = beam_search(search_model, src, src_mask, max_len, beam_size=4, length_penalty=LengthPenalty("average"))
    for index, sentence in enumerate(sentences):
        assert beams[index][0].tokens == greedy[index].tokens
        assert beams[index][0].log_prob == pytest.approx(greedy[index].log_prob, abs=1e-4)
        one_src, one_mask = encoded_on(search_model, [sentence])
        with torch.no_grad():
            assert greedy[index].log_prob == pytest.approx(
                rescore(search_model, one_src, one_mask, greedy[index].tokens), abs=1e-4)
            for hyp in nbest[index]:
                assert len(hyp.tokens) < max_len[index]
                assert hyp.log_prob == pytest.approx(rescore(search_model, one_src, one_mask, hyp.tokens),
                                                     abs=1e-4)
                assert hyp.score == pytest.approx(hyp.log_prob / (len(hyp.tokens) + 1), abs=1e-6)
        scores = [hyp.score for hyp in nbest[index]]
        assert scores == sorted(scores, reverse=True)
        assert len(nbest[index]) == 4


@pytest.mark.parametrize("penalty", [LengthPenalty("average"), LengthPenalty("gnmt", alpha=0.6, coverage=0.4)],
                         ids=["average", "coverage"])
def test_beams_sharing_memory_search_as_with_memory_repeated(search_model, source_batch, monkeypatch, penalty):
    """The Transformer keeps one memory row per sentence for all its beams (`beam_memory`); the default, memory
    repeated for every beam, finds the same hypotheses with the same scores (sentences also leave the batch)."""
    _, src, src_mask = source_batch
    memory = search_model.encode(src, src_mask)
    assert search_model.beam_memory(memory, 3)["cross_k0"].size(0) == 3
    limit = max_lengths(src_mask, 1.5, 2)
    shared = beam_search(search_model, src, src_mask, limit, 3, penalty)
    monkeypatch.setattr(type(search_model), "beam_memory", EncoderDecoder.beam_memory)
    assert search_model.beam_memory(memory, 3)["cross_k0"].size(0) == 9
    repeated = beam_search(search_model, src, src_mask, limit, 3, penalty)
    for ours, theirs in zip(shared, repeated):
        assert [hyp.tokens for hyp in ours] == [hyp.tokens for hyp in theirs]
        assert [hyp.score for hyp in ours] == pytest.approx([hyp.score for hyp in theirs], abs=1e-5)


def test_keep_sentences_keeps_beam_rows_and_sentence_rows():
    memory = {"src_mask": torch.arange(3).view(3, 1), "per_beam": torch.arange(6).view(6, 1)}
    kept = keep_sentences(memory, live=3, kept=torch.tensor([0, 2]), beam_size=2)
    assert kept["src_mask"].view(-1).tolist() == [0, 2]
    assert kept["per_beam"].view(-1).tolist() == [0, 1, 4, 5]


def test_gnmt_sockeye_and_word_penalty_formulas():
    assert LengthPenalty("gnmt", alpha=0.6).divisor(7) == pytest.approx((12 / 6) ** 0.6)
    assert LengthPenalty("gnmt", alpha=0.0)(-3.0, 9) == -3.0
    assert LengthPenalty("sockeye", alpha=1.0, beta=0.0)(-6.0, 3) == pytest.approx(-2.0)  # = average
    assert LengthPenalty("sockeye", alpha=0.5, beta=2.0).divisor(6) == pytest.approx((8 / 3) ** 0.5)
    assert LengthPenalty("none", word_penalty=0.25)(-1.0, 4) == pytest.approx(-2.0)
    assert LengthPenalty("none").monotone and not LengthPenalty("none", word_penalty=-0.1).monotone
    assert not LengthPenalty("gnmt").monotone
    with pytest.raises(ValueError):
        LengthPenalty("longest")


class CountingDecoder(FixedDecoder):
    def __init__(self, probs: Tensor):
        super().__init__(probs)
        self.calls = 0

    def step(self, prev, state, memory):
        self.calls += 1
        return super().step(prev, state, memory)


def test_search_stops_when_no_live_beam_can_win():
    # EOS at once has probability 0.9: no continuation (at most 0.1) can catch up under the "none" penalty.
    probs = table(6, {(0, BOS): distribution(A=0.06, B=0.04, EOS=0.9)}, default=distribution(A=0.5, B=0.5))
    stopping = CountingDecoder(probs)
    [hyps] = beam_search(stopping, *sources(1), torch.tensor([6]), beam_size=3, length_penalty=LengthPenalty("none"))
    assert stopping.calls == 1 and hyps[0].tokens == []
    exhaustive = CountingDecoder(probs)
    beam_search(exhaustive, *sources(1), torch.tensor([6]), beam_size=3, length_penalty=LengthPenalty("average"))
    assert exhaustive.calls > 1


def test_min_len_forbids_early_eos():
    model = FixedDecoder(distribution(A=0.2, B=0.1, EOS=0.6).repeat(8, VOCAB, 1))
    [hyps] = beam_search(model, *sources(1), torch.tensor([8]), beam_size=2, min_len=3)
    assert all(len(hyp.tokens) >= 3 for hyp in hyps)
    [short] = beam_search(model, *sources(1), torch.tensor([2]), beam_size=2, min_len=3)
    assert short and all(len(hyp.tokens) <= 1 for hyp in short)  # the length limit wins over min_len


@pytest.mark.parametrize("choose", [None, Sampler(generator=torch.Generator().manual_seed(3))],
                         ids=["greedy", "sample"])
def test_greedy_and_sampling_honour_min_len(choose):
    model = FixedDecoder(distribution(A=0.2, B=0.1, EOS=0.6).repeat(8, VOCAB, 1))
    extra = {} if choose is None else {"choose": choose}
    hyps = greedy_search(model, *sources(4), torch.tensor([8] * 4), min_len=3, **extra)
    assert all(len(hyp.tokens) >= 3 for hyp in hyps)
    if choose is None:  # without min_len the argmax is EOS at once
        assert greedy_search(model, *sources(1), torch.tensor([8]))[0].tokens == []
    [short] = greedy_search(model, *sources(1), torch.tensor([2]), min_len=3, **extra)
    assert len(short.tokens) <= 1


def test_filter_log_probs_top_k_and_top_p():
    log_probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = lambda filtered: torch.isfinite(filtered[0]).tolist()  # noqa: E731
    assert kept(filter_log_probs(log_probs, top_k=2)) == [True, True, False, False]
    assert kept(filter_log_probs(log_probs, top_p=0.45)) == [True, False, False, False]
    assert kept(filter_log_probs(log_probs, top_p=0.75)) == [True, True, False, False]
    assert kept(filter_log_probs(log_probs, top_p=0.85)) == [True, True, True, False]
    assert kept(filter_log_probs(log_probs[:, [3, 1, 0, 2]], top_p=0.75)) == [False, True, True, False]
    assert kept(filter_log_probs(log_probs, top_k=3, top_p=0.01)) == [True, False, False, False]


def test_sampling_follows_the_distribution_and_scores_the_path():
    probs = table(3, {(0, BOS): distribution(A=0.7, B=0.3 - 1e-6)}, default=distribution(EOS=1 - 1e-6))
    model = FixedDecoder(probs)
    src, src_mask = sources(2000)
    sampler = Sampler(generator=torch.Generator().manual_seed(0))
    hyps = greedy_search(model, src, src_mask, torch.full((2000,), 3), choose=sampler)
    firsts = [hyp.tokens[0] for hyp in hyps]
    assert abs(firsts.count(A) / 2000 - 0.7) < 0.04 and firsts.count(A) + firsts.count(B) == 2000
    for hyp in hyps[:20]:
        assert hyp.log_prob == pytest.approx(model.path_log_prob(hyp.tokens), abs=1e-4)
    cold = greedy_search(model, src[:50], src_mask[:50], torch.full((50,), 3), choose=Sampler(temperature=1e-4))
    assert all(hyp.tokens == [A] for hyp in cold)  # a tiny temperature is greedy


def test_coverage_penalty_formula():
    coverage = torch.tensor([[0.5, 2.0, 0.0], [1.0, 0.25, 0.7]])
    src_mask = torch.tensor([[True, True, False], [True, True, True]])
    expected = [0.2 * (math.log(0.5) + 0.0), 0.2 * (0.0 + math.log(0.25) + math.log(0.7))]
    assert coverage_penalty(coverage, src_mask, 0.2).tolist() == pytest.approx(expected)
    assert coverage_penalty(torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool), 1.0).item() == pytest.approx(
        2 * math.log(1e-10))  # never attended: floored, still finite


def test_beam_scores_include_the_coverage_of_each_hypothesis(search_model, source_batch):
    _, src, src_mask = source_batch
    penalty = LengthPenalty("gnmt", alpha=0.6, coverage=0.4)
    assert not penalty.monotone
    nbest = beam_search(search_model, src, src_mask, max_lengths(src_mask, 1.5, 2), beam_size=3,
                        length_penalty=penalty)
    for index, hyps in enumerate(nbest):
        for hyp in hyps:  # recompute the attention of the whole hypothesis with teacher forcing
            tgt_in = torch.tensor([[BOS, *hyp.tokens]], device=src.device)
            with torch.no_grad():
                _, attention = search_model(src[index : index + 1], src_mask[index : index + 1], tgt_in,
                                            need_attention=True)
            expected = penalty(hyp.log_prob, len(hyp.tokens) + 1) + float(
                coverage_penalty(attention.sum(1), src_mask[index : index + 1], 0.4))
            assert hyp.score == pytest.approx(expected, abs=1e-4)


def test_coverage_penalty_needs_attention():
    model = FixedDecoder(torch.full((3, VOCAB, VOCAB), 1.0 / VOCAB))
    src, src_mask = encode_sources([[A, B]])
    with pytest.raises(ValueError, match="attends to the source"):
        beam_search(model, src, src_mask, torch.tensor([3]), beam_size=2, length_penalty=LengthPenalty(coverage=0.2))
