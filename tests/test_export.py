"""nmtkit export -> CTranslate2: the exported directory translates as the PyTorch checkpoint does.

Tiny Transformers are trained for a few seconds on a letter task (lower case -> upper case, so that separate
vocabularies differ), one per architecture variant; their translations end with EOS as a real model's do, and the
length-limit tests make them run into it. What `nmtkit.translate.ctranslate2_engine` promises is checked as it is
stated: greedy search equal in tokens and scores everywhere; beam search equal in its best hypothesis; n-best lists
that can only be better below the best (CTranslate2 keeps every hypothesis that ends in a sentence's last step).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from cli_runner import assert_error, nmtkit
from letter_task import letter_lines, letter_task, train_tiny
from scripts import ROOT, load_script

from nmtkit import Translator
from nmtkit.checkpoint.payload import load_checkpoint, make_payload, restore_model, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DecodeConfig
from nmtkit.data.dataset import encode_sources
from nmtkit.data.subword import EOS
from nmtkit.decoding.inputs import Request
from nmtkit.decoding.search import max_lengths
from nmtkit.errors import NmtkitError
from nmtkit.export.command import export_model
from nmtkit.export.ctranslate2 import model_spec
from nmtkit.modules.embeddings import sinusoidal_table
from nmtkit.registry import build_model
from nmtkit.translate.ctranslate2_engine import NO_LENGTH_PENALTY, CTranslate2Engine, search_groups, search_options
from nmtkit.translate.exported import load_exported

LETTERS = "abcdefgh"
STUDENT = yaml.safe_load((ROOT / "recipes" / "distill" / "student-6-1.yaml").read_text(encoding="utf-8"))["model"]
ARCHITECTURES = [
    pytest.param((True, {}), id="pre-norm-shared-tied", marks=pytest.mark.isa),  # pre_norm's model
    pytest.param((True, {"norm": "post"}), id="post-norm-shared-tied"),
    pytest.param((False, {"norm": "pre", "tie_output": False}), id="pre-norm-separate-untied"),
    pytest.param((False, {"norm": "post"}), id="post-norm-separate-tied", marks=pytest.mark.isa),
    pytest.param((True, {"activation": "swiglu"}), id="swiglu"),
    pytest.param((True, {"share_embeddings": False, "tie_output": False, "activation": "gelu",
                         "positions": "learned"}), id="unshared-untied-gelu-learned"),
    pytest.param((True, {key: STUDENT[key] for key in ("encoder_layers", "decoder_layers", "activation")}),
                 id="distill-student-deep-encoder-shallow-decoder",  # recipes/distill's layers, the tests' width
                 marks=pytest.mark.isa),
]
SEARCHES = [
    pytest.param({"beam": 1}, id="greedy"),
    pytest.param({"beam": 4}, id="beam-average"),
    pytest.param({"beam": 5, "length_penalty": "none"}, id="beam-none"),
    pytest.param({"beam": 3, "length_penalty": "sockeye", "alpha": 0.6}, id="beam-sockeye"),
]


@pytest.fixture(scope="module")
def letter_data(tmp_path_factory) -> dict[bool, Path]:
    return {joint: letter_task(tmp_path_factory.mktemp(f"letters-{joint}"), joint) for joint in (True, False)}


@pytest.fixture(scope="module", params=ARCHITECTURES)
def exported(request, letter_data, tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, float32 export) of one architecture variant; the default one is pre_norm's, trained once."""
    joint, model = request.param
    if joint and not model:
        return request.getfixturevalue("pre_norm")
    root = tmp_path_factory.mktemp("run")
    checkpoint = train_tiny(letter_data[joint], root / "run", **model)
    export_model(checkpoint, root / "ct2")
    return checkpoint, root / "ct2"


@pytest.fixture(scope="module")
def pre_norm(letter_data, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pre-norm")
    checkpoint = train_tiny(letter_data[True], root / "run")
    export_model(checkpoint, root / "ct2")
    return checkpoint, root / "ct2"


def both(models: tuple[Path, Path], lines: list[str], **decode) -> tuple[list, list]:
    """translate_nbest of the checkpoint and of its export, with the same decode settings."""
    checkpoint, directory = models
    pytorch = Translator.load(checkpoint, device="cpu", **decode).translate_nbest(lines)
    exported = Translator.load(directory, device="cpu", threads=1, **decode).translate_nbest(lines)
    return pytorch, exported


def assert_same_best(pytorch: list, exported: list, least: float = 1.0) -> None:
    """The best hypotheses agree on at least `least` of the lines, with equal scores where they agree. Two bests of
    one score (within float error) agree too: which of a tie an engine ranks first depends on the CPU's kernels."""
    same = [left[0][0] == right[0][0] or right[0][1] == pytest.approx(left[0][1], abs=1e-5)
            for left, right in zip(pytorch, exported)]
    assert sum(same) >= least * len(same), [(left[0], right[0]) for left, right in zip(pytorch, exported)
                                            if left[0][0] != right[0][0]]
    for agree, left, right in zip(same, pytorch, exported):
        if agree:
            assert right[0][1] == pytest.approx(left[0][1], abs=1e-4)


def reached_limit(lines: list[str], outputs: list, translator, a: float, b: int) -> int:
    """How many best outputs have the most tokens their line's length limit allows (their EOS forced)."""
    _, src_mask = encode_sources(translator.loaded.src_subword.encode(lines))
    limits = max_lengths(src_mask, a, b, translator.max_source).tolist()
    lengths = [len(seq) for seq in translator.loaded.tgt_subword.encode([hyps[0][0] for hyps in outputs])]
    return sum(length == limit - 1 for length, limit in zip(lengths, limits))


@pytest.mark.parametrize("search", SEARCHES)
def test_float32_export_translates_as_pytorch(exported, search):
    lines = letter_lines(50, seed=7, longest=9) + ["", "a", "h h h h h h h h h h h"]
    pytorch, ct2 = both(exported, lines, **search)
    assert_same_best(pytorch, ct2)
    assert ct2[-3] == [("", 0.0)]  # an empty line stays empty


@pytest.mark.isa
@pytest.mark.parametrize("decode", [{"beam": 4, "nbest": 4}, {"beam": 5, "nbest": 5, "length_penalty": "none"}])
def test_nbest_lists_share_the_best_and_are_no_worse(pre_norm, decode):
    """Below the best, CTranslate2 ranks a superset of nmtkit's finished hypotheses (those that ended in a
    sentence's last step beyond the beam's room, and with `none` those found after nmtkit stopped), so its k-th
    hypothesis scores at least nmtkit's k-th, and a hypothesis in both lists has one score."""
    pytorch, ct2 = both(pre_norm, letter_lines(50, seed=8, longest=9), **decode)
    assert_same_best(pytorch, ct2)
    for left, right in zip(pytorch, ct2):
        assert len(right) >= len(left)
        assert all(theirs >= ours - 1e-4 for (_, ours), (_, theirs) in zip(left, right))
        scores = dict(right)
        assert all(scores[text] == pytest.approx(score, abs=1e-4) for text, score in left if text in scores)


@pytest.mark.isa
def test_greedy_search_at_the_length_limit_and_minimum_length_is_exact(pre_norm):
    """nmtkit forces EOS at the limit, CTranslate2 cuts there and the EOS is added afterwards; with a minimum length
    CTranslate2 renormalizes without EOS, and the scores are computed again: tokens and scores are nmtkit's."""
    lines = letter_lines(40, seed=9, longest=9)
    for decode in ({"max_len_a": 0.5, "max_len_b": 1}, {"min_len": 4}, {"min_len": 30, "max_len_a": 1.0}):
        pytorch, ct2 = both(pre_norm, lines, beam=1, **decode)
        assert [hyps[0][0] for hyps in ct2] == [hyps[0][0] for hyps in pytorch]
        assert [hyps[0][1] for hyps in ct2] == pytest.approx([hyps[0][1] for hyps in pytorch], abs=1e-4)
        if "max_len_b" in decode:  # the limit was reached: the case is tested
            assert reached_limit(lines, ct2, Translator.load(pre_norm[1], **decode), 0.5, 1) >= 10


@pytest.mark.isa
@pytest.mark.parametrize("decode", [{"max_len_a": 0.5, "max_len_b": 1}, {"min_len": 4},
                                    {"coverage_penalty": 0.3}, {"coverage_penalty": 0.2, "length_penalty": "none"}])
def test_beam_search_with_limits_and_coverage_mostly_agrees(pre_norm, decode):
    """The documented differences (see nmtkit.translate.ctranslate2_engine) are rare: beams cut at the length limit,
    renormalized steps under a minimum length, hypotheses the coverage penalty would rank first among those nmtkit
    has no room for."""
    pytorch, ct2 = both(pre_norm, letter_lines(50, seed=10, longest=9), beam=4, **decode)
    assert_same_best(pytorch, ct2, least=0.8)


def test_coverage_penalty_searches_each_sentence_alone(pre_norm):
    exported = load_exported(pre_norm[1])
    plain = CTranslate2Engine(exported, DecodeConfig(beam=4), "cpu", threads=1)
    covered = plain.with_decode(DecodeConfig(beam=4, coverage_penalty=0.2))
    limits = plain.limits([[4, 5], [6, 7], [4, 5, 6, 7, 8]])
    assert covered.one_each and not plain.one_each
    assert [len(rows) for rows, _ in search_groups(limits, covered.one_each)] == [1, 1, 1]
    assert sorted(len(rows) for rows, _ in search_groups(limits, plain.one_each)) == [1, 2]  # a call per limit


@pytest.mark.isa
def test_sampling_runs_in_ctranslate2_with_its_own_random_numbers(pre_norm):
    lines = letter_lines(20, seed=11)
    first = Translator.load(pre_norm[1], threads=1, sample=True, seed=5).translate_nbest(lines)
    again = Translator.load(pre_norm[1], threads=1, sample=True, seed=5).translate_nbest(lines)
    assert first == again
    top_one = Translator.load(pre_norm[1], threads=1, sample=True, top_k=1).translate_nbest(lines)
    pytorch, _ = both(pre_norm, lines, beam=1)
    assert [hyps[0][0] for hyps in top_one] == [hyps[0][0] for hyps in pytorch]  # top-1 sampling is greedy
    assert [hyps[0][1] for hyps in top_one] == pytest.approx([hyps[0][1] for hyps in pytorch], abs=1e-4)


def random_checkpoint(checkpoint: Path, out: Path, seed: int, never_ends: bool = False) -> Path:
    """`checkpoint`'s config and subword models with seeded random weights instead of trained ones: the same model
    on every machine (a trained one depends on the CPU's kernels); `never_ends` makes EOS never likely."""
    loaded = restore_model(load_checkpoint(checkpoint), torch.device("cpu"))
    torch.manual_seed(seed)
    model = build_model(loaded.config.model, loaded.src_subword.vocab_size, loaded.tgt_subword.vocab_size, True)
    if never_ends:
        with torch.no_grad():
            model.output.weight[EOS] = -model.output.weight[EOS].abs()
    save_atomic(make_payload(loaded.config, model, (loaded.src_subword, loaded.tgt_subword)), out)
    return out


# The most int8 may move a log-probability of these weights: 0.29 measured (0.042 on average) on CPUs without VNNI,
# whose int8 products add pairs in 16 bits that saturate (AVX2, AVX-512 before Cascade Lake, with MKL or oneDNN);
# 0.024 (0.002) with VNNI. Kernels are forced to each kind by make test-isa.
INT8_TOLERANCE, INT8_MEAN_TOLERANCE = 0.5, 0.1


def token_log_probs(model, sources: list[list[str]], targets: list[list[str]]) -> list[list[float]]:
    """CTranslate2's log-probability of each target token (and the EOS after it), given the source."""
    return [result.log_probs for result in model.score_batch(sources, targets)]


def first_difference(ours: list[str], theirs: list[str]) -> int | None:
    return next((step for step, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)


@pytest.mark.isa
def test_int8_export_changes_only_choices_float32_nearly_ties(pre_norm, tmp_path):
    """int8 weights move each log-probability a little, whichever int8 kernels the CPU runs (AVX2, AVX-512, VNNI;
    MKL or oneDNN): on fixed random weights, float32 and int8 score the same outputs token by token within a bound,
    and int8's greedy search leaves float32's only at a step where float32's two choices are that close (the Bible
    figure, BLEU within 0.5, is measured with the real model: benchmarks/translate_speed.py)."""
    import ctranslate2

    checkpoint = random_checkpoint(pre_norm[0], tmp_path / "m.pt", seed=1)
    export_model(checkpoint, tmp_path / "f32")
    export_model(checkpoint, tmp_path / "int8", quantization="int8")
    assert json.loads((tmp_path / "int8" / "nmtkit.json").read_text())["quantization"] == "int8"
    assert (tmp_path / "int8" / "model.bin").stat().st_size < 0.6 * (tmp_path / "f32" / "model.bin").stat().st_size
    subword = load_exported(tmp_path / "f32").src_subword
    sources = [subword.pieces(line) for line in letter_lines(100, seed=12)]
    f32, int8 = (ctranslate2.Translator(str(tmp_path / name), device="cpu", intra_threads=1)
                 for name in ("f32", "int8"))
    greedy = [[result.hypotheses[0] for result in model.translate_batch(sources, beam_size=1, max_decoding_length=8)]
              for model in (f32, int8)]
    for targets in greedy:
        pairs = zip(token_log_probs(f32, sources, targets), token_log_probs(int8, sources, targets))
        gaps = [abs(a - b) for exact, quantized in pairs for a, b in zip(exact, quantized)]
        assert max(gaps) < INT8_TOLERANCE and sum(gaps) / len(gaps) < INT8_MEAN_TOLERANCE
    for source, ours, theirs in zip(sources, *greedy):
        step = first_difference(ours, theirs)
        if step is not None:  # float32's log-probabilities of its own choice and of int8's at that step
            prefixes = [ours[:step + 1], theirs[:step + 1]]
            mine, other = (row[step] for row in token_log_probs(f32, [source] * 2, prefixes))
            assert other >= mine - 2 * INT8_TOLERANCE
    assert Translator.load(tmp_path / "int8", threads=1).translate(["a b", ""])[1] == ""


def test_the_spec_keeps_nmtkit_conventions(pre_norm):
    checkpoint, directory = pre_norm
    loaded = restore_model(load_checkpoint(checkpoint), torch.device("cpu"))
    spec = model_spec(loaded)
    table = sinusoidal_table(64, 32).numpy()
    assert (spec.encoder.position_encodings.encodings == table).all()
    assert (spec.decoder.position_encodings.encodings == table).all()
    config = json.loads((directory / "config.json").read_text())
    assert config["add_source_eos"] and config["layer_norm_epsilon"] == 1e-5
    assert (config["decoder_start_token"], config["bos_token"], config["eos_token"]) == ("<s>", "<s>", "</s>")
    vocabulary = json.loads((directory / "shared_vocabulary.json").read_text())
    pieces = [loaded.tgt_subword.processor.id_to_piece(index) for index in range(loaded.tgt_subword.vocab_size)]
    assert vocabulary == pieces and vocabulary[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    info = json.loads((directory / "nmtkit.json").read_text())
    assert info["subword"] == {"src": "source.spm", "tgt": "source.spm", "joint": True}
    assert info["config"]["decode"]["beam"] == 5 and info["quantization"] == "float32"
    assert (directory / "source.spm").read_bytes() == loaded.src_subword.proto


def test_separate_vocabularies_ship_two_subword_models(letter_data, tmp_path):
    checkpoint = train_tiny(letter_data[False], tmp_path / "run", steps=2)
    export_model(checkpoint, tmp_path / "ct2")
    names = sorted(path.name for path in (tmp_path / "ct2").iterdir())
    assert names == ["config.json", "model.bin", "nmtkit.json", "source.spm", "source_vocabulary.json",
                     "target.spm", "target_vocabulary.json"]
    exported = load_exported(tmp_path / "ct2")
    assert exported.src_subword.pieces("a b") == ["▁a", "▁b"] and exported.tgt_subword.pieces("A") == ["▁A"]


@pytest.mark.parametrize(("decode", "message"), [
    ({"beam": 4, "length_penalty": "gnmt"}, "--length-penalty gnmt"),
    ({"beam": 4, "length_penalty": "sockeye", "beta": 1.0}, "--beta 1.0"),
    ({"beam": 4, "word_penalty": 0.5}, "word penalty"),
    ({"beam": 4, "stop_finished": 2}, "--stop-finished"),
    ({"dtype": "bfloat16"}, "--quantization"),
])
def test_settings_ctranslate2_lacks_are_refused(decode, message):
    with pytest.raises(NmtkitError, match=message.replace("-", r"\-").replace(".", r"\.")):
        search_options(DecodeConfig(**decode))


def test_length_penalties_map_to_ctranslate2():
    assert search_options(DecodeConfig(beam=4))["length_penalty"] == 1.0
    assert search_options(DecodeConfig(beam=4, length_penalty="sockeye", alpha=0.6))["length_penalty"] == 0.6
    assert search_options(DecodeConfig(beam=4, length_penalty="none"))["length_penalty"] == NO_LENGTH_PENALTY
    assert float(torch.tensor(1023.0) ** NO_LENGTH_PENALTY) == 1.0  # ranks as no penalty at all
    greedy = search_options(DecodeConfig(beam=1))
    assert greedy["beam_size"] == 1 and greedy["length_penalty"] == 0.0 and "coverage_penalty" not in greedy


@pytest.mark.isa
def test_python_api_and_its_errors(pre_norm):
    checkpoint, directory = pre_norm
    translator = Translator.load(directory, threads=1, beam=3, nbest=2)
    assert (translator.decode.beam, translator.decode.nbest) == (3, 2)
    assert translator.translate(["a b", ""]) == Translator.load(checkpoint, device="cpu", beam=3).translate(["a b", ""])
    assert translator.with_decode(beam=1, nbest=1).decode.beam == 1 and translator.decode.beam == 3
    with pytest.raises(NmtkitError, match="unknown config key decode.bream"):
        Translator.load(directory, bream=3)
    with pytest.raises(NmtkitError, match="alone"):
        Translator.load([directory, checkpoint])
    with pytest.raises(NmtkitError, match="alignment"):
        translator.translate_aligned([Request("a")])
    with pytest.raises(NmtkitError, match="not a model exported"):
        Translator.load(checkpoint.parent)


@pytest.mark.isa
@pytest.mark.parametrize("decode", [{"beam": 1}, {"beam": 4, "nbest": 2}])
def test_batches_searched_at_once_translate_as_one_at_a_time(pre_norm, decode):
    """--inter-threads 2: two CTranslate2 workers search two batches at the same time, each of half the token
    budget; each batch is searched as it is alone, so the outputs are those of one worker of
    one thread with that budget, in input order (batches of a few tokens: many of them). CPU workers: on a GPU
    machine `auto` would search on the GPU."""
    checkpoint, directory = pre_norm
    lines = letter_lines(60, seed=11, longest=9) + ["", "h g f"]
    alone = Translator.load(directory, device="cpu", threads=1, batch_tokens=6, **decode).translate_nbest(lines)
    translator = Translator.load(directory, device="cpu", threads=2, inter_threads=2, batch_tokens=12,
                                 **decode)  # one thread each
    assert translator.engine.model.translator.num_translators == 2
    assert (translator.batch_budget, translator.with_decode(batch_tokens=7).batch_budget) == (6, 3)
    int8 = translator.with_decode(batch_tokens=6000)  # a copy; one-thread workers on int8 weights: small batches
    int8.engine.loaded = dataclasses.replace(int8.loaded, quantization="int8")
    assert (translator.with_decode(batch_tokens=6000).batch_budget, int8.batch_budget) == (3000, 1000)
    two_threads = Translator.load(directory, device="cpu", threads=4, inter_threads=2, batch_tokens=6000)
    two_threads.engine.loaded = int8.loaded
    assert two_threads.batch_budget == 3000
    assert translator.translate_nbest(lines) == alone
    with pytest.raises(NmtkitError, match="applies to a directory written by nmtkit export"):
        Translator.load(checkpoint, inter_threads=2)
    with pytest.raises(NmtkitError, match="at least 0"):
        Translator.load(directory, inter_threads=-1)
    default = Translator.load(directory, device="cpu", threads=2).engine.model  # one worker a thread on a CPU
    assert (default.inter_threads, default.intra_threads, default.translator.num_translators) == (2, 1, 2)
    assert Translator.load(checkpoint, threads=1).translate(["h g f"]) == Translator.load(
        checkpoint, threads=1, inter_threads=1).translate(["h g f"])  # a checkpoint: 0 and 1 are its one process


def test_the_batch_sweep_benchmark_times_every_size(pre_norm):
    """benchmarks/experiments/batch_sweep.py: a row per beam and size (tokens per worker's batch), the first size of a
    beam identical to itself."""
    batch_sweep = load_script("benchmarks/experiments/batch_sweep.py", "batch_sweep")
    rows = batch_sweep.sweep(pre_norm[1], letter_lines(12, seed=3, longest=6), threads=2, inter_threads=2,
                             sizes=[4, 12], beams=[2, 1], repeats=1)
    assert [(row["beam"], row["size"]) for row in rows] == [(2, 4), (2, 12), (1, 4), (1, 12)]
    assert all(row["sent_per_s"] > 0 for row in rows)
    assert rows[0]["identical"] == rows[2]["identical"] == 1.0


def test_export_refuses_what_ctranslate2_cannot_run(tmp_path, pre_norm):
    checkpoint, _ = pre_norm
    payload = load_checkpoint(checkpoint)
    config = build_config({"model": {"name": "luong", "embed_dim": 8, "hidden": 8}})
    model = build_model(config.model, 20, 20, True)
    subword = restore_model(payload, torch.device("cpu")).src_subword
    save_atomic(make_payload(config, model, (subword, subword)), tmp_path / "luong.pt")
    with pytest.raises(NmtkitError, match="CTranslate2 runs Transformers only; the 'luong' model"):
        export_model(tmp_path / "luong.pt", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    with pytest.raises(NmtkitError, match="not an empty directory"):
        export_model(checkpoint, tmp_path / "full")
    with pytest.raises(NmtkitError, match="unknown quantization"):
        export_model(checkpoint, tmp_path / "q", quantization="int4")
    with pytest.raises(NmtkitError, match="unknown export target"):
        export_model(checkpoint, tmp_path / "q", to="onnx")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["full", "luong.pt"]  # nothing half-written


def assert_same_output(output: str, expected: str) -> None:
    """The same lines; ` ||| `-separated scores (the numeric fields) within float tolerance."""
    def fields(text: str) -> list[list[str]]:
        return [line.split(" ||| ") for line in text.splitlines()]

    assert [len(row) for row in fields(output)] == [len(row) for row in fields(expected)]
    for row, expected_row in zip(fields(output), fields(expected)):
        for field, expected_field in zip(row, expected_row):
            if expected_field.lstrip("-").replace(".", "").isdigit() and "." in expected_field:
                assert float(field) == pytest.approx(float(expected_field), abs=2e-4)
            else:
                assert field == expected_field


@pytest.mark.isa
def test_export_translate_through_the_command_line(pre_norm, tmp_path):
    checkpoint, _ = pre_norm
    summary = json.loads(nmtkit("export", "-m", str(checkpoint), "--out", str(tmp_path / "ct2"),
                                "--quantization", "int8_float32").stdout)
    assert summary["quantization"] == "int8_float32" and summary["out"] == str(tmp_path / "ct2")
    float32 = tmp_path / "f32"
    assert nmtkit("export", "-m", str(checkpoint), "--out", str(float32)).exit_code == 0
    lines = "a b c\n\nd e f g\n  \nh\r\n"
    for search in (["--beam", "4"], ["--greedy", "--scores"], ["--beam", "3", "--nbest", "2"]):
        expected = nmtkit("translate", "-m", str(checkpoint), "--device", "cpu", *search, stdin=lines).stdout
        output = nmtkit("translate", "-m", str(float32), "--threads", "1", *search, stdin=lines).stdout
        assert len(expected.splitlines()) == (8 if "--nbest" in search else 5)  # an empty line: one line
        assert_same_output(output, expected)
    parallel = ["--threads", "2", "--inter-threads", "2", "--batch-tokens", "6", "--beam", "4", "--scores"]
    assert nmtkit("translate", "-m", str(float32), *parallel, stdin=lines).stdout == \
        nmtkit("translate", "-m", str(float32), "--threads", "1", "--batch-tokens", "3", *parallel[6:],
               stdin=lines).stdout  # two workers of batches of 3 tokens each
    assert_error(nmtkit("translate", "-m", str(checkpoint), "--inter-threads", "2", stdin="a\n"), "nmtkit export")
    assert_error(nmtkit("translate", "-m", str(float32), "--alignment", stdin="a\n"), "--alignment")
    assert_error(nmtkit("translate", "-m", str(float32), "--length-penalty", "gnmt", stdin="a\n"), "gnmt")
    assert_error(nmtkit("translate", "-m", str(float32), "--input-format", "tsv", stdin="a b\tB\n"), "constrained")
    assert nmtkit("translate", "-m", str(float32), "--input-format", "tsv", stdin="a b\n").stdout == \
        nmtkit("translate", "-m", str(float32), stdin="a b\n").stdout  # no constraints: as text input
    assert_error(nmtkit("translate", "-m", str(float32), "--tgt-lang", "xx", stdin="a\n"), "translates into")
    assert_error(nmtkit("translate", "-m", str(tmp_path), stdin="a\n"), "nmtkit export")
    assert_error(nmtkit("export", "-m", str(checkpoint), "--out", str(float32)), "not an empty directory")


def test_translating_an_export_imports_no_torch(pre_norm):
    """The command line translates an exported directory without importing torch (its import takes 2 s), numpy,
    PyYAML, protobuf or pydantic (typer 0.29 builds pydantic validators at each start: 0.27 s), so that its start
    stays near CTranslate2's own (docs/export-serve.md)."""
    _, directory = pre_norm
    heavy = ("torch", "numpy", "yaml", "google", "pydantic")
    script = ("import sys\n"
              "from nmtkit.cli import app\n"
              "try:\n"
              "    app()\n"
              "finally:\n"
              f"    print('imported:', sorted({{name.split('.')[0] for name in sys.modules}} & set({heavy!r})), "
              "file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", script, "translate", "-m", str(directory), "--threads", "1",
                             "--beam", "3"], input="a b c\n\nd e\n", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 3 and result.stdout.split("\n")[1] == ""
    assert result.stderr.splitlines()[-1] == "imported: []"
    assert nmtkit("translate", "-m", str(directory), "--threads", "1", "--beam", "3", stdin="a b c\n\nd e\n").stdout \
        == result.stdout


@pytest.mark.isa
def test_a_random_model_that_never_ends_is_cut_as_nmtkit_cuts_it(tmp_path, pre_norm):
    """Random weights whose EOS is never likely: every hypothesis runs into its length limit, where nmtkit forces
    EOS and CTranslate2 cuts; then even the n-best lists are nmtkit's (no EOS is among the top K before the limit)."""
    random_checkpoint(pre_norm[0], tmp_path / "m.pt", seed=0, never_ends=True)
    export_model(tmp_path / "m.pt", tmp_path / "ct2")
    lines = letter_lines(10, seed=13)
    for search in ({"beam": 1}, {"beam": 4, "nbest": 4}, {"beam": 3, "length_penalty": "none", "nbest": 3}):
        pytorch, ct2 = both((tmp_path / "m.pt", tmp_path / "ct2"), lines, max_len_b=3, **search)
        assert [[text for text, _ in hyps] for hyps in ct2] == [[text for text, _ in hyps] for hyps in pytorch]
        assert [score for hyps in ct2 for _, score in hyps] == pytest.approx(
            [score for hyps in pytorch for _, score in hyps], abs=1e-4)


def test_a_gpu_without_ctranslate2s_cuda_libraries(monkeypatch, pre_norm):
    """CTranslate2 4.x loads CUDA 12's cuBLAS at its first product on a GPU (a machine with CUDA 13 alone lacks
    it): `auto` then keeps to the CPU, `cuda` is a one-line error naming the library, and a failure inside a search
    is a one-line error, not a traceback."""
    import ctranslate2

    from nmtkit.translate import ctranslate2_engine as ct2

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    monkeypatch.setattr(ct2, "cuda_libraries_missing", lambda: ct2.CUBLAS)
    assert ct2.ct2_device("auto") == ("cpu", 0)
    with pytest.raises(NmtkitError, match=r"cannot load libcublas\.so\.12 .*--device cpu"):
        ct2.ct2_device("cuda")
    monkeypatch.setattr(ct2, "cuda_libraries_missing", lambda: None)
    assert ct2.ct2_device("auto") == ("cuda", 0) and ct2.ct2_device("cuda:0") == ("cuda", 0)
    with pytest.raises(NmtkitError, match="sees 1 CUDA"):
        ct2.ct2_device("cuda:1")

    class Failing:
        def translate_batch(self, *args, **kwargs):
            raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")

    engine = CTranslate2Engine(load_exported(pre_norm[1]), DecodeConfig(beam=2), device="cpu", threads=1)
    engine.model.translator = Failing()
    with pytest.raises(NmtkitError, match="failed to translate on cpu: Library libcublas.so.12 is not found"):
        engine.search([[5, 6, 7]], None, None)
