"""The CTranslate2 export of an imported M2M100 or NLLB model (nmtkit/export/ctranslate2.py, the language tag read
in the decoder: nmtkit/translate/ctranslate2_model.py) translates, scores and attends as the checkpoint does; the
search settings it cannot follow are one-line errors. Small random models built with transformers' own classes
(tests/hf_models.py), imported with `nmtkit import`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_runner import assert_error, nmtkit
from hf_models import SOURCE, TARGET, TEXTS, m2m100_dir, nllb_dir

from nmtkit.align.attention import teacher_forced_attention
from nmtkit.decoding.inputs import Request
from nmtkit.translate.translator import Translator

LANGS = {"m2m100": ("en", "de"), "nllb": ("eng_Latn", "deu_Latn")}


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def exported(request, tmp_path_factory) -> tuple[Path, Path]:
    """(the imported checkpoint, its float32 export) of a random model whose EOS is likely early (eos_boost 2), so
    that EOS ranks second to Kth at the first step of many beam searches (see `test_an_empty_hypothesis...`)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp(request.param)
    hf = (m2m100_dir if request.param == "m2m100" else nllb_dir)(root / "hf", 2.0)
    src, tgt = LANGS[request.param]
    assert nmtkit("import", str(hf), "--out", str(root / "imported"), "--src-lang", src, "--tgt-lang",
                  tgt).exit_code == 0
    checkpoint = root / "imported" / "model.pt"
    assert nmtkit("export", "-m", str(checkpoint), "--out", str(root / "float32"), "--quantization",
                  "float32").exit_code == 0
    return checkpoint, root / "float32"


def source_file(tmp_path: Path) -> Path:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS + SOURCE + TARGET[:3]) + "\n")
    return source


def fields(lines: list[str]) -> tuple[list[list[str]], list[float]]:
    return [line.split(" ||| ")[:2] for line in lines], [float(line.split(" ||| ")[2]) for line in lines]


@pytest.mark.parametrize("options", [["--beam", "1"], ["--beam", "2"], ["--beam", "4"], ["--beam", "5"],
                                     ["--beam", "4", "--alpha", "0.6"],
                                     ["--beam", "3", "--max-len-a", "0", "--max-len-b", "4"]],
                         ids=lambda options: " ".join(options))
def test_the_export_translates_as_the_checkpoint_does(exported, tmp_path, options):
    """Token for token and score for score, n-best lists included (scores as printed, to 4 decimals; greedy
    search's in `test_greedy_scores...`)."""
    checkpoint, directory = exported
    common = ["-i", str(source_file(tmp_path)), "--threads", "1", *options, "--nbest", options[1]]
    torch_lines = nmtkit("translate", "-m", str(checkpoint), *common).stdout.splitlines()
    ct2_lines = nmtkit("translate", "-m", str(directory), *common).stdout.splitlines()
    assert len(torch_lines) >= len(TEXTS + SOURCE) + 3
    if options[1] == "1":
        assert ct2_lines == torch_lines
        return
    (torch_fields, torch_scores), (ct2_fields, ct2_scores) = fields(torch_lines), fields(ct2_lines)
    assert ct2_fields == torch_fields
    assert ct2_scores == pytest.approx(torch_scores, abs=2e-4)


def test_an_empty_hypothesis_at_the_first_step_is_in_both_n_best_lists(exported, tmp_path):
    """CTranslate2 replaces an EOS ranked 2nd to Kth at the first step after a target prefix with a dead candidate,
    where nmtkit finishes the empty translation; the engine searches those sentences as nmtkit does. These weights
    give such sentences (a property of the fixed random model, checked so the test above covers the case)."""
    checkpoint, directory = exported
    common = ["-i", str(source_file(tmp_path)), "--threads", "1", "--beam", "5", "--nbest", "5"]
    torch_lines = nmtkit("translate", "-m", str(checkpoint), *common).stdout.splitlines()
    ct2_lines = nmtkit("translate", "-m", str(directory), *common).stdout.splitlines()
    ranks = {}
    for line in torch_lines:
        ranks.setdefault(line.split(" ||| ")[0], []).append(line.split(" ||| ")[1])
    assert any("" in hyps[1:] for hyps in ranks.values())  # an empty hypothesis below the best
    assert ct2_lines and [line.split(" ||| ")[:2] for line in ct2_lines] == \
        [line.split(" ||| ")[:2] for line in torch_lines]


def test_greedy_scores_are_the_checkpoints(exported):
    checkpoint, directory = exported
    translators = [Translator.load(path, device="cpu", threads=1, beam=1) for path in (checkpoint, directory)]
    sources = translators[0].encode([Request(text) for text in TEXTS + SOURCE], "line", 1)
    mine, theirs = (translator.engine.search(sources, None, None) for translator in translators)
    assert [[hyp.tokens for hyp in hyps] for hyps in theirs] == [[hyp.tokens for hyp in hyps] for hyps in mine]
    assert [hyps[0].score for hyps in theirs] == pytest.approx([hyps[0].score for hyps in mine], abs=1e-4)


def test_token_log_probs_and_attention_are_the_checkpoints(exported):
    """Teacher-forced log-probabilities (sentence confidence) and attention (placeholder repair), a row per target
    token: the tag read in the decoder is forced, not predicted, and has no row."""
    checkpoint, directory = exported
    engines = [Translator.load(path, device="cpu", threads=1).engine for path in (checkpoint, directory)]
    translator = Translator.load(checkpoint, device="cpu", threads=1)
    sources = translator.encode([Request(text) for text in TEXTS], "line", 1)
    targets = translator.loaded.tgt_subword.encode(TARGET[: len(TEXTS)])
    mine, theirs = (engine.token_log_probs(sources, targets) for engine in engines)
    assert [len(row) for row in theirs] == [len(target) + 1 for target in targets]
    assert [value for row in theirs for value in row] == pytest.approx([value for row in mine for value in row],
                                                                       abs=1e-4)
    model = engines[0].loaded.model
    with model.chosen_attention(-1, None):  # the export's: the last layer's, the mean over heads
        mine = teacher_forced_attention(model, sources, targets, torch.device("cpu"))
    theirs = engines[1].attention(sources, targets)
    for torch_rows, ct2_rows, source, target in zip(mine, theirs, sources, targets):
        rows = len(target)  # CTranslate2 leaves out the source EOS's column, as for every export
        assert torch.tensor(ct2_rows[:rows]).shape == (rows, len(source))
        assert torch.tensor(ct2_rows[:rows]) == pytest.approx(torch_rows[:rows, :-1], abs=1e-4)


def test_the_export_records_how_the_decoder_starts_and_int8_translates(exported, tmp_path):
    checkpoint, directory = exported
    info = json.loads((directory / "nmtkit.json").read_text())
    config = json.loads((directory / "config.json").read_text())
    source_token = info["config"]["model"]["source_token"]
    assert info["format"] == 2
    assert info["language_tags"] == {"where": "decoder", "decoder_start": 3, "source_token": source_token}
    assert (config["decoder_start_token"], config["bos_token"], config["eos_token"]) == ("</s>", "<s>", "</s>")
    out = tmp_path / "int8"
    assert nmtkit("export", "-m", str(checkpoint), "--out", str(out), "--quantization", "int8").exit_code == 0
    source = source_file(tmp_path)
    for beam in ("1", "4"):
        result = nmtkit("translate", "-m", str(out), "-i", str(source), "--threads", "1", "--beam", beam)
        assert result.exit_code == 0 and len(result.stdout.splitlines()) == len(source.read_text().splitlines())


@pytest.mark.parametrize(("options", "needles"), [
    (["--beam", "2", "--length-penalty", "average"], ["counts an M2M100 or NLLB model's language tag", "average"]),
    (["--beam", "2", "--length-penalty", "sockeye", "--beta", "0"], ["language tag in |Y|", "--beta 0"]),
    (["--beam", "2", "--length-penalty", "gnmt"], ["language tag in |Y|", "gnmt"]),
    (["--beam", "2", "--coverage-penalty", "0.2"], ["--coverage-penalty"]),
])
def test_search_settings_without_a_counterpart_are_one_line_errors(exported, tmp_path, options, needles):
    """CTranslate2 counts the tag in the length it divides by: only `none` and `sockeye` with beta 1 (the
    import's default, which counts it too) rank as nmtkit does."""
    checkpoint, directory = exported
    assert nmtkit("translate", "-m", str(checkpoint), "-i", str(source_file(tmp_path)), "--threads", "1",
                  *options).exit_code == 0
    assert_error(nmtkit("translate", "-m", str(directory), "-i", str(source_file(tmp_path)), *options), *needles)
