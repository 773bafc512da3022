"""Tests for nmtkit/scoring/best_of.py (`nmtkit best-of`): each line's hypothesis closest to its reference, against
sacrebleu's own sentence scores; the n-best file's hostile forms; through the command line after translate --nbest."""

from __future__ import annotations

import json
import random

import pytest
import sacrebleu
import torch
from cli_runner import assert_error, nmtkit

from nmtkit.errors import NmtkitError
from nmtkit.scoring.best_of import best_of, read_nbest, read_scored_nbest

WORDS = "the a cat dog sat ran on under mat house and".split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(1, 8)))


@pytest.mark.parametrize("seed", range(5))
def test_the_choice_is_sacrebleus_best_sentence_score(seed):
    rng = random.Random(seed)
    references = [sentence(rng) for _ in range(20)]
    nbest = [[sentence(rng) for _ in range(rng.randint(1, 6))] for _ in references]
    for metric, score, better in [("chrf", lambda h, r: sacrebleu.sentence_chrf(h, [r]).score, max),
                                  ("bleu", lambda h, r: sacrebleu.sentence_bleu(h, [r]).score, max),
                                  ("ter", lambda h, r: sacrebleu.sentence_ter(h, [r]).score, min)]:
        choices = best_of(nbest, references, metric, torch.device("cpu"))
        for hyps, ref, choice in zip(nbest, references, choices):
            scores = [score(hyp, ref) for hyp in hyps]
            assert choice == scores.index(better(scores)), (metric, hyps, ref)


def test_ties_go_to_the_earlier_hypothesis():
    assert best_of([["a b", "a b", "c"], ["x", "y"]], ["a b", "z"]) == [0, 0]


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "needle"), [
    ("0 ||| a\n", ":1: not an n-best line"), ("x ||| a ||| 1\n", ":1: not an n-best line"),
    ("\u0661 ||| a ||| 1\n", ":1: not an n-best line"), ("0 ||| a ||| 1\n2 ||| b ||| 1\n", ":2: line number 2"),
    ("1 ||| a ||| 1\n0 ||| b ||| 1\n", ":2: line number 0 out of order"),
    ("0 ||| a ||| 1\n", "no hypothesis for line 1"),
    ("", "no hypothesis for line 0"), ("99999999999999999999999 ||| a ||| 1\n", "beyond the 2 references")])
def test_a_bad_nbest_file_is_an_error_naming_the_line(tmp_path, text, needle):
    with pytest.raises(NmtkitError, match=needle):
        read_nbest(write(tmp_path / "nbest", text), 2)


def test_a_hypothesis_holding_the_separator_comes_back_whole(tmp_path):
    nbest = write(tmp_path / "nbest", "0 ||| a ||| b ||| -1.5\n1 |||  ||| -0.1\n1 ||| a ||| ||| -2\n")
    assert read_nbest(nbest, 2) == [["a ||| b"], ["", "a |||"]]


def test_through_the_command_line(tmp_path):
    from test_inputs import CPU, write_model

    model = write_model(tmp_path / "word.pt", "word", 30)
    source = write(tmp_path / "src", "uno dos\ntres\n\ncuatro cinco seis\n")
    ref = write(tmp_path / "ref", "the then\nPaul\n\nthere the\n")
    result = nmtkit("translate", *CPU, "-m", model, "--nbest", "4", "--beam", "4", "--max-len-b", "6",
                    "--input", str(source))
    assert result.exit_code == 0, result.stderr
    nbest = write(tmp_path / "nbest", result.stdout)
    out = tmp_path / "best"
    result = nmtkit("best-of", "--nbest", str(nbest), "--ref", str(ref), "--output", str(out), "--device", "cpu")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    lines = out.read_text(encoding="utf-8").split("\n")
    assert summary["lines"] == 4 and len(lines) == 5 and lines[-1] == ""
    parsed = read_nbest(nbest, 4)
    assert all(line in hyps for line, hyps in zip(lines, parsed))
    assert nmtkit("best-of", "--nbest", str(nbest), "--ref", str(ref), "--device", "cpu").stdout == "\n".join(lines)
    scored = nmtkit("best-of", "--nbest", str(nbest), "--ref", str(ref), "--scores").stdout.split("\n")[:-1]
    hyps, scores = read_scored_nbest(nbest, 4)
    assert scored == [f"{line} ||| {line_scores[hyps_.index(line)]}" for line, hyps_, line_scores
                      in zip(lines, hyps, scores)]
    assert_error(nmtkit("best-of", "--nbest", str(nbest), "--ref", str(ref), "--output", str(ref)), "--output",
                 "--ref")
    assert_error(nmtkit("best-of", "--nbest", str(nbest), "--ref", str(source), "--metric", "comet"),
                 "unknown metric 'comet'")
    short = write(tmp_path / "short", "the then\n")
    assert_error(nmtkit("best-of", "--nbest", str(nbest), "--ref", str(short)), "beyond the 1 references")


NBEST_FAMILIES = {
    "separators": lambda n: "0 ||| " + " ||| ".join(["a"] * n) + " ||| -1\n",
    "many hypotheses": lambda n: "".join(f"0 ||| a b {i} ||| -1\n" for i in range(n)),
    "long hypothesis": lambda n: "0 ||| " + "x" * n + " ||| -1\n",
    "digits": lambda n: "0" * n + " ||| a ||| -1\n",
}


@pytest.mark.parametrize("family", sorted(NBEST_FAMILIES))
def test_reading_an_nbest_file_takes_linear_time(tmp_path, family):
    from scaling import assert_linear

    def read(text: str) -> None:
        path = tmp_path / "nbest"
        path.write_text(text, encoding="utf-8")
        try:
            read_nbest(path, 1)
        except NmtkitError:
            pass

    assert_linear(read, NBEST_FAMILIES[family], name=family)


def test_an_nbest_line_over_the_cap_is_an_error_read_no_further(tmp_path):
    path = write(tmp_path / "nbest", "0 ||| " + "x" * (2 << 20) + " ||| -1\n")
    with pytest.raises(NmtkitError, match=":1: line longer than"):
        read_nbest(path, 1)


def test_hypotheses_come_back_byte_for_byte(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=30)

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.lists(text, min_size=1, max_size=3), min_size=1, max_size=4))
    def round_trip(nbest):
        lines = "".join(f"{i} ||| {hyp} ||| -1.0\n" for i, hyps in enumerate(nbest) for hyp in hyps)
        path = tmp_path / "nbest"
        path.write_bytes(lines.encode("utf-8"))
        assert read_nbest(path, len(nbest)) == nbest

    round_trip()
