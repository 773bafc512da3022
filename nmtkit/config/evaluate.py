"""What `nmtkit evaluate` computes and how: `EvaluateConfig`, each setting with its default and help text.

The command line makes its options from these fields at every start, whatever the command, so this module imports
neither torch nor the metrics: the checks that need them (metric names, each metric's options) are
`nmtkit.metrics.command.check_config`, run before any scoring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from nmtkit.config.sections import option
from nmtkit.config.values import check_numbers
from nmtkit.errors import NmtkitError

LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,4})*")  # zh, yue, zh_CN, zh-Hant, es-419


@dataclass
class EvaluateConfig:
    """What `nmtkit evaluate` computes and how."""

    metrics: list[str] = option(["bleu", "chrf"], "metrics to compute, e.g. bleu,chrf,ter,wer (an unknown name lists "
                                                  "the registered ones)")
    device: str = option("auto", "auto (CUDA when present), cpu, cuda or cuda:N")
    sentence: bool = option(False, "also score each sentence (sentence BLEU uses effective order)")
    samples: int = option(1000, "paired bootstrap resamples when comparing with a baseline (sacrebleu's default)")
    seed: int = option(12345, "seed of the bootstrap resampling (sacrebleu's default)")
    lowercase: bool = option(False, "case-insensitive BLEU and chrF")
    lang: str | None = option(None, "target language code (zh, ja, th, de_DE...): picks BLEU's default tokenizer; "
                                    "default: the first reference file's suffix")
    tokenize: str | None = option(None, "sacrebleu BLEU tokenizer: 13a, intl, zh, char, none, ... (default: the "
                                        "language's, else 13a)")
    smooth: str = option("exp", "BLEU smoothing: exp, floor, add-k or none")
    smooth_value: float | None = option(None, "BLEU smoothing value for floor (default 0.1) and add-k (default 1)")
    max_ngram_order: int = option(4, "BLEU's maximum n-gram order")
    chrf_char_order: int = option(6, "chrF character n-gram order")
    chrf_word_order: int = option(0, "chrF word n-gram order (chrf++ is 2)")
    chrf_beta: int = option(2, "chrF's beta: recall weighs beta times as much as precision")
    chrf_whitespace: bool = option(False, "keep whitespace in chrF's character n-grams")
    chrf_eps_smoothing: bool = option(False, "chrF's epsilon smoothing (chrF++.py, NLTK, Moses) for every order")
    ter_normalized: bool = option(False, "TER: normalize and tokenize punctuation as tercom does")
    ter_no_punct: bool = option(False, "TER: remove punctuation")
    ter_asian_support: bool = option(False, "TER: split CJK characters and punctuation (with normalized/no-punct)")
    ter_case_sensitive: bool = option(False, "TER: case-sensitive (sacrebleu's TER lowercases by default)")
    edit_costs: str = option("1,1,1", "edit distance costs 'ins,del,sub' (1,1,2 is Jurafsky and Martin's)")
    edit_unit: Literal["char", "word"] = option("char", "edit distance over characters or whitespace tokens")

    def __post_init__(self):
        check_numbers(self)
        if self.lang is not None and not LANGUAGE_CODE.fullmatch(self.lang):
            raise NmtkitError(f"language {self.lang!r} is not a code such as zh, ja, th or de_DE")
        if self.edit_unit not in ("char", "word"):
            raise NmtkitError(f"edit unit must be char or word, not {self.edit_unit!r}")
        if self.samples < 1:
            raise NmtkitError(f"bootstrap needs at least one resample, not {self.samples}")
