"""Batched, length-sorted, chunked translation returns exactly what line-by-line translation returns."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from nmtkit.checkpoint.payload import LoadedModel, make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.subword import train_subword
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model
from nmtkit.runtime.precision import decoding_timings
from nmtkit.translate import Translator, format_hypotheses, translate_stream
from nmtkit.translate.torch_engine import TorchEngine

WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez".split()


@pytest.fixture(scope="module")
def loaded() -> LoadedModel:
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(80)]
    subword = train_subword(lines, DataConfig(subword="word", vocab_size=20), 20)
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 40}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    return LoadedModel(config, model, subword, subword)


def shuffled_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(0, 12))) for _ in range(count)]


@pytest.mark.parametrize("beam", [1, 3])
def test_batched_translation_equals_line_by_line(loaded: LoadedModel, beam: int):
    lines = shuffled_lines(40, seed=beam)
    decode = DecodeConfig(beam=beam, batch_tokens=30, buffer_size=7, max_len_b=5)
    translator = Translator(TorchEngine(loaded, decode, torch.device("cpu")))
    one_by_one = [translator.translate([line])[0] for line in lines]
    assert translator.translate(lines) == one_by_one
    streamed = "".join(translate_stream(translator, [line + "\n" for line in lines]))
    assert streamed.split("\n")[:-1] == one_by_one
    assert all(out == "" for line, out in zip(lines, one_by_one) if not line.strip())


def constrained_requests(lines: list[str]) -> list[Request]:
    """Every third line must contain "tres" (and every sixth "siete ocho"), every fourth must not contain "dos",
    every fifth starts with "uno"."""
    return [Request(line, ("tres",) * (index % 3 == 0) + ("siete ocho",) * (index % 6 == 0),
                    ("dos",) * (index % 4 == 0), "uno " * (index % 5 == 0)) for index, line in enumerate(lines)]


@pytest.mark.parametrize("beam", [1, 3])
def test_batched_constrained_translation_equals_line_by_line(loaded: LoadedModel, beam: int):
    requests = constrained_requests(shuffled_lines(30, seed=beam))
    decode = DecodeConfig(beam=beam, batch_tokens=30, max_len_b=5)
    translator = Translator(TorchEngine(loaded, decode, torch.device("cpu")))
    one_by_one = [translator.translate_requests([request])[0] for request in requests]
    batched = translator.translate_requests(requests)
    assert [[text for text, _ in hyps] for hyps in batched] == [[text for text, _ in hyps] for hyps in one_by_one]
    for request, [(text, _)] in zip(requests, batched):
        if request.text.strip():
            assert all(f" {phrase} " in f" {text} " for phrase in request.constraints), (request, text)
            assert not any(phrase in text.split() for phrase in request.negative), (request, text)
            assert text.startswith(request.prefix), (request, text)
    plain = translator.translate([request.text for request in requests])
    assert [hyps[0][0] for request, hyps in zip(requests, batched) if not request.constrained] == \
        [text for request, text in zip(requests, plain) if not request.constrained]


def test_overlong_lines_are_truncated_with_a_warning(loaded: LoadedModel, caplog):
    translator = Translator(TorchEngine(loaded, DecodeConfig(beam=1, max_len_b=3), torch.device("cpu")))
    assert len(translator.translate([" ".join(["uno"] * 100), "dos"])) == 2
    assert "line 1: 100 subwords, truncated to 39" in caplog.text


@pytest.mark.parametrize("bf16_seconds", [0.5, 0.99, 2.0])
def test_bfloat16_warns_where_this_cpu_measures_it_no_faster(loaded: LoadedModel, monkeypatch, caplog, bf16_seconds):
    monkeypatch.setattr("nmtkit.runtime.precision.time_precisions",
                        lambda run, candidates, device: (run(None), run(torch.bfloat16),
                                                         {None: 1.0, torch.bfloat16: bf16_seconds})[-1])
    decode = DecodeConfig(dtype="bfloat16", max_len_b=3)
    translator = Translator(TorchEngine(copy.deepcopy(loaded), decode, torch.device("cpu")))
    assert ("no faster than float32" in caplog.text) == (bf16_seconds > 0.95)
    assert next(translator.loaded.model.parameters()).dtype is torch.bfloat16
    lines = shuffled_lines(6, seed=5)
    assert len(translator.translate(lines)) == len(lines)


def test_measuring_bfloat16_leaves_the_float32_weights_alone(loaded: LoadedModel):
    model = copy.deepcopy(loaded.model)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    decoding_timings(model, loaded.src_subword.vocab_size, torch.bfloat16, torch.device("cpu"), rows=4)
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())


def test_format_hypotheses():
    hyps = [("a b", -0.5), ("a c", -1.25)]
    assert format_hypotheses(hyps, 3, nbest=1, scores=False) == "a b\n"
    assert format_hypotheses(hyps, 3, nbest=1, scores=True) == "a b ||| -0.5000\n"
    assert format_hypotheses(hyps, 3, nbest=2, scores=False) == "3 ||| a b ||| -0.5000\n3 ||| a c ||| -1.2500\n"


def test_translator_load_applies_the_options_to_the_checkpoints_decode_settings(loaded: LoadedModel, tmp_path):
    config = copy.deepcopy(loaded.config)
    config.decode = DecodeConfig(beam=3, nbest=2, alpha=0.6)
    save_atomic(make_payload(config, loaded.model, (loaded.src_subword, loaded.tgt_subword)), tmp_path / "model.pt")
    translator = Translator.load(tmp_path / "model.pt", device="cpu", threads=1, beam=4, alpha=0.5)
    assert (translator.decode.beam, translator.decode.nbest, translator.decode.alpha) == (4, 2, 0.5)
    assert translator.engine.device == torch.device("cpu")
    assert translator.loaded.model.state_dict().keys() == loaded.model.state_dict().keys()
    with pytest.raises(NmtkitError, match="--nbest 2"):
        Translator.load(tmp_path / "model.pt", device="cpu", beam=1)
