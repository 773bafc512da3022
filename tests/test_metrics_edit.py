"""Batched Levenshtein distance against rapidfuzz, its operation counts against rapidfuzz's alignment, and the
properties of a distance."""

from __future__ import annotations

import random

import pytest
import torch
from devices import device_params
from hypothesis import given, settings
from hypothesis import strategies as st
from metrics_corpus import edge_corpus, random_corpus
from rapidfuzz.distance import Levenshtein

from nmtkit.errors import NmtkitError
from nmtkit.metrics.bitparallel import myers, trace_counts
from nmtkit.metrics.edit import (
    DeviceEdit,
    EditCosts,
    levenshtein,
    strip_affix,
    weighted_levenshtein,
)
from nmtkit.metrics.ngrams import Ragged, char_tokens, hash_words

UNIT = EditCosts()
COSTS = [UNIT, EditCosts(1, 1, 2), EditCosts(2, 3, 4), EditCosts(3, 1, 1), EditCosts(1, 1, 0)]
TEXT = st.text(alphabet="abcé日 ", max_size=14)


def random_pairs(seed: int, count: int = 300) -> tuple[list[str], list[str]]:
    """Short strings over small alphabets (many tied alignments) and longer edited copies."""
    rng = random.Random(seed)
    refs, hyps = [], []
    for index in range(count):
        alphabet = rng.choice(["ab", "abc", "abcdefgh", "αβγ日"])
        ref = "".join(rng.choices(alphabet, k=rng.randint(0, 12 if index % 3 else 150)))
        hyp = list(ref)
        for _ in range(rng.randint(0, max(len(ref) // 4, 3))):
            position = rng.randint(0, len(hyp))
            operation = rng.random()
            if operation < 0.4:
                hyp[position:position + 1] = [rng.choice(alphabet)]  # substitute (or append at the end)
            elif operation < 0.7:
                del hyp[position:position + 1]
            else:
                hyp.insert(position, rng.choice(alphabet))
        refs.append(ref)
        hyps.append("".join(hyp) if index % 5 else "".join(rng.choices(alphabet, k=rng.randint(0, 12))))
    return refs, hyps


def rapidfuzz_counts(ref, hyp) -> tuple[int, int, int, int]:
    """Substitutions, deletions, insertions, hits of rapidfuzz's alignment, counted as jiwer counts them."""
    counts = {"replace": 0, "delete": 0, "insert": 0, "equal": 0}
    for tag, ref_start, ref_end, hyp_start, hyp_end in Levenshtein.opcodes(ref, hyp):
        counts[tag] += hyp_end - hyp_start if tag == "insert" else ref_end - ref_start
    return counts["replace"], counts["delete"], counts["insert"], counts["equal"]


def distances(refs, hyps, costs=UNIT, counts=False, device="cpu"):
    device = torch.device(device)
    return levenshtein(char_tokens(refs, device), char_tokens(hyps, device), costs, counts=counts)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("costs", COSTS)
def test_distances_match_rapidfuzz(costs, device):
    refs, hyps = random_pairs(seed=costs.substitution)
    weights = (costs.insertion, costs.deletion, costs.substitution)
    expected = [Levenshtein.distance(ref, hyp, weights=weights) for ref, hyp in zip(refs, hyps)]
    assert distances(refs, hyps, costs, device=device).distance.tolist() == expected
    assert distances(refs, hyps, costs, counts=True, device=device).distance.tolist() == expected


@pytest.mark.parametrize("device", device_params())
def test_token_distances_match_rapidfuzz(device):
    hypotheses, (references,) = random_corpus(seed=2, lines=80)
    refs, hyps = (Ragged.build(*hash_words(lines), torch.device(device)) for lines in (references, hypotheses))
    expected = [Levenshtein.distance(ref.split(), hyp.split()) for ref, hyp in zip(references, hypotheses)]
    assert levenshtein(refs, hyps).distance.tolist() == expected


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("seed", [0, 1])
def test_unit_cost_counts_follow_rapidfuzz_alignment(seed, device):
    refs, hyps = random_pairs(seed)
    result = distances(refs, hyps, counts=True, device=device)
    ours = list(zip(result.substitutions.tolist(), result.deletions.tolist(), result.insertions.tolist(),
                    result.hits.tolist()))
    assert ours == [rapidfuzz_counts(ref, hyp) for ref, hyp in zip(refs, hyps)]


@pytest.mark.parametrize("device", device_params())
def test_row_programme_and_bit_parallel_agree_on_unit_costs(device):
    refs, hyps = random_pairs(seed=4)
    ref_tokens, hyp_tokens = char_tokens(refs, torch.device(device)), char_tokens(hyps, torch.device(device))
    rows = torch.arange(len(refs), device=device)
    pairs = strip_affix(ref_tokens.padded(rows), ref_tokens.lengths, hyp_tokens.padded(rows), hyp_tokens.lengths)[:4]
    distance, found = weighted_levenshtein(*pairs, EditCosts(), counts=True)
    bit_distance, columns = myers(*pairs, record=True)
    assert torch.equal(distance, bit_distance)
    assert torch.equal(found, trace_counts(*pairs, columns))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("costs", COSTS)
def test_counts_add_up_for_any_costs(costs, device):
    refs, hyps = random_pairs(seed=6, count=120)
    result = distances(refs, hyps, costs, counts=True, device=device)
    weighted = (costs.substitution * result.substitutions + costs.deletion * result.deletions
                + costs.insertion * result.insertions)
    assert torch.equal(weighted, result.distance)
    assert (result.hits + result.substitutions + result.deletions).tolist() == [len(ref) for ref in refs]
    assert (result.hits + result.substitutions + result.insertions).tolist() == [len(hyp) for hyp in hyps]


@pytest.mark.parametrize("device", device_params())
def test_very_long_lines_and_edge_cases(device):
    hypotheses, references = edge_corpus()
    rng = random.Random(3)
    references.append("".join(rng.choices("abcdefgh ", k=3000)))
    hypotheses.append("".join(char if rng.random() > 0.1 else rng.choice("xyz") for char in references[-1]))
    result = distances(references, hypotheses, counts=True, device=device)
    assert result.distance.tolist() == [Levenshtein.distance(ref, hyp) for ref, hyp in zip(references, hypotheses)]
    ours = list(zip(result.substitutions.tolist(), result.deletions.tolist(), result.insertions.tolist(),
                    result.hits.tolist()))
    assert ours == [rapidfuzz_counts(ref, hyp) for ref, hyp in zip(references, hypotheses)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=12),
       st.sampled_from([EditCosts(), EditCosts(1, 1, 2), EditCosts(2, 2, 3)]))
def test_distance_properties(triples, costs):
    first, second, third = (list(column) for column in zip(*triples))
    forward = distances(first, second, costs).distance
    assert torch.equal(forward, distances(second, first, costs).distance)  # symmetric costs: ins == del
    assert (distances(first, first, costs).distance == 0).all()
    assert (distances(first, third, costs).distance <= forward + distances(second, third, costs).distance).all()


@pytest.mark.parametrize("device", device_params())
def test_edit_metric_reports_counts_over_words(device):
    metric = DeviceEdit([["a b c d", "x y"]], torch.device(device), EditCosts(1, 1, 2), characters=False)
    report = metric.report(metric.statistics(["a c d e", "x z"]))
    assert report["score"] == 4 and report["deletions"] == 2 and report["insertions"] == 2
    assert report["substitutions"] == 0 and report["hits"] == 4


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("costs", [UNIT, EditCosts(1, 1, 2)])
def test_chunks_of_lines_give_the_statistics_of_the_whole_corpus(costs, device):
    refs, hyps = random_pairs(seed=8, count=100)
    device = torch.device(device)
    whole = DeviceEdit([refs], device, costs).statistics(hyps)
    assert whole[:, 0].tolist() == [Levenshtein.distance(ref, hyp, weights=(costs.insertion, costs.deletion,
                                                                             costs.substitution))
                                    for ref, hyp in zip(refs, hyps)]
    for chunk in (1, 100, 1000):
        assert torch.equal(DeviceEdit([refs], device, costs, chunk=chunk).statistics(hyps), whole)


def test_bad_costs_are_user_errors():
    assert EditCosts.parse("1,1,2") == EditCosts(1, 1, 2)
    with pytest.raises(NmtkitError, match="three integers"):
        EditCosts.parse("1,2")
    with pytest.raises(NmtkitError, match="negative"):
        EditCosts(-1, 1, 1)
