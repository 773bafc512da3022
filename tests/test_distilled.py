"""nmtkit filter-distilled (nmtkit/data/distilled.py): which distilled pairs are dropped, and the counts."""

from __future__ import annotations

import json

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
