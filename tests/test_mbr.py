"""MBR decoding (nmtkit/decoding/mbr.py, nmtkit/translate/mbr_search.py): on fixed candidates it picks the one of
highest expected utility, as a brute-force sacrebleu computation in float64 finds it; utilities by name; epsilon
sampling; bad settings are one-line errors; `translate --mbr` end to end on a tiny model of fixed random weights."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import sacrebleu
import torch
from cli_runner import assert_error, nmtkit
from devices import device_params
from pair_models import save_model, subword

from nmtkit.config.sections import DecodeConfig
from nmtkit.decoding.mbr import check_utility, distinct, mbr_choices, pair_utilities, utility_matrices
from nmtkit.decoding.search import Sampler
from nmtkit.errors import NmtkitError
from nmtkit.translate.ctranslate2_engine import search_options

WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez".split()


def sacrebleu_utility(name: str, hypothesis: str, reference: str) -> float:
    """The utility as sacrebleu's own sentence scores give it (a float64)."""
    if name == "chrf":
        return sacrebleu.sentence_chrf(hypothesis, [reference]).score
    if name == "chrf++":
        return sacrebleu.sentence_chrf(hypothesis, [reference], word_order=2).score
    if name == "bleu":
        return sacrebleu.sentence_bleu(hypothesis, [reference]).score
    return -sacrebleu.sentence_ter(hypothesis, [reference]).score


def brute_force_expected(name: str, candidates: list[str]) -> list[float]:
    """E(y_i) = mean over j != i (by position, duplicates included) of u(y_i, y_j), one pair at a time."""
    count = len(candidates)
    return [sum(sacrebleu_utility(name, hyp, ref) for j, ref in enumerate(candidates) if j != i) / (count - 1)
            for i, hyp in enumerate(candidates)]


def random_candidates(rng: random.Random, count: int) -> list[str]:
    """Variants of one sentence, with repeats (as samples have them) and the odd empty or unrelated one."""
    base = rng.choices(WORDS, k=rng.randint(3, 8))
    lines = []
    for _ in range(count):
        words = [rng.choice(WORDS) if rng.random() < 0.3 else word for word in base]
        lines.append(" ".join(words[: rng.randint(1, len(words))]) if rng.random() > 0.05 else "")
    return [rng.choice(lines[:index]) if index and rng.random() < 0.3 else line for index, line in enumerate(lines)]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("utility", ["chrf", "chrf++", "bleu", "ter"])
def test_mbr_picks_the_highest_expected_utility_of_fixed_candidates(utility: str, device: str):
    rng = random.Random(utility)
    lines = [random_candidates(rng, rng.randint(2, 9)) for _ in range(12)]
    choices = mbr_choices(lines, utility, torch.device(device))
    for candidates, choice in zip(lines, choices):
        expected = brute_force_expected(utility, candidates)
        best = max(expected)
        assert expected[choice] == pytest.approx(best, abs=1e-9), (candidates, expected, choice)
        first_best = min(index for index, value in enumerate(expected) if value >= best - 1e-9)
        assert choice == first_best  # the earliest of equals (a beam's best; the first copy of a repeated sample)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("utility", ["chrf", "bleu", "ter"])
def test_utility_matrices_are_sacrebleus_sentence_scores(utility: str, device: str):
    candidates = [["uno dos tres cuatro", "uno dos tres", "diez nueve ocho", "uno dos tres cuatro"]]
    [matrix] = utility_matrices(utility, candidates, torch.device(device))
    texts = distinct(candidates[0])[0]
    assert matrix.dtype == torch.float64 and matrix.shape == (3, 3)
    for i, hyp in enumerate(texts):
        for j, ref in enumerate(texts):
            assert float(matrix[i, j]) == pytest.approx(sacrebleu_utility(utility, hyp, ref), abs=1e-9)


@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_pair_utilities_equal_sacrebleus_sentence_scores_on_random_pairs(utility: str):
    rng = random.Random(7)
    pairs = [(" ".join(rng.choices(WORDS[: rng.randint(2, 10)], k=rng.randint(0, 9))),
              " ".join(rng.choices(WORDS[: rng.randint(2, 10)], k=rng.randint(0, 9)))) for _ in range(400)]
    scores = pair_utilities(utility, [hyp for hyp, _ in pairs], [ref for _, ref in pairs], torch.device("cpu"))
    for (hyp, ref), score in zip(pairs, scores.tolist()):
        assert score == pytest.approx(sacrebleu_utility(utility, hyp, ref), abs=1e-9), (hyp, ref)


def test_mbr_prefers_the_consensus_over_the_first_candidate():
    candidates = [["siete ocho nueve", "uno dos tres cuatro", "uno dos tres cinco", "uno dos tres cuatro"]]
    for utility in ("chrf", "bleu", "ter"):
        assert mbr_choices(candidates, utility) == [1]


def test_the_check_runs_between_groups_of_lines_and_stops_the_work_by_raising():
    lines = [["uno dos", "uno tres"]] * 130
    calls = []
    assert mbr_choices(lines, "ter", check=lambda: calls.append(1)) == [0] * 130
    assert len(calls) == 3  # groups of 64 lines

    def over_budget():
        raise TimeoutError

    with pytest.raises(TimeoutError):
        mbr_choices(lines, "chrf", check=over_budget)


def test_one_candidate_and_no_line():
    assert mbr_choices([["uno"], []]) == [0, 0]
    assert mbr_choices([]) == []


def test_unknown_utility_is_one_line():
    with pytest.raises(NmtkitError, match="unknown MBR utility 'comet'; choose from chrf"):
        check_utility("comet")
    with pytest.raises(NmtkitError, match="mbr_utility"):
        from nmtkit.config.values import from_dict
        from_dict(DecodeConfig, {"mbr": 4, "mbr_utility": "comet"}, "decode.")


@pytest.mark.parametrize(("settings", "message"), [
    ({"mbr": 1}, "at least 2"),
    ({"mbr": 4, "sample": True}, "does not combine with --sample or --nbest"),
    ({"mbr": 4, "nbest": 2}, "does not combine with --sample or --nbest"),
    ({"epsilon": 0.02}, "--epsilon restricts sampling"),
    ({"mbr": 4, "mbr_candidates": "beam", "epsilon": 0.02}, "--epsilon restricts sampling"),
])
def test_contradicting_mbr_settings_are_refused(settings: dict, message: str):
    with pytest.raises(NmtkitError, match=message):
        DecodeConfig(**settings)


def test_ctranslate2_refuses_epsilon():
    with pytest.raises(NmtkitError, match="CTranslate2 has no epsilon sampling"):
        search_options(DecodeConfig(sample=True, epsilon=0.02))


def test_epsilon_sampling_draws_only_tokens_of_probability_epsilon_or_more():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.04, 0.01], [0.01, 0.01, 0.01, 0.01, 0.96], [0.3, 0.2, 0.2, 0.2, 0.1]])
    sampler = Sampler(temperature=2.0, generator=torch.Generator().manual_seed(0), epsilon=0.05)
    drawn = torch.stack([sampler(probs.log()) for _ in range(400)])  # (400, 3)
    assert set(drawn[:, 0].tolist()) == {0, 1, 2}  # 0.04 and 0.01 are below epsilon
    assert set(drawn[:, 1].tolist()) == {4}
    assert set(drawn[:, 2].tolist()) == {0, 1, 2, 3, 4}
    tiny = Sampler(generator=torch.Generator().manual_seed(0), epsilon=0.5)
    assert tiny(torch.tensor([[0.3, 0.3, 0.4]]).log()).tolist() == [2]  # the best token stays, even below epsilon


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mbr")
    return save_model(root / "model.pt", subword(), seed=4)


def translate_lines(model: Path, lines: list[str], *options: str) -> list[str]:
    result = nmtkit("translate", "-m", str(model), "--device", "cpu", "--threads", "1", "--max-len-b", "6", *options,
                    stdin="".join(line + "\n" for line in lines))
    assert result.exit_code == 0, result.stderr
    return result.stdout.split("\n")[:-1]


LINES = ["uno dos tres", "", "cuatro cinco", "seis siete ocho", "nueve diez", "once doce trece catorce"]


def test_translate_mbr_beam_outputs_the_mbr_choice_of_the_beams_nbest(model: Path):
    nbest = translate_lines(model, LINES, "--beam", "4", "--nbest", "4")
    candidates: list[list[str]] = [[] for _ in LINES]
    for line in nbest:
        index, text, _ = line.split(" ||| ")
        candidates[int(index)].append(text)
    chosen = translate_lines(model, LINES, "--mbr", "4")  # beam candidates by default
    assert len(chosen) == len(LINES) and chosen[1] == ""
    for row, text in enumerate(chosen):
        if LINES[row]:
            assert text == candidates[row][mbr_choices([candidates[row]])[0]]


def test_translate_mbr_sample_gives_a_line_per_line_and_repeats_with_its_seed(model: Path):
    options = ("--mbr", "5", "--mbr-candidates", "sample", "--epsilon", "0.02", "--mbr-utility", "bleu")
    first = translate_lines(model, LINES, *options)
    assert len(first) == len(LINES) and first[1] == ""
    assert translate_lines(model, LINES, *options) == first


@pytest.mark.parametrize(("options", "needles"), [
    (("--mbr", "4", "--mbr-utility", "comet"), ("mbr_utility",)),
    (("--mbr", "1"), ("--mbr N",)),
    (("--mbr", "-3"), ("mbr",)),
    (("--mbr", "4", "--sample"), ("--mbr",)),
    (("--epsilon", "0.5"), ("--epsilon",)),
    (("--mbr", "4", "--epsilon", "0.5"), ("--epsilon restricts sampling",)),
    (("--epsilon", "1.5", "--sample"), ("epsilon",)),
])
def test_bad_mbr_options_are_one_line_errors(model: Path, options: tuple[str, ...], needles: tuple[str, ...]):
    result = nmtkit("translate", "-m", str(model), "--device", "cpu", *options, stdin="uno dos\n")
    assert_error(result, *needles)


def test_sampled_candidates_refuse_constraints(model: Path):
    result = nmtkit("translate", "-m", str(model), "--device", "cpu", "--mbr", "4", "--mbr-candidates", "sample",
                    "--input-format", "tsv",
                    stdin="uno dos\ttres\n")
    assert_error(result, "constraints, prefixes and restrictions need beam search")
