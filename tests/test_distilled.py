"""nmtkit filter-distilled (nmtkit/data/distilled.py): which distilled pairs are dropped, and the counts."""

from __future__ import annotations

import json
import os

import pytest
from cli_runner import assert_error, nmtkit

from nmtkit.data.distilled import filter_distilled
from nmtkit.data.distilled_config import DistillFilterConfig
from nmtkit.errors import NmtkitError

# (source, teacher translation, score per token): the median ratio is 1 word per word
PAIRS = [
    ("uno dos tres", "one two three", -0.2),
    ("cuatro cinco", "four five", -0.9),
    ("seis siete ocho", "six seven eight", -0.5),
    ("nueve", "nine nine nine nine nine nine nine", -0.3),  # a hallucinated repetition: ratio 1/7
    ("diez once", "", -2.0),  # an empty translation
    ("doce trece", "twelve thirteen", -1.5),
    ("catorce", "fourteen", -0.1),
    ("quince dieciseis", "fifteen sixteen", -0.4),
]


def write_pairs(tmp_path, pairs=PAIRS):
    (tmp_path / "train.es").write_text("".join(src + "\n" for src, _, _ in pairs), encoding="utf-8")
    (tmp_path / "distilled.en").write_text("".join(f"{hyp} ||| {score:.4f}\n" for _, hyp, score in pairs),
                                           encoding="utf-8")
    return tmp_path / "train.es", tmp_path / "distilled.en"


def run(tmp_path, config: DistillFilterConfig) -> tuple[dict, list[str], list[str]]:
    src, hyp = write_pairs(tmp_path)
    summary = filter_distilled(src, hyp, tmp_path / "out.es", tmp_path / "out.en", config)
    return (summary, (tmp_path / "out.es").read_text(encoding="utf-8").splitlines(),
            (tmp_path / "out.en").read_text(encoding="utf-8").splitlines())


def test_ratio_outliers_and_empty_translations_are_dropped_and_counted(tmp_path):
    summary, sources, targets = run(tmp_path, DistillFilterConfig(max_ratio=2.0))
    assert summary["removed"] == {"empty": 1, "length_ratio": 1, "score": 0}
    assert summary["read"] == len(PAIRS) and summary["kept"] == len(PAIRS) - 2 == len(sources) == len(targets)
    assert "nueve" not in sources and "diez once" not in sources
    assert sources[targets.index("twelve thirteen")] == "doce trece"  # kept pairs stay aligned, scores removed
    assert summary["median_length_ratio"] == 1.0


def test_drop_worst_drops_the_lowest_scores_among_the_pairs_left(tmp_path):
    summary, sources, _ = run(tmp_path, DistillFilterConfig(max_ratio=2.0, drop_worst=0.25))
    assert summary["removed"] == {"empty": 1, "length_ratio": 1, "score": 2}  # 25% of 8 pairs
    assert "doce trece" not in sources and "cuatro cinco" not in sources  # -1.5 and -0.9: the worst left
    assert summary["kept_score_range"] == [-0.5, -0.1]


def test_nothing_but_empty_pairs_dropped_when_off(tmp_path):
    summary, sources, _ = run(tmp_path, DistillFilterConfig(max_ratio=0.0, drop_worst=0.0))
    assert summary["removed"] == {"empty": 1, "length_ratio": 0, "score": 0}
    assert "nueve" in sources


def test_command_prints_and_writes_the_report(tmp_path):
    src, hyp = write_pairs(tmp_path)
    result = nmtkit("filter-distilled", "--src", str(src), "--hyp", str(hyp), "--out-src", str(tmp_path / "a"),
                    "--out-tgt", str(tmp_path / "b"), "--drop-worst", "0.25", "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert json.loads(result.stdout)["kept"] == 4


def test_errors(tmp_path):
    src, hyp = write_pairs(tmp_path)
    hyp.write_text("one two three\n" * len(PAIRS), encoding="utf-8")
    args = ["filter-distilled", "--src", str(src), "--hyp", str(hyp), "--out-src", str(tmp_path / "a"),
            "--out-tgt", str(tmp_path / "b")]
    assert_error(nmtkit(*args), "distilled.en:1", "--scores")
    assert_error(nmtkit(*args, "--max-ratio", "0.5"), "max_ratio")
    assert_error(nmtkit(*args, "--drop-worst", "1.5"), "drop_worst")
    with pytest.raises(NmtkitError, match="lines"):
        hyp.write_text("one ||| -1\n", encoding="utf-8")
        filter_distilled(src, hyp, tmp_path / "a", tmp_path / "b", DistillFilterConfig())


def distill_args(src, hyp, out_src, out_tgt, *extra) -> list[str]:
    return ["filter-distilled", "--src", str(src), "--hyp", str(hyp), "--out-src", str(out_src),
            "--out-tgt", str(out_tgt), *extra]


@pytest.mark.parametrize(("line", "needle"), [
    ("one two", "no ` ||| score`"), ("one ||| nan", "a finite number"), ("one ||| inf", "a finite number"),
    ("one ||| -Infinity", "a finite number"), ("one ||| abc", "a finite number"), ("one ||| ", "no ` ||| score`"),
    ("one ||| 1e999", "a finite number")])
def test_a_score_that_is_not_a_finite_number_is_an_error_naming_the_line(tmp_path, line, needle):
    """A NaN score ranked last and left `kept_score_range` NaN (invalid JSON in the summary); now no score but a
    finite one is read."""
    src, hyp = write_pairs(tmp_path)
    lines = hyp.read_text(encoding="utf-8").splitlines()
    lines[5] = line
    hyp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_error(nmtkit(*distill_args(src, hyp, tmp_path / "a", tmp_path / "b")), "distilled.en:6", needle)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize(("src_bytes", "hyp_bytes", "needle"), [
    (b"", b"", "empty"), (b"uno\n", b"one ||| -1\ntwo ||| -1\n", "has 1 lines but"),
    (b"uno\ndos\n", b"one ||| -1\n", "has 2 lines but"), (b"uno \xff\n", b"one ||| -1\n", "train.es:1: invalid UTF-8"),
    (b"uno\n", b"one \xc3 ||| -1\n", "distilled.en:1: invalid UTF-8")])
def test_hostile_files_are_one_line_errors_and_write_nothing(tmp_path, src_bytes, hyp_bytes, needle):
    src, hyp = tmp_path / "train.es", tmp_path / "distilled.en"
    src.write_bytes(src_bytes)
    hyp.write_bytes(hyp_bytes)
    (tmp_path / "a").write_text("kept from before\n")
    assert_error(nmtkit(*distill_args(src, hyp, tmp_path / "a", tmp_path / "b")), needle)
    assert (tmp_path / "a").read_text() == "kept from before\n" and not (tmp_path / "b").exists()


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_outputs_onto_the_inputs_or_each_other_are_refused(tmp_path, link):
    src, hyp = write_pairs(tmp_path)
    target = tmp_path / "alias"
    if link == "symlink":
        target.symlink_to(src)
    elif link == "hardlink":
        target.hardlink_to(src)
    else:
        target = src
    before = src.read_bytes(), hyp.read_bytes()
    assert_error(nmtkit(*distill_args(src, hyp, target, tmp_path / "b")), "--out-src", "--src")
    assert_error(nmtkit(*distill_args(src, hyp, tmp_path / "a", tmp_path / "b", "--report", str(hyp))), "--report")
    assert_error(nmtkit(*distill_args(src, hyp, tmp_path / "a", tmp_path / "a")), "--out-src and --out-tgt")
    assert (src.read_bytes(), hyp.read_bytes()) == before
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_full_disk_is_one_line_and_the_previous_outputs_stay(tmp_path, monkeypatch):
    """Each output is written to a temporary file that the kernel refuses (/dev/full: ENOSPC), as a full disk."""
    src, hyp = write_pairs(tmp_path)
    (tmp_path / "a").write_text("a from before\n")
    (tmp_path / "b").write_text("b from before\n")

    def full_disk(handle, *args, **kwargs):
        os.close(handle)
        return open("/dev/full", *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", full_disk)  # every temporary file of nmtkit.data.files.replacing
    assert_error(nmtkit(*distill_args(src, hyp, tmp_path / "a", tmp_path / "b")), "cannot write", "/a",
                 "No space left on device", "kept")
    assert (tmp_path / "a").read_text() == "a from before\n" and (tmp_path / "b").read_text() == "b from before\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b", "distilled.en", "train.es"]
