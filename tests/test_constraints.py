"""Tests for nmtkit/decoding/constraints.py, nmtkit/decoding/constraint_tracker.py and constrained beam search: the
search parts alone (phrase tracking, bank allocation), the search against exhaustive search on fixed-probability tables,
invariants on random models of every registered architecture, and the text side (phrases and prefixes encoded with
real SentencePiece models)."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from devices import device_params
from hypothesis import given, settings
from hypothesis import strategies as st
from scaling import assert_linear
from test_models import NAMES, encoded, make_model
from test_search import EMPTY_FIRST, LENGTH_CASE, MISLEADING, PENALTIES, FixedDecoder, sources, table

from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import EOS, train_subword
from nmtkit.decoding.constraint_tracker import (
    ConstraintState,
    ConstraintTracker,
    PhraseAutomata,
    advance_phrases,
    allocate,
    phrase_transitions,
    rank_within,
    repeated,
)
from nmtkit.decoding.constraints import (
    ConstraintEncoder,
    Constraints,
    PieceTable,
    WordEnds,
    completable,
    constrained_limits,
    split_prefix,
)
from nmtkit.decoding.search import LengthPenalty, beam_search, max_lengths

# --- the parts ---


def longest_match(phrase: list[int], output: list[int]) -> int:
    """How much of `phrase` the output ends with, by brute force."""
    return max(k for k in range(len(phrase) + 1) if k <= len(output) and output[len(output) - k:] == phrase[:k])


@pytest.mark.parametrize("seed", range(20))
def test_phrase_transitions_follow_the_longest_match(seed):
    rng = random.Random(seed)
    phrase = [rng.choice("ab") for _ in range(rng.randint(1, 6))]
    rows = phrase_transitions(phrase)
    assert len(rows) == len(phrase) + 1
    for state in range(len(phrase) + 1):
        for token in [*phrase, 9]:  # the output so far ends with phrase[:state]
            assert rows[state].get(token, 0) == longest_match(phrase, phrase[:state] + [token]), (phrase, state)
        assert 0 not in rows[state].values()


def test_phrase_transitions_of_a_self_overlapping_phrase():
    assert phrase_transitions([7, 7, 8]) == [{7: 1}, {7: 2}, {7: 2, 8: 3}, {7: 1}]  # A A A B meets A A B


def fibonacci_word(length: int) -> list[int]:
    word, before = [1], [0]
    while len(word) < length:
        word, before = word + before, word
    return word[:length]


@pytest.mark.parametrize("phrase", [[5] * 3000, [5] * 2999 + [6], [5, 6] * 1500, fibonacci_word(3000),
                                    list(range(3000)), random.Random(0).choices([4, 5, 6], k=3000)],
                         ids=["one token", "one token then another", "two alternating", "fibonacci", "distinct",
                              "random"])
def test_phrase_transitions_hold_at_most_two_entries_a_token(phrase):
    """A table of every state by every position held the square of the phrase's length (a 2,000-token phrase: 4
    million numbers, and seconds, in every batch that held it); the rows hold at most 2 a token (Simon 1993)."""
    assert sum(map(len, phrase_transitions(phrase))) <= 2 * len(phrase)


PHRASES = {  # long phrases: one token repeated, self-overlapping, all distinct, random
    "one token": lambda n: (5,) * n,
    "fibonacci": lambda n: tuple(4 + token for token in fibonacci_word(n)),
    "distinct": lambda n: tuple(range(4, n + 4)),
    "random": lambda n: tuple(random.Random(n).choices([4, 5, 6], k=n)),
}


@pytest.mark.parametrize("family", PHRASES)
def test_a_long_phrase_is_tracked_in_linear_time(family):
    """A tracker of a batch holding one long positive and one long negative phrase, and a step of it: its tables
    were the square of the longest phrase (a 1,000-token phrase took seconds), now as long as the phrases."""
    def track(phrase: tuple[int, ...]) -> None:
        tracker = ConstraintTracker([Constraints(positive=(phrase,), negative=(phrase[::-1],)), None],
                                    torch.device("cpu"))
        state, sentences = tracker.initial_state(8), torch.tensor([0] * 4 + [1] * 4)
        tracker.advance(state, torch.arange(8), torch.tensor([5, 4, 6, 7] * 2), sentences)
        tracker.banks(state, sentences, torch.arange(8), torch.tensor([5, 4, 6, 7] * 2))

    assert_linear(track, PHRASES[family], name=family)


def run_phrases(tokens: list[int], glued: set[int], open_ends: list[bool], *phrases: list[int]) -> list[list[int]]:
    automata, lengths = PhraseAutomata([list(phrases)], torch.device("cpu")), torch.tensor([list(map(len, phrases))])
    progress, history = torch.zeros(1, len(phrases), dtype=torch.long), []
    for token in tokens:
        progress = advance_phrases(automata, lengths, torch.tensor([open_ends]), torch.tensor([0]), progress,
                                   torch.tensor([token]), torch.tensor([token in glued]))
        history.append(progress[0].tolist())
    return history


def test_advance_phrases_tracks_each_phrase_and_keeps_met_ones():
    # [4 5], [5 6], [4 4 5]: a full match (its length) is met for good (length + 1) by the next token
    assert run_phrases([4, 4, 4, 5, 6, 9], set(), [False] * 3, [4, 5], [5, 6], [4, 4, 5]) == [
        [1, 0, 1], [1, 0, 2], [1, 0, 2], [2, 1, 3], [3, 2, 4], [3, 3, 4]]


def test_a_glued_token_undoes_a_match_that_ends_inside_a_word():
    # 9 goes on with the word: [4] then 9 is no match of [4] ("Jew" + "s"); [4] then 5 is, and so is [6] then 9,
    # as 6 does not end inside a word (a phrase that ends in punctuation)
    assert run_phrases([4, 9, 4, 5], {9}, [True], [4]) == [[1], [0], [1], [2]]
    assert run_phrases([6, 9], {9}, [False], [6]) == [[1], [2]]
    # undone, the match falls back as Knuth-Morris-Pratt does: [4 4] then 4 still ends with [4 4] (pending again),
    # then a glued 9 leaves nothing of it; a token that is not glued would have met it
    assert run_phrases([4, 4, 4, 9], {4, 9}, [True], [4, 4]) == [[1], [2], [2], [0]]
    assert run_phrases([4, 4, 4, 5], {4, 9}, [True], [4, 4]) == [[1], [2], [2], [3]]


def test_allocate_takes_the_best_of_each_bank_in_turn():
    scores = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, float("-inf")]])
    banks = torch.tensor([[0, 0, 1, 2, 2, 2]])
    kept = allocate(scores, banks, torch.tensor([2]), count=5)
    assert kept.tolist() == [[3, 2, 0, 4, 1]]  # bank 2's best, bank 1's, bank 0's, then the second bests
    unconstrained = allocate(scores, torch.zeros_like(banks), torch.tensor([0]), count=6)
    assert unconstrained.tolist() == [[0, 1, 2, 3, 4, 5]]  # no constraints: by score, -inf last


@pytest.mark.parametrize("seed", range(10))
def test_rank_within_counts_the_earlier_members_of_each_group(seed):
    groups = torch.randint(0, 4, (3, 40), generator=torch.Generator().manual_seed(seed))
    members = torch.nn.functional.one_hot(groups, 4)  # the one-hot count it replaces
    assert torch.equal(rank_within(groups), (members.cumsum(dim=1) * members).sum(dim=-1) - 1)


def random_tracker(rng: random.Random, vocab: int, word_ends: WordEnds | None) -> ConstraintTracker:
    def phrase() -> tuple[int, ...]:  # tokens repeat within and across phrases
        return tuple(rng.choice([1, 2, 4, 5, 6]) for _ in range(rng.randint(1, 3)))

    lines = [None if rng.random() < 0.2 else Constraints(positive=tuple(phrase() for _ in range(rng.randint(0, 4))),
                                                         negative=tuple(phrase() for _ in range(rng.randint(0, 2))))
             for _ in range(rng.randint(1, 3))]
    return ConstraintTracker(lines, torch.device("cpu"), word_ends)


@pytest.mark.parametrize("seed", range(20))
def test_banks_are_the_met_tokens_of_the_advanced_states(seed):
    """`banks` (without the candidates' states) agrees with `advance` (with them), from every reachable progress:
    partial and full matches, met phrases, glued tokens after open ends."""
    rng, vocab = random.Random(seed), 8
    word_ends = WordEnds(torch.tensor([rng.random() < 0.5 for _ in range(vocab)]),
                         torch.tensor([rng.random() < 0.5 for _ in range(vocab)])) if seed % 2 else None
    tracker = random_tracker(rng, vocab, word_ends)
    sentences = torch.tensor([rng.randrange(tracker.lengths.size(0)) for _ in range(6)])  # the state's rows'
    progress = (torch.rand(tracker.lengths[sentences].shape, generator=torch.Generator().manual_seed(seed))
                * (tracker.lengths[sentences] + 2)).long()  # 0 .. length + 1
    state = ConstraintState(progress, torch.zeros(6, dtype=torch.long))
    rows, tokens = torch.arange(6).repeat_interleave(vocab), torch.arange(vocab).repeat(6)
    following = tracker.advance(state, rows, tokens, sentences[rows])
    met = following.progress.minimum(tracker.lengths[sentences[rows]]) * ~tracker.negative[sentences[rows]]
    assert torch.equal(tracker.banks(state, sentences, rows, tokens), met.sum(dim=1))


def test_a_step_with_800_constraints_advances_only_the_kept_candidates(monkeypatch):
    """A beam of 16 with 800 one-word constraints has 16 * 804 candidates; computing each one's state (a number
    per constraint) took 3.7 s and 1.6 GB a step. Only the 16 finishing and the 16 going on need one."""
    advanced = []

    def recording(*args):
        advanced.append(args[4].size(0))  # progress (N, P): N rows advanced
        return advance_phrases(*args)

    monkeypatch.setattr("nmtkit.decoding.constraint_tracker.advance_phrases", recording)
    tracker = ConstraintTracker([Constraints(positive=tuple((5 + index,) for index in range(800)))],
                                torch.device("cpu"))
    state, sentences = tracker.initial_state(16), torch.zeros(1, dtype=torch.long)
    candidates = torch.randn(1, 16, 1000, generator=torch.Generator().manual_seed(0)).log_softmax(dim=-1)
    tracker.restrict(candidates, sentences, state, torch.ones(1, dtype=torch.long))
    choice = tracker.choose(candidates, sentences, state)
    assert advanced == [16, 16] and choice.next_state.progress.shape == (16, 800)
    assert set(choice.next_state.progress.sum(dim=1).tolist()) == {0, 1}  # both banks keep beams


def test_a_40000_byte_partial_word_is_followed_to_its_end():
    """The moves through a prefix's last word were a table of offsets by pieces, in int16: a word over 32 KB
    wrapped around, and one of 64 KB with a 32,000-piece vocabulary took 4 GB. Now one entry a move."""
    size, piece = 40_000, 30_000
    both, last = (torch.tensor([5, piece]), torch.tensor([1, 2])), (torch.tensor([5]), torch.tensor([1]))
    partial = (both,) * (size - 1) + (last,)  # 5 writes a byte, `piece` two
    tracker = ConstraintTracker([Constraints(partial=partial)], torch.device("cpu"))
    assert tracker.prefix.partial_keys.numel() == 2 * size  # 2 moves an offset but the last, and a sentinel
    state = ConstraintState(torch.zeros(2, 1, dtype=torch.long), torch.tensor([size - 3, size - 1]))
    scores = torch.zeros(2, 1, piece + 1)
    tracker.restrict(scores, torch.tensor([0, 0]), state, torch.ones(2, dtype=torch.long))
    assert torch.isfinite(scores).nonzero()[:, 2].tolist() == [5, piece, 5]
    following = tracker.advance(state, torch.tensor([0, 1]), torch.tensor([piece, 5]), torch.tensor([0, 0]))
    assert following.prefix.tolist() == [size - 1, size]
    assert tracker.complete(torch.tensor([0, 0]), following).tolist() == [False, True]


def test_repeated_marks_later_copies():
    assert repeated(torch.tensor([[3, 1, 3, 2, 1]])).tolist() == [[False, False, True, False, True]]


def test_constrained_limits_make_room_up_to_the_cap():
    lines = [None, Constraints(positive=((4, 5), (6,)), forced=(7,)), Constraints(positive=((4,) * 30,))]
    assert constrained_limits(torch.tensor([3, 3, 3]), lines, cap=20).tolist() == [3, 5, 20]


# --- against exhaustive search on fixed tables ---

ORDINARY_VOCAB = 5  # tokens 0, 1, 2, 4 are ordinary in these tables; EOS is 3


def contains(output: list[int], phrase: tuple[int, ...], glued: frozenset[int] = frozenset()) -> bool:
    """Whether the output holds the phrase, not followed by a token in `glued` (one that goes on with its word)."""
    ends = [start + len(phrase) for start in range(len(output) - len(phrase) + 1)
            if tuple(output[start:start + len(phrase)]) == phrase]
    return any(end == len(output) or output[end] not in glued for end in ends)


def follows_prefix(output: list[int], constraints: Constraints) -> bool:
    forced = list(constraints.forced)
    if output[: len(forced)] != forced:
        return False
    offset, position = 0, len(forced)
    while offset < len(constraints.partial):
        tokens, written = constraints.partial[offset]
        if position >= len(output) or output[position] not in tokens.tolist():
            return False
        offset += int(written[tokens.tolist().index(output[position])])
        position += 1
    return True


def meets(output: list[int], constraints: Constraints, glued: frozenset[int] = frozenset()) -> bool:
    return (all(contains(output, phrase, glued) for phrase in constraints.positive)
            and not any(contains(output, phrase) for phrase in constraints.negative)
            and follows_prefix(output, constraints))


def moves(*pairs: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([token for token, _ in pairs]), torch.tensor([written for _, written in pairs])


CASES = {
    "one token": Constraints(positive=((1,),)),
    "phrase": Constraints(positive=((2, 0),)),
    "two phrases": Constraints(positive=((0, 1), (4,))),
    "overlapping": Constraints(positive=((0, 1), (1, 2))),
    "repeating": Constraints(positive=((4, 4, 2),)),
    "negative": Constraints(positive=((1,),), negative=((0,), (2, 4))),
    "forced": Constraints(positive=((2,),), forced=(4, 1)),
    # a two-byte partial word: 0 writes one byte of it, 1 both; then 2 or 4 writes the second
    "partial": Constraints(positive=((1,),), partial=(moves((0, 1), (1, 2)), moves((2, 1), (4, 1)))),
}


# token 1 goes on with the word before it; every token ends inside a word (a word piece), so [4] then 1 is no match
GLUED = frozenset({1})
WORD_ENDS = WordEnds(torch.tensor([token in GLUED for token in range(ORDINARY_VOCAB)]),
                     torch.ones(ORDINARY_VOCAB, dtype=torch.bool))
WHOLE_WORDS = {"whole word": Constraints(positive=((4,),)), "whole phrase": Constraints(positive=((0, 2), (4,))),
               "whole, overlapping": Constraints(positive=((0, 4), (4, 0)))}


def random_decoder(seed: int, steps: int) -> FixedDecoder:
    generator = torch.Generator().manual_seed(seed)
    return FixedDecoder(torch.softmax(torch.randn(steps, ORDINARY_VOCAB, ORDINARY_VOCAB, generator=generator) * 2,
                                      dim=-1))


@pytest.mark.parametrize("length_penalty", PENALTIES, ids=lambda penalty: f"{penalty.kind}-wp{penalty.word_penalty}")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_constrained_beam_finds_the_exhaustive_optimum(seed, case, length_penalty):
    constraints, limit = CASES[case], 5  # outputs of at most 4 tokens, then EOS
    model = random_decoder(seed, limit)
    ordinary = [token for token in range(ORDINARY_VOCAB) if token != EOS]
    outputs = [list(seq) for length in range(limit) for seq in itertools.product(ordinary, repeat=length)]
    allowed = [output for output in outputs if meets(output, constraints)]
    best_score, best_tokens = max((length_penalty(model.path_log_prob(seq), len(seq) + 1), seq) for seq in allowed)

    # wider than the number of outputs: nothing is ever pruned
    [hyps] = beam_search(model, *sources(1), torch.tensor([limit]), len(outputs), length_penalty,
                         constraints=[constraints])
    assert hyps[0].tokens == best_tokens
    assert hyps[0].score == pytest.approx(best_score, abs=1e-5)
    assert all(meets(hyp.tokens, constraints) and hyp.constraints_met for hyp in hyps)


@pytest.mark.parametrize("length_penalty", PENALTIES[1:3], ids=lambda penalty: penalty.kind)
@pytest.mark.parametrize("case", WHOLE_WORDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_beam_finds_the_exhaustive_optimum_of_whole_words(seed, case, length_penalty):
    constraints, limit = WHOLE_WORDS[case], 5
    model = random_decoder(seed, limit)
    ordinary = [token for token in range(ORDINARY_VOCAB) if token != EOS]
    outputs = [list(seq) for length in range(limit) for seq in itertools.product(ordinary, repeat=length)]
    allowed = [output for output in outputs if meets(output, constraints, GLUED)]
    best_score, best_tokens = max((length_penalty(model.path_log_prob(seq), len(seq) + 1), seq) for seq in allowed)
    [hyps] = beam_search(model, *sources(1), torch.tensor([limit]), len(outputs), length_penalty,
                         constraints=[constraints], word_ends=WORD_ENDS)
    assert hyps[0].tokens == best_tokens
    assert hyps[0].score == pytest.approx(best_score, abs=1e-5)
    assert all(meets(hyp.tokens, constraints, GLUED) for hyp in hyps)
    assert any(not meets(output, constraints, GLUED) and meets(output, constraints) for output in outputs)


def test_a_beam_offers_its_best_token_that_ends_the_word():
    """Beam 0 has just written the phrase [4] and wants the glued 1 next; beam 1 cannot write 4. The only
    candidate that keeps the phrase met is beam 0's best token that ends the word (0), far below the top 2K: the
    step keeps it, in the top bank, beside the best of bank 0."""
    tracker = ConstraintTracker([Constraints(((4,),))], torch.device("cpu"), WORD_ENDS)
    state = ConstraintState(torch.tensor([[1], [0]]), torch.zeros(2, dtype=torch.long))
    candidates = torch.tensor([[[-5.0, -0.1, -6.0, -7.0, -8.0], [-0.2, -0.25, -0.3, -9.0, float("-inf")]]])
    tracker.restrict(candidates, torch.tensor([0]), state, torch.tensor([1]))
    choice = tracker.choose(candidates, torch.tensor([0]), state)
    assert choice.next_ids.tolist() == [[0 * 5 + 0, 0 * 5 + 1]]  # beam 0 then 0 (met), beam 0 then 1 (undone)
    assert choice.next_state.progress.tolist() == [[2], [0]]
    assert choice.next_scores[0].tolist() == pytest.approx([-5.0, -0.1])


@pytest.mark.parametrize("word_ends", [None, WORD_ENDS], ids=["tokens", "whole-words"])
@pytest.mark.parametrize("beam_size", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(4))
def test_every_hypothesis_of_a_narrow_beam_meets_its_constraints(seed, beam_size, word_ends):
    """A batch of sentences with different constraints (and one without), each searched as it would be alone."""
    limit, glued = 7, GLUED if word_ends else frozenset()
    model = random_decoder(seed, limit)
    lines = [CASES["overlapping"], None, CASES["negative"], CASES["repeating"], CASES["partial"], CASES["forced"]]
    found = beam_search(model, *sources(len(lines)), torch.tensor([limit] * len(lines)), beam_size,
                        constraints=lines, word_ends=word_ends)
    plain = beam_search(model, *sources(1), torch.tensor([limit]), beam_size)
    for hyps, constraints in zip(found, lines):
        assert hyps and all(hyp.constraints_met for hyp in hyps)
        assert all(meets(hyp.tokens, constraints or Constraints(), glued) for hyp in hyps)
        [alone] = beam_search(model, *sources(1), torch.tensor([limit]), beam_size, constraints=[constraints],
                              word_ends=word_ends)
        assert [hyp.tokens for hyp in hyps] == [hyp.tokens for hyp in alone]
        assert [hyp.score for hyp in hyps] == pytest.approx([hyp.score for hyp in alone], abs=1e-6)
        if constraints is None:
            assert [hyp.tokens for hyp in hyps] == [hyp.tokens for hyp in plain[0]]


TIES = table(5, {}, default=torch.full((6,), 1 / 6))  # every token equally likely at every step


@pytest.mark.parametrize("probs", [MISLEADING, LENGTH_CASE, EMPTY_FIRST, TIES], ids=["misleading", "length",
                                                                                  "empty-first", "ties"])
@pytest.mark.parametrize("beam_size", [1, 2, 4])
def test_an_unconstrained_line_is_searched_as_alone_even_among_ties(probs, beam_size):
    """These tables have many equal probabilities: a line without constraints, batched with constrained lines,
    gets plain search's hypotheses in plain search's order."""
    model, limit = FixedDecoder(probs), torch.tensor([probs.size(0)] * 2)
    for penalty in PENALTIES:
        [plain] = beam_search(model, *sources(1), limit[:1], beam_size, penalty)
        mixed = beam_search(model, *sources(2), limit, beam_size, penalty,
                            constraints=[Constraints(positive=((5,),)), None])
        assert [hyp.tokens for hyp in mixed[1]] == [hyp.tokens for hyp in plain]
        assert [hyp.score for hyp in mixed[1]] == [hyp.score for hyp in plain]


@pytest.mark.parametrize("constraints", [
    Constraints(positive=((0, 1),), negative=((1,),)),  # contradicts itself
    Constraints(positive=((0, 1, 2, 4),)),  # longer than the limit leaves room for
], ids=["contradiction", "too-long"])
def test_impossible_constraints_give_the_unconstrained_hypotheses(constraints):
    model = random_decoder(0, 4)
    [hyps] = beam_search(model, *sources(1), torch.tensor([4]), 3, constraints=[constraints])
    [plain] = beam_search(model, *sources(1), torch.tensor([4]), 3)
    assert [hyp.tokens for hyp in hyps] == [hyp.tokens for hyp in plain]
    assert [hyp.score for hyp in hyps] == [hyp.score for hyp in plain]
    assert not any(hyp.constraints_met for hyp in hyps)


# --- random models ---

def random_search_model(make_transformer):
    return make_transformer(seed=0, tie_output=False, share_embeddings=False)


@pytest.mark.parametrize("penalty", [LengthPenalty("average"), LengthPenalty("gnmt", alpha=0.6, coverage=0.3),
                                     LengthPenalty("none")], ids=["average", "coverage", "none"])
def test_no_constraints_is_plain_beam_search(make_transformer, source_batch, penalty):
    model = random_search_model(make_transformer)
    _, src, src_mask = source_batch
    limit = max_lengths(src_mask, 1.5, 2)
    plain = beam_search(model, src, src_mask, limit, 4, penalty)
    mixed = beam_search(model, src, src_mask, limit, 4, penalty, constraints=[None, Constraints(), None])
    for ours, theirs in zip(mixed, plain):
        assert [hyp.tokens for hyp in ours] == [hyp.tokens for hyp in theirs]
        assert [hyp.score for hyp in ours] == [hyp.score for hyp in theirs]
    constrained = beam_search(model, src, src_mask, limit, 4, penalty,
                              constraints=[None, Constraints(positive=((9, 10),)), None])  # constrained search
    assert_meets(constrained[1], Constraints(positive=((9, 10),)))
    for index in (0, 2):
        assert [hyp.tokens for hyp in constrained[index]] == [hyp.tokens for hyp in plain[index]]
        assert [hyp.score for hyp in constrained[index]] == pytest.approx([hyp.score for hyp in plain[index]],
                                                                          abs=1e-5)


LINES = [Constraints(positive=((7, 8), (9,))), None, Constraints(negative=((4,), (5, 6)), forced=(10,)),
         Constraints(positive=((11, 11),), forced=(6, 7))]


def assert_meets(hyps, constraints: Constraints | None) -> None:
    assert hyps and all(hyp.constraints_met for hyp in hyps)
    for hyp in hyps:
        assert meets(hyp.tokens, constraints or Constraints()), hyp.tokens


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name", NAMES)
def test_constrained_search_meets_the_constraints_with_every_model(name, device):
    model = make_model(name, seed=3, device=device)
    sentences = [[4, 5, 6], [7, 8, 9, 10, 11, 4], [5, 9, 11, 6, 12], [6, 6, 7]]
    src, src_mask = encoded(sentences, device)
    limit = constrained_limits(max_lengths(src_mask, 1.0, 2), LINES, 60)
    found = beam_search(model, src, src_mask, limit, 3, LengthPenalty("average"), constraints=LINES)
    for index, (hyps, constraints) in enumerate(zip(found, LINES)):
        assert_meets(hyps, constraints)
        alone = beam_search(model, *encoded([sentences[index]], device), limit[index : index + 1], 3,
                            LengthPenalty("average"), constraints=[constraints])
        assert [hyp.tokens for hyp in hyps] == [hyp.tokens for hyp in alone[0]]


# --- text: phrases and prefixes with real SentencePiece models ---

WORDS = ("The Then There they went to Jerusalem Jerusalén Paul Peter Pablo and the city of God Holy Ghost said "
         "unto them Théophile über straße").split()


@pytest.fixture(scope="module", params=[("bpe", "identity"), ("unigram", "identity"), ("unigram", "nmt_nfkc"),
                                        ("bpe", "nmt_nfkc")], ids=lambda param: "-".join(param))
def subword(request):
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(3, 12))) for _ in range(400)]
    kind, normalization = request.param
    return train_subword(lines, DataConfig(subword=kind, vocab_size=120, normalization=normalization), 120)


def test_a_phrase_gets_the_pieces_it_has_inside_a_sentence(subword):
    encoder = ConstraintEncoder(subword)
    for phrase in ("Paul", "Jerusalén", "Holy Ghost", "Théophile", "über"):
        pieces = encoder.phrase(phrase)
        assert pieces and subword.decode([list(pieces)])[0].strip() == phrase
        for sentence in (f"and {phrase} went", f"{phrase} said", f"they went to {phrase}"):
            assert contains(subword.encode([sentence])[0], pieces), (phrase, sentence)
        assert encoder.phrase(f"  {phrase} ") == pieces


def test_completable_drops_moves_into_dead_ends():
    # three bytes: token 5 writes one, 6 two, 7 all three; from offset 1, 8 writes the other two (and 9 one, to
    # offset 2); from offset 2 nothing goes on
    kept = completable([([5, 6, 7], [1, 2, 3]), ([8, 9], [2, 1]), ([], [])])
    assert [(tokens.tolist(), written.tolist()) for tokens, written in kept] == [([5, 7], [1, 3]), ([8], [2]),
                                                                                 ([], [])]


def test_word_ends_of_a_subword_model(subword):
    ends = ConstraintEncoder(subword).word_ends
    processor = subword.processor
    for piece in ("▁Paul", "▁the", "s", ",", "▁", "ß"):
        if processor.piece_to_id(piece) == processor.unk_id():
            continue  # this model has no such piece
        index = processor.piece_to_id(piece)
        assert bool(ends.glued[index]) == (piece in ("s", "ß")), piece  # goes on with the word before it
        assert bool(ends.open[index]) == (piece not in (",", "▁")), piece  # a letter last
    assert not ends.glued[EOS] and not ends.open[EOS]


def test_split_prefix():
    assert split_prefix("I went to Th") == ("I went to", " ", "Th")
    assert split_prefix("I went ") == ("I went", " ", "")
    assert split_prefix("Th") == ("", "", "Th")
    assert split_prefix("  Th") == ("", "  ", "Th")
    assert split_prefix("a  b") == ("a", "  ", "b")


def test_piece_moves_agree_with_the_bytes_left(subword):
    table = PieceTable(subword)
    rest = b" Jer"
    tokens, written = table.moves(rest)
    assert tokens
    for token, count in zip(tokens, written):
        surface = subword.processor.id_to_piece(token).replace("▁", " ").encode()
        assert (surface == rest[:count] and count < len(rest)) or (surface.startswith(rest) and count == len(rest))


def quadratic_moves(table: PieceTable, rest: bytes) -> tuple[list[int], list[int]]:
    """PieceTable.moves as first written: every proper prefix of rest looked up, then the surfaces that start with
    it (the cube of a word's length over all its offsets)."""
    tokens, written = [], []
    for end in range(1, len(rest)):
        tokens.extend(table.by_surface.get(rest[:end], ()))
        written.extend([end] * len(table.by_surface.get(rest[:end], ())))
    for surface in sorted(table.by_surface):
        if surface.startswith(rest):
            tokens.extend(table.by_surface[surface])
            written.extend([len(rest)] * len(table.by_surface[surface]))
    return tokens, written


def test_piece_moves_equal_the_quadratic_lookups_on_random_words(subword):
    table = PieceTable(subword)
    pieces = st.one_of(st.sampled_from(sorted(table.by_surface)), st.binary(min_size=1, max_size=3))

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.lists(pieces, min_size=1, max_size=8).map(b"".join))
    def check(word: bytes):
        assert table.moves_through(word) == [quadratic_moves(table, word[offset:]) for offset in range(len(word))]

    check()


class CountingChildren(dict):
    """A trie node's children that count the lookups made through them."""

    lookups = 0

    def get(self, key, default=None):
        CountingChildren.lookups += 1
        return super().get(key, default)


def test_the_moves_through_a_64_kb_word_take_a_few_lookups_per_byte(subword):
    """Once cubic in the length of the prefix's last word (4 KB took 7.5 s): now a walk down the trie from each
    byte, no deeper than the longest piece."""
    table = PieceTable(subword)
    table.children = [CountingChildren(node) for node in table.children]
    word = "".join(random.Random(1).choices(WORDS, k=16_384)).encode()[:65_536]
    CountingChildren.lookups = 0
    moves = table.moves_through(word)
    longest = max(map(len, table.by_surface))
    assert len(moves) == len(word) and sum(map(len, (tokens for tokens, _ in moves))) > len(word) / longest
    assert CountingChildren.lookups <= len(word) * longest


TEXTS = {  # what a request may hold: many phrases, one long phrase or prefix, one long word, runs of spaces
    "many phrases": lambda n: {"positive": ["Paul went"] * n, "negative": ["the city"] * n},
    "long phrase": lambda n: {"positive": ["Paul went to Jerusalén " * n]},
    "long prefix": lambda n: {"prefix": "Then they went to Jerusalén " * n + "Th"},
    "long last word": lambda n: {"prefix": "Théophile" * n},
    "spaces": lambda n: {"positive": [" " * n + "Paul" + " " * n], "prefix": " " * n + "P"},
}


@pytest.mark.parametrize("family", TEXTS)
def test_encoding_constraints_takes_linear_time(family):
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(3, 12))) for _ in range(400)]
    encoder = ConstraintEncoder(train_subword(lines, DataConfig(subword="bpe", vocab_size=120), 120))
    assert_linear(lambda request: encoder.encode(**request), TEXTS[family], name=family)


@pytest.mark.parametrize("prefix", ["Th", "The", "Then they went to Jer", "Paul went ", "and the city of G", "Théo",
                                    "Jerusal", "Jerusalé"])
def test_a_prefix_that_ends_mid_word_starts_the_translation(subword, prefix, make_transformer):
    encoder = ConstraintEncoder(subword)
    vocab = subword.vocab_size
    model = make_transformer(src_vocab=vocab, tgt_vocab=vocab, seed=1, tie_output=False)
    constraints = encoder.encode(prefix=prefix)
    src, src_mask = encoded([[5, 6, 7, 8]], "cpu")
    limit = constrained_limits(max_lengths(src_mask, 1.5, 4), [constraints], 60)
    [hyps] = beam_search(model, src, src_mask, limit, 3, constraints=[constraints])
    assert_meets(hyps, constraints)
    for text in subword.decode([hyp.tokens for hyp in hyps]):
        if subword.settings["normalization"] == "identity":
            assert text.startswith(prefix), (prefix, text)
        else:  # NFKC rules write the prefix normalized and without its trailing space
            assert text.startswith(prefix.rstrip()), (prefix, text)
    complete = prefix.rstrip(" ") if prefix.endswith(" ") else prefix.rsplit(" ", 1)[0] if " " in prefix else ""
    assert list(constraints.forced) == (subword.encode([complete])[0] if complete else [])
