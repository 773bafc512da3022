"""Sentence confidence (nmtkit/decoding/confidence.py, rescoring.py, `translate --confidence`): the estimators on fixed
token log-probabilities, the teacher-forced log-probabilities against the search's own, the same confidence for a
line alone and in any batch, and bad estimator names as one-line errors."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import assert_error, nmtkit
from pair_models import save_model, subword

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.dataset import encode_sources
from nmtkit.data.subword import train_subword
from nmtkit.decoding.confidence import ESTIMATORS, confidences, format_confidences, parse_estimators, quantile
from nmtkit.decoding.inputs import Request
from nmtkit.decoding.rescoring import token_log_probs
from nmtkit.decoding.search import greedy_search, max_lengths
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model
from nmtkit.translate import Translator
from nmtkit.translate.torch_engine import TorchEngine

WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez".split()


@pytest.mark.parametrize("values", [[-0.1], [-0.5, -2.0], [-0.01, -3.5, -0.2, -0.7, -1.1, -0.05, -6.0]])
def test_estimators_of_fixed_log_probs(values: list[float]):
    found = confidences(values, list(ESTIMATORS))
    assert found["mean"] == pytest.approx(float(np.mean(values)))
    assert found["min"] == min(values)
    assert found["q10"] == pytest.approx(float(np.quantile(values, 0.1)))
    assert found["prob"] == pytest.approx(float(np.mean(np.exp(values))))
    assert found["min"] <= found["q10"] <= found["mean"]


def test_quantile_matches_numpy_on_random_lists():
    rng = random.Random(0)
    for _ in range(50):
        values = [rng.uniform(-9, 0) for _ in range(rng.randint(1, 30))]
        share = rng.random()
        assert quantile(values, share) == pytest.approx(float(np.quantile(values, share)))


def test_an_untranslated_line_is_certain_and_the_format_names_each_estimator():
    assert confidences([], ["mean", "prob"]) == {"mean": 0.0, "prob": 1.0}
    assert format_confidences({"mean": -0.31274, "min": -2.0}) == "mean=-0.3127 min=-2.0000"


@pytest.mark.parametrize("text", ["", " , ", "mean,median", "MIN"])
def test_bad_estimator_names_are_one_line(text: str):
    with pytest.raises(NmtkitError, match="--confidence: .*choose from mean, min, q10, prob"):
        parse_estimators(text)


@pytest.fixture(scope="module")
def loaded() -> LoadedModel:
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(80)]
    vocab = train_subword(lines, DataConfig(subword="word", vocab_size=20), 20)
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 40}})
    torch.manual_seed(0)
    model = build_model(config.model, vocab.vocab_size, vocab.vocab_size, True).eval()
    return LoadedModel(config, model, vocab, vocab)


def random_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(0, 10))) for _ in range(count)]


def test_teacher_forced_log_probs_are_the_searchs_own(loaded: LoadedModel):
    sources = [ids for ids in loaded.src_subword.encode(random_lines(12, 1)) if ids]
    src, src_mask = encode_sources(sources)
    found = greedy_search(loaded.model, src, src_mask, max_lengths(src_mask, 1.0, 4))
    forced = token_log_probs(loaded.model, sources, [hyp.tokens for hyp in found], torch.device("cpu"), 50)
    for hyp, values in zip(found, forced):
        assert len(values) == len(hyp.tokens) + 1
        assert math.fsum(values) == pytest.approx(hyp.log_prob, abs=1e-4)


def test_confidence_of_a_line_is_the_same_alone_and_in_any_batch(loaded: LoadedModel):
    lines = random_lines(30, 2)
    translator = Translator(TorchEngine(loaded, DecodeConfig(beam=3, max_len_b=5, batch_tokens=60),
                                        torch.device("cpu")))
    names = list(ESTIMATORS)
    together, rated = translator.translate_confident([Request(line) for line in lines], names)
    for line, hyps, confidence in zip(lines, together, rated):
        alone, [alone_rated] = translator.translate_confident([Request(line)], names)
        assert alone[0][0][0] == hyps[0][0]
        for name in names:
            assert alone_rated[name] == pytest.approx(confidence[name], abs=1e-5)
    shuffled = list(range(len(lines)))
    random.Random(3).shuffle(shuffled)
    _, reordered = translator.translate_confident([Request(lines[row]) for row in shuffled], names)
    for position, row in enumerate(shuffled):
        assert reordered[position]["min"] == pytest.approx(rated[row]["min"], abs=1e-5)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_model(tmp_path_factory.mktemp("confidence") / "model.pt", subword(), seed=5)


def test_translate_confidence_appends_the_estimators_to_each_line(model: Path):
    lines = ["uno dos tres", "", "cuatro cinco", "nueve diez once"]
    result = nmtkit("translate", "-m", str(model), "--device", "cpu", "--threads", "1", "--max-len-b", "5",
                    "--scores", "--confidence", "mean,min", stdin="".join(line + "\n" for line in lines))
    assert result.exit_code == 0, result.stderr
    rows = result.stdout.split("\n")[:-1]
    assert len(rows) == len(lines)
    for row in rows:
        _, score, rated = row.split(" ||| ")
        mean, low = (float(field.split("=")[1]) for field in rated.split())
        assert rated.startswith("mean=") and " min=" in rated and low <= mean <= 0
        if score != "0.0000":  # beam search's score (average length penalty) is the mean log-probability
            assert mean == pytest.approx(float(score), abs=2e-4)


@pytest.mark.parametrize(("options", "needles"), [
    (("--confidence", "median"), ("--confidence", "median")),
    (("--confidence", "mean", "--nbest", "2"), ("--confidence", "--nbest")),
    (("--confidence", "mean", "--alignment"), ("--confidence", "--alignment")),
])
def test_bad_confidence_options_are_one_line_errors(model: Path, options: tuple[str, ...], needles: tuple[str, ...]):
    assert_error(nmtkit("translate", "-m", str(model), "--device", "cpu", *options, stdin="uno dos\n"), *needles)


def test_an_exported_model_rates_and_chooses_as_its_checkpoint(model: Path, tmp_path: Path):
    """CTranslate2's teacher-forced log-probabilities (`score_batch`) give the checkpoint's confidence, and its MBR
    over beam candidates picks what the checkpoint's does (the same n-best, the same utilities)."""
    from nmtkit.export.command import export_model

    export_model(model, tmp_path / "ct2")
    lines = ["uno dos tres", "cuatro cinco", "seis siete ocho nueve", ""]
    requests = [Request(line) for line in lines]
    results = {}
    for path in (model, tmp_path / "ct2"):
        translator = Translator.load(path, device="cpu", threads=1, max_len_b=5)
        texts, rated = translator.translate_confident(requests, ["mean", "min"])
        chosen = translator.with_decode(mbr=3, mbr_candidates="beam").translate(lines)
        results[path.suffix] = [hyps[0][0] for hyps in texts], rated, chosen
    (pt_texts, pt_rated, pt_chosen), (ct_texts, ct_rated, ct_chosen) = results[".pt"], results[""]
    sampled = Translator.load(tmp_path / "ct2", device="cpu", threads=1, max_len_b=5, mbr=3, mbr_candidates="sample")
    assert len(sampled.translate(lines)) == len(lines) and sampled.translate([""]) == [""]
    with pytest.raises(NmtkitError, match="CTranslate2 has no epsilon sampling"):
        Translator.load(tmp_path / "ct2", device="cpu", mbr=3, mbr_candidates="sample", epsilon=0.02)
    assert ct_texts == pt_texts and ct_chosen == pt_chosen
    for ours, theirs in zip(pt_rated, ct_rated):
        assert theirs["mean"] == pytest.approx(ours["mean"], abs=1e-4)
        assert theirs["min"] == pytest.approx(ours["min"], abs=1e-4)
