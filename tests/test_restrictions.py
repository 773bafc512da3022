"""Tests for nmtkit/decoding/restriction.py (one shape for what a search may write), its composition in
nmtkit/decoding/search.py, and the restriction a request asks for by field: nmtkit/decoding/no_repeat.py."""

from __future__ import annotations

import json
import random

import pytest
import torch

from nmtkit.decoding.builtin_restrictions import RESTRICTIONS
from nmtkit.decoding.constraint_tracker import ConstraintTracker
from nmtkit.decoding.constraints import Constraints
from nmtkit.decoding.inputs import parse_jsonl, parse_record
from nmtkit.decoding.no_repeat import NoRepeatNgram
from nmtkit.decoding.restriction import Restrictions, requested
from nmtkit.decoding.search import beam_search, max_lengths, restrictions_for


def ngrams(tokens: list[int], size: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[start:start + size]) for start in range(len(tokens) - size + 1)]


def banned_by_brute_force(history: list[int], size: int) -> set[int]:
    """The tokens that would end an n-gram `history` holds already."""
    tail = tuple(history[len(history) - size + 1:]) if size > 1 else ()
    return {gram[-1] for gram in ngrams(history, size) if gram[:-1] == tail}


@pytest.mark.parametrize("seed", range(30))
def test_no_repeat_bans_exactly_what_ends_a_written_ngram(seed):
    rng = random.Random(seed)
    rows, vocab = 5, 7
    sizes = [rng.randint(0, 4) for _ in range(3)]
    sentences = torch.tensor([rng.randrange(3) for _ in range(rows)])
    length = rng.randint(0, 9)
    state = torch.tensor([[rng.randrange(4, vocab) for _ in range(length)] for _ in range(rows)],
                         dtype=torch.long).view(rows, length)
    steps_left = torch.tensor([rng.choice([0, 1, 5]) for _ in range(rows)])
    restriction = NoRepeatNgram.for_lines([size or None for size in sizes], torch.device("cpu"))
    scores = torch.zeros(rows, vocab)
    restriction.restrict(scores, sentences, state, steps_left)
    for row in range(rows):
        size = sizes[int(sentences[row])]
        expected = set() if size == 0 or int(steps_left[row]) <= 0 else banned_by_brute_force(
            state[row].tolist(), size)
        assert set(torch.isinf(scores[row]).nonzero().flatten().tolist()) == expected, (row, size)


def test_beam_search_under_no_repeat_writes_no_ngram_twice(make_transformer, source_batch):
    _, src, src_mask = source_batch
    model = make_transformer(seed=3)
    limit = torch.full((3,), 24)
    plain = beam_search(model, src, src_mask, limit, 4)
    lines = [Constraints(requested=(("no_repeat_ngram", size),)) for size in (1, 2, 3)]
    found = beam_search(model, src, src_mask, limit, 4, constraints=lines)
    assert any(len(set(ngrams(hyp.tokens, 2))) < len(ngrams(hyp.tokens, 2)) for hyps in plain for hyp in hyps), \
        "the random model must repeat itself, or this test shows nothing"
    for size, hyps in zip((1, 2, 3), found):
        assert hyps
        for hyp in hyps:
            assert len(set(ngrams(hyp.tokens, size))) == len(ngrams(hyp.tokens, size)), (size, hyp.tokens)


def test_a_restriction_stays_with_its_own_line(make_transformer, source_batch):
    """Lines that ask for nothing are searched as they are alone, beside a line that asks for a restriction."""
    _, src, src_mask = source_batch
    model = make_transformer(seed=3)
    limit = torch.full((3,), 20)
    alone = beam_search(model, src, src_mask, limit, 3)
    mixed = beam_search(model, src, src_mask, limit, 3,
                        constraints=[None, Constraints(requested=(("no_repeat_ngram", 1),)), Constraints()])
    for index in (0, 2):
        assert [hyp.tokens for hyp in mixed[index]] == [hyp.tokens for hyp in alone[index]]


def test_restrictions_compose_the_union_of_their_bans():
    first, second = NoRepeatNgram(torch.tensor([1])), NoRepeatNgram(torch.tensor([1]))
    composed = Restrictions([first, second])
    states = (torch.tensor([[4, 5]]), torch.tensor([[6]]))
    scores = torch.zeros(1, 9)
    composed.restrict(scores, torch.tensor([0]), states, torch.tensor([3]))
    assert torch.isinf(scores[0]).nonzero().flatten().tolist() == [4, 5, 6]
    followed = composed.follow(states, torch.tensor([0, 0]), torch.tensor([7, 8]), torch.tensor([0, 0]))
    assert [state.tolist() for state in followed] == [[[4, 5, 7], [4, 5, 8]], [[6, 7], [6, 8]]]


def test_a_search_takes_one_ranking_restriction():
    tracker = ConstraintTracker([Constraints(positive=((5,),))], torch.device("cpu"))
    with pytest.raises(ValueError, match="at most one"):
        Restrictions([tracker, ConstraintTracker([Constraints(positive=((6,),))], torch.device("cpu"))])
    assert Restrictions([NoRepeatNgram(torch.tensor([2])), tracker]).ranker == 1


def test_restrictions_for_builds_only_what_lines_ask_for():
    device = torch.device("cpu")
    assert restrictions_for(None, None, device) is None
    assert restrictions_for([None, Constraints()], None, device) is None
    built = restrictions_for([Constraints(requested=(("no_repeat_ngram", 2),)), None], None, device)
    assert [type(part) for part in built.parts] == [NoRepeatNgram] and built.ranker is None
    both = restrictions_for([Constraints(positive=((5,),), requested=(("no_repeat_ngram", 2),))], None, device)
    assert [type(part) for part in both.parts] == [ConstraintTracker, NoRepeatNgram]
    assert [part.sizes.tolist() for part in requested([None, Constraints(requested=(("no_repeat_ngram", 3),))],
                                                      device)] == [[0, 3]]


def test_taking_sentences_keeps_their_restriction():
    restriction = NoRepeatNgram(torch.tensor([1, 2, 3]))
    assert restriction.take(torch.tensor([2, 0])).sizes.tolist() == [3, 1]
    composed = Restrictions([restriction, ConstraintTracker([Constraints(positive=((5,),)), None, None],
                                                            torch.device("cpu"))])
    taken = composed.take(torch.tensor([0]))
    assert taken.ranker == 1 and taken.parts[1].lengths.tolist() == [[1]]


# --- the request field ---


def test_the_field_is_a_request_key():
    assert "no_repeat_ngram" in RESTRICTIONS
    request = parse_record({"text": "a", "no_repeat_ngram": 3})
    assert request.restrictions == (("no_repeat_ngram", 3),) and request.constrained
    assert parse_record({"text": "a", "no_repeat_ngram": None}).restrictions == ()
    assert not parse_record({"text": "a"}).constrained


@pytest.mark.parametrize("value", [0, -1, True, False, 2.0, "3", [3], {"n": 3}])
def test_hostile_field_values_are_one_line_errors(value):
    with pytest.raises(ValueError, match='"no_repeat_ngram": must be a whole number >= 1'):
        parse_jsonl(json.dumps({"text": "a", "no_repeat_ngram": value}))


def test_an_unknown_key_names_the_registered_ones():
    with pytest.raises(ValueError, match="no_repeat_ngram"):
        parse_record({"text": "a", "no_repeat": 3})


def test_a_huge_size_restricts_nothing_and_costs_nothing(make_transformer, source_batch):
    _, src, src_mask = source_batch
    model = make_transformer(seed=3)
    limit = max_lengths(src_mask, 0.0, 12)
    plain = beam_search(model, src, src_mask, limit, 3)
    huge = parse_record({"text": "a", "no_repeat_ngram": 10**30}).restrictions
    found = beam_search(model, src, src_mask, limit, 3, constraints=[Constraints(requested=huge)] * 3)
    assert [[hyp.tokens for hyp in hyps] for hyps in found] == [[hyp.tokens for hyp in hyps] for hyps in plain]


# --- through the command line ---


def test_no_repeat_through_the_command_line(tmp_path):
    from cli_runner import assert_error, nmtkit
    from test_inputs import CPU, write_model

    model = write_model(tmp_path / "word.pt", "word", 30)  # an untrained model on words: it repeats itself
    records = [{"text": "uno dos tres cuatro cinco seis", "no_repeat_ngram": 1}, {"text": "uno dos tres cuatro"},
               {"text": "siete ocho", "no_repeat_ngram": 2, "constraints": ["Paul"]}]
    result = nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl", "--max-len-b", "30",
                    stdin="".join(json.dumps(record) + "\n" for record in records))
    assert result.exit_code == 0, result.stderr
    first, second, third = result.stdout.split("\n")[:3]
    assert len(first.split()) == len(set(first.split()))
    assert len(set(ngrams(third.split(), 2))) == len(ngrams(third.split(), 2)) and "Paul" in third.split()
    plain = nmtkit("translate", *CPU, "-m", model, "--max-len-b", "30",
                   stdin="uno dos tres cuatro\nuno dos tres cuatro cinco seis\n").stdout.split("\n")
    assert second == plain[0]
    assert len(plain[1].split()) > len(set(plain[1].split()))  # unrestricted, the model repeats itself
    assert_error(nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl", "--sample",
                        stdin='{"text": "uno", "no_repeat_ngram": 2}\n'), "line 1", "beam search")
    assert_error(nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl",
                        stdin='{"text": "uno", "no_repeat_ngram": "2"}\n'), "<stdin>:1:", "no_repeat_ngram")
