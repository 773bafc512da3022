"""`nmtkit evaluate` from the command line: sacrebleu's strings and signatures, jiwer's rates, the paired
bootstrap, every scoring option, the language's BLEU tokenizer, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest
import torch
from metrics_corpus import REAL, random_corpus
from sacrebleu.metrics import BLEU, CHRF, TER
from typer.testing import CliRunner

from nmtkit.cli import app
from nmtkit.errors import NmtkitError
from nmtkit.metrics.command import EvaluateConfig, language_of
from nmtkit.metrics.command import evaluate as evaluate_lines
from nmtkit.metrics.tokenize import tokenizer_usable

HYPOTHESES = [hypothesis for _, hypothesis in REAL]
REFERENCES = [reference for reference, _ in REAL]


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def evaluate(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(app, ["evaluate", *args], input=stdin)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    baseline, _ = random_corpus(seed=9, lines=len(REAL))
    return {"hyp": write(tmp_path / "hyp.txt", HYPOTHESES), "ref": write(tmp_path / "ref.txt", REFERENCES),
            "ref2": write(tmp_path / "ref2.txt", HYPOTHESES[::-1]), "base": write(tmp_path / "base.txt", baseline),
            "short": write(tmp_path / "short.txt", REFERENCES[:3])}


def test_json_holds_every_metric_with_reference_values(files):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--ref", files["ref2"], "--metrics",
                      "bleu,chrf,chrf++,wer,cer,edit", "--sentence", "--json", "--device", "cpu")
    scores = json.loads(result.stdout)
    two_refs = [REFERENCES, HYPOTHESES[::-1]]
    assert set(scores) == {"bleu", "chrf", "chrf++", "wer", "cer", "edit"}
    assert scores["bleu"]["score"] == BLEU().corpus_score(HYPOTHESES, two_refs).score
    assert scores["bleu"]["signature"].startswith("nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert scores["chrf++"]["score"] == CHRF(word_order=2).corpus_score(HYPOTHESES, two_refs).score
    assert scores["wer"]["score"] == jiwer.wer(REFERENCES, HYPOTHESES)
    assert scores["cer"]["score"] == jiwer.cer(REFERENCES, HYPOTHESES)
    assert scores["cer"]["substitutions"] == jiwer.process_characters(REFERENCES, HYPOTHESES).substitutions
    assert all(len(result["sentences"]) == len(REAL) for result in scores.values())


def test_text_output_prints_sacrebleus_lines(files):
    lines = evaluate("--hyp", files["hyp"], "--ref", files["ref"]).stdout.splitlines()
    bleu, chrf = BLEU(), CHRF()
    assert lines[0] == str(bleu.corpus_score(HYPOTHESES, [REFERENCES]))
    assert lines[1] == f"  signature: {bleu.get_signature()}"
    assert lines[2] == str(chrf.corpus_score(HYPOTHESES, [REFERENCES]))
    assert lines[3] == f"  signature: {chrf.get_signature()}"


def test_compare_runs_a_paired_bootstrap(files):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--compare", files["base"], "--metrics",
                      "bleu,wer", "--samples", "200", "--json")
    scores = json.loads(result.stdout)
    for name in ("bleu", "wer"):
        comparison = scores[name]["bootstrap"]
        assert comparison["samples"] == 200 and comparison["seed"] == 12345 and 0 < comparison["p_value"] <= 1
        assert comparison["system"] == scores[name]["score"]
    text = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--compare", files["base"]).stdout
    assert "paired bootstrap (1000 resamples, seed 12345): p = " in text
    seeded = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--compare", files["base"], "--samples", "20",
                      "--seed", "7", "--metrics", "bleu").stdout
    assert "paired bootstrap (20 resamples, seed 7): p = " in seeded  # --seed: a config field, so a flag


@pytest.mark.parametrize(("args", "needle"), [
    (["--metrics", "bleu,meteor"], "unknown metric 'meteor'"),
    (["--lang", "chinese"], "language 'chinese' is not a code"),
    (["--smooth-value", "0.5"], "a smoothing value is for floor and add-k smoothing, not exp"),
    (["--smooth", "floor", "--smooth-value", "-1"], "must not be negative"),
    (["--max-ngram-order", "0"], "maximum n-gram order must be at least 1"),
    (["--chrf-char-order", "0"], "character n-gram order >= 1"),
    (["--chrf-word-order", "-1"], "word order >= 0"),
    (["--chrf-beta", "-2"], "beta must not be negative"),
    (["--compare", "short"], "short.txt has 3 lines"),
    (["--metrics", "edit", "--edit-costs", "1,2"], "three integers"),
    (["--tokenize", "nope"], "unknown BLEU tokenizer"),
])
def test_bad_input_is_a_one_line_error(files, args, needle):
    args = [files.get(arg, arg) for arg in args]
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and needle in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present")
def test_cuda_without_cuda_is_a_one_line_error(files):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--device", "cuda")
    assert result.exit_code == 1 and "CUDA is not available" in result.stderr


def test_hypotheses_from_stdin_end_to_end(files):
    result = subprocess.run([sys.executable, "-m", "nmtkit", "evaluate", "--hyp", "-", "--ref", files["ref"],
                             "--metrics", "bleu,wer", "--json"], input=Path(files["hyp"]).read_bytes(),
                            capture_output=True, check=True)
    scores = json.loads(result.stdout)
    assert scores["bleu"]["score"] == BLEU().corpus_score(HYPOTHESES, [REFERENCES]).score
    assert scores["wer"]["score"] == jiwer.wer(REFERENCES, HYPOTHESES)


def scores_of(*args: str) -> dict:
    result = evaluate(*args, "--json", "--device", "cpu")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("options", [
    {}, {"normalized": True}, {"no_punct": True, "case_sensitive": True}, {"normalized": True, "asian_support": True},
])
def test_ter_options_are_sacrebleus(files, options):
    flags = [f"--ter-{name.replace('_', '-')}" for name in options]
    result = scores_of("--hyp", files["hyp"], "--ref", files["ref"], "--ref", files["ref2"], "--metrics", "ter",
                       *flags, "--sentence")["ter"]
    ter = TER(**options)
    two_refs = [REFERENCES, HYPOTHESES[::-1]]
    expected = ter.corpus_score(HYPOTHESES, two_refs)
    assert (result["score"], result["signature"]) == (expected.score, str(ter.get_signature()))
    assert result["sentences"] == [ter.sentence_score(hypothesis, list(refs)).score
                                   for hypothesis, *refs in zip(HYPOTHESES, *two_refs)]


def test_ter_can_be_compared(files):
    result = scores_of("--hyp", files["hyp"], "--ref", files["ref"], "--compare", files["base"], "--metrics", "ter",
                       "--samples", "100")["ter"]
    assert result["bootstrap"]["system"] == result["score"] and 0 < result["bootstrap"]["p_value"] <= 1


@pytest.mark.parametrize(("flags", "options"), [
    ([], {}),
    (["--chrf-beta", "3", "--chrf-whitespace"], {"beta": 3, "whitespace": True}),
    (["--chrf-eps-smoothing", "--chrf-char-order", "4"], {"eps_smoothing": True, "char_order": 4}),
    (["--chrf-word-order", "1", "--lowercase"], {"word_order": 1, "lowercase": True}),
])
def test_chrf_options_are_sacrebleus(files, flags, options):
    scores = scores_of("--hyp", files["hyp"], "--ref", files["ref"], "--metrics", "chrf,chrf++", *flags)
    for name, word_order in (("chrf", options.get("word_order", 0)), ("chrf++", 2)):
        chrf = CHRF(**{**options, "word_order": word_order})
        expected = chrf.corpus_score(HYPOTHESES, [REFERENCES])
        assert (scores[name]["score"], scores[name]["signature"]) == (expected.score, str(chrf.get_signature()))


@pytest.mark.parametrize(("flags", "options"), [
    (["--smooth", "floor", "--smooth-value", "0.3"], {"smooth_method": "floor", "smooth_value": 0.3}),
    (["--smooth", "add-k", "--smooth-value", "2"], {"smooth_method": "add-k", "smooth_value": 2.0}),
    (["--max-ngram-order", "2"], {"max_ngram_order": 2}),
    (["--max-ngram-order", "5", "--smooth", "floor"], {"max_ngram_order": 5, "smooth_method": "floor"}),
])
def test_bleu_smoothing_value_and_order_are_sacrebleus(files, flags, options):
    result = evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--metrics", "bleu", *flags)
    bleu = BLEU(**options)
    assert result.stdout.splitlines() == [str(bleu.corpus_score(HYPOTHESES, [REFERENCES])),
                                          f"  signature: {bleu.get_signature()}"]


def test_mer_wil_and_wip_are_jiwers(files):
    scores = scores_of("--hyp", files["hyp"], "--ref", files["ref"], "--metrics", "mer,wil,wip", "--sentence")
    for name, measure in (("mer", jiwer.mer), ("wil", jiwer.wil), ("wip", jiwer.wip)):
        assert scores[name]["score"] == measure(REFERENCES, HYPOTHESES)
        assert scores[name]["sentences"] == [measure(reference, hypothesis)
                                             for reference, hypothesis in zip(REFERENCES, HYPOTHESES)]


MECAB_OR_CHAR = {lang: name if tokenizer_usable(name) else "char" for lang, name in (("ja", "ja-mecab"),
                                                                                     ("ko", "ko-mecab"))}


@pytest.mark.parametrize(("ref_name", "args", "tokenizer"), [
    ("ref.txt", [], "13a"), ("test.de", [], "13a"), ("test.zh", [], "zh"), ("test.zh_CN", [], "zh"),
    ("test.th", [], "char"), ("test.ja", [], MECAB_OR_CHAR["ja"]), ("test.ko", [], MECAB_OR_CHAR["ko"]),
    ("ref.txt", ["--lang", "zh-TW"], "zh"), ("test.zh", ["--lang", "en"], "13a"),
    ("test.zh", ["--tokenize", "intl"], "intl"), ("ref.txt", ["--lang", "th", "--tokenize", "none"], "none"),
])
def test_bleu_tokenizer_follows_the_target_language(tmp_path, ref_name, args, tokenizer):
    hyp, ref = write(tmp_path / "hyp.txt", HYPOTHESES), write(tmp_path / ref_name, REFERENCES)
    result = scores_of("--hyp", hyp, "--ref", ref, "--metrics", "bleu", *args)["bleu"]
    bleu = BLEU(tokenize=tokenizer)
    assert result["tokenize"] == tokenizer
    assert result["score"] == bleu.corpus_score(HYPOTHESES, [REFERENCES]).score
    assert result["signature"] == str(bleu.get_signature())


@pytest.mark.parametrize(("path", "lang"), [
    ("test.zh", "zh"), ("data/newstest2020.de_DE", "de_DE"), ("x.zh-Hant", "zh-Hant"), ("x.yue", "yue"),
    ("ref.txt", None), ("ref.tsv", None), ("test.hyp", None), ("test.ref", None), ("test.gz", None),
    ("reference", None), ("test.json", None), ("test.e", None), ("test.12", None),
])
def test_language_is_read_from_a_suffix_that_looks_like_a_code(path, lang):
    assert language_of(path) == lang


METRICS = ["bleu", "chrf", "chrf++", "ter", "wer", "cer", "mer", "wil", "wip", "edit"]


def test_an_empty_line_among_several_references_is_an_empty_reference_as_in_sacrebleu(tmp_path):
    """sacrebleu leaves out only None references; an empty line (its CLI's reading of a blank) stays an empty one."""
    second = [*REFERENCES[:3], "", *REFERENCES[4:]]
    refs = [write(tmp_path / "ref.txt", HYPOTHESES[::-1]), write(tmp_path / "ref2.txt", second)]
    result = evaluate("--hyp", write(tmp_path / "hyp.txt", HYPOTHESES), "--ref", refs[0], "--ref", refs[1],
                      "--metrics", ",".join(METRICS), "--json", "--sentence")
    assert result.exit_code == 0 and "ref2.txt: 1 of 10 lines are empty (first: line 4)" in result.stderr
    scores, streams = json.loads(result.stdout), [HYPOTHESES[::-1], second]
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF()), ("chrf++", CHRF(word_order=2)), ("ter", TER())):
        assert scores[name]["score"] == metric.corpus_score(HYPOTHESES, streams).score
        assert scores[name]["signature"].startswith("nrefs:2|")
    assert scores["wer"]["score"] == jiwer.wer(HYPOTHESES[::-1], HYPOTHESES)  # the first reference
    assert all(len(scores[name]["sentences"]) == len(HYPOTHESES) for name in METRICS)


def test_a_missing_reference_through_the_api_is_a_one_line_error():
    with pytest.raises(NmtkitError, match=r"reference 2 has no line 2 \(None\)"):
        evaluate_lines(["a", "b"], [["a", "b"], ["a", None]], EvaluateConfig(device="cpu"))


class ExactMatch:
    """A metric in one definition: the share of hypotheses equal to the first reference."""

    name = "exact"

    def __init__(self, references):
        self.references = references[0]

    def statistics(self, hypotheses):
        return torch.tensor([[int(hyp == ref), 1] for hyp, ref in zip(hypotheses, self.references)])

    def score(self, totals):
        return 100 * totals[0] / totals[1]

    def sentence_scores(self, stats):
        return [self.score(row) for row in stats.tolist()]

    def report(self, stats):
        score = self.score(stats.sum(dim=0).tolist())
        return {"score": score, "text": f"EXACT = {score:.1f}"}


def test_a_registered_metric_is_scored_compared_and_offered_by_the_command(monkeypatch, files, tmp_path):
    from nmtkit import registry

    monkeypatch.setattr(registry, "METRICS", dict(registry.METRICS))
    registry.register_metric("exact")(lambda name, references, config, device: ExactMatch(references))
    half = write(tmp_path / "half.txt", HYPOTHESES[:4] + REFERENCES[4:])
    result = evaluate("--hyp", files["hyp"], "--ref", half, "--metrics", "exact,bleu", "--compare", files["base"],
                      "--samples", "10", "--json")
    scores = json.loads(result.stdout)
    reference = HYPOTHESES[:4] + REFERENCES[4:]
    expected = 100 * sum(hyp == ref for hyp, ref in zip(HYPOTHESES, reference)) / len(HYPOTHESES)
    assert scores["exact"]["score"] == expected and expected >= 40
    assert scores["exact"]["bootstrap"]["samples"] == 10 and "bleu" in scores
    assert "exact" in evaluate("--hyp", files["hyp"], "--ref", files["ref"], "--metrics", "meteor").stderr


def test_the_bootstrap_defaults_are_sacrebleus_as_the_library_function_has_them():
    from nmtkit.metrics import bootstrap

    assert (EvaluateConfig().samples, EvaluateConfig().seed) == (bootstrap.DEFAULT_SAMPLES, bootstrap.DEFAULT_SEED)


@pytest.fixture
def sets(tmp_path: Path) -> tuple[Path, Path]:
    """Robustness sets of the real test lines (HYPOTHESES as the source side, so that copying each set's source is
    a translation with known scores), and a directory of those copies."""
    from nmtkit.data.robustness import write_sets
    from nmtkit.data.robustness_config import RobustnessConfig

    src, ref = write(tmp_path / "test.src", HYPOTHESES), write(tmp_path / "test.en", REFERENCES)
    write_sets(Path(src), Path(ref), tmp_path / "sets", RobustnessConfig(sets=["upper", "merge"]))
    (tmp_path / "hyps").mkdir()
    for name in ("clean", "upper", "merge"):
        (tmp_path / "hyps" / f"{name}.hyp").write_bytes((tmp_path / "sets" / f"{name}.src").read_bytes())
    return tmp_path / "sets", tmp_path / "hyps"


def set_lines(directory: Path, name: str, side: str) -> list[str]:
    return (directory / f"{name}.{side}").read_text(encoding="utf-8").splitlines()


def test_sets_are_scored_side_by_side_clean_first(sets):
    directory, hyps = sets
    rows = evaluate("--sets", str(directory), "--hyp", str(hyps), "--device", "cpu").stdout.splitlines()
    assert rows[0].split() == ["set", "lines", "BLEU", "chrF"]
    bleu, chrf = BLEU(), CHRF()
    for row, name in zip(rows[1:4], ("clean", "upper", "merge"), strict=True):
        hypotheses, references = set_lines(directory, name, "src"), set_lines(directory, name, "ref")
        scores = bleu.corpus_score(hypotheses, [references]), chrf.corpus_score(hypotheses, [references])
        assert row.split() == [name, str(len(hypotheses)), *(f"{score.score:.2f}" for score in scores)]
    assert rows[4:] == [f"BLEU signature: {bleu.get_signature()}", f"chrF signature: {chrf.get_signature()}"]
    scores = json.loads(evaluate("--sets", str(directory), "--hyp", str(hyps), "--json", "--metrics", "bleu,ter",
                                 "--device", "cpu").stdout)
    assert list(scores) == ["clean", "upper", "merge"] and scores["merge"]["lines"] < scores["clean"]["lines"]
    merged = set_lines(directory, "merge", "src")
    assert scores["merge"]["ter"]["score"] == TER().corpus_score(merged, [set_lines(directory, "merge", "ref")]).score
    assert "text" not in scores["clean"]["bleu"]


def test_a_directory_of_reference_files_is_scored_too_and_its_language_given(sets, tmp_path: Path):
    directory, hyps = sets
    (directory / "sets.json").unlink()
    write(directory / "a-domain.ref", REFERENCES[:5])
    write(hyps / "a-domain.hyp", HYPOTHESES[:5])
    scores = json.loads(evaluate("--sets", str(directory), "--hyp", str(hyps), "--json", "--lang", "zh",
                                 "--device", "cpu").stdout)
    assert list(scores) == ["clean", "a-domain", "merge", "upper"]  # clean first, then by name
    assert "tok:zh" in scores["clean"]["bleu"]["signature"]


def test_a_missing_translation_or_a_stray_option_with_sets_is_a_one_line_error(sets, tmp_path: Path, files):
    directory, hyps = sets
    (hyps / "upper.hyp").unlink()
    cases = [(["--sets", str(directory), "--hyp", str(hyps)], "no translation of set 'upper'"),
             (["--sets", str(directory), "--hyp", files["hyp"]], "is not one"),
             (["--sets", files["hyp"], "--hyp", str(hyps)], "is not a directory"),
             (["--sets", str(directory), "--hyp", str(hyps), "--ref", files["ref"]], "drop --ref"),
             (["--sets", str(tmp_path), "--hyp", str(hyps)], "holds no <set>.ref file"),
             (["--hyp", files["hyp"]], "evaluate needs at least one --ref file")]
    for arguments, needle in cases:
        result = evaluate(*arguments)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1 and needle in result.stderr, result.stderr
    (directory / "sets.json").write_text("[1, 2]")
    result = evaluate("--sets", str(directory), "--hyp", str(hyps))
    assert result.exit_code == 1 and "is not a sets record written by nmtkit robustness" in result.stderr
