"""What `nmtkit evaluate` computes and how: each metric's own options, and the command's settings.

A metric registers with its options dataclass, as a model registers with its config
(`@register_metric("chrf", "chrf++", options=ChrfOptions)`); the class checks its values when built. The command line
makes evaluate's flags at every start from `EvaluateConfig`: the command's own settings, then each class in
`OPTIONS` as `<prefix><field>` (`--chrf-char-order`), so this module imports neither torch nor the metrics (sacrebleu
only when a BLEU option is checked). A new metric with options is its class here, its module, and one line in
`nmtkit.metrics.builtin`.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeVar

from nmtkit.config.sections import option
from nmtkit.config.values import check_numbers
from nmtkit.errors import NmtkitError

LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,4})*")  # zh, yue, zh_CN, zh-Hant, es-419


@dataclass
class BleuOptions:
    """sacrebleu's BLEU options (its flags have no prefix: --smooth, --tokenize)."""

    prefix: ClassVar[str] = ""
    tokenize: str | None = option(None, "sacrebleu BLEU tokenizer: 13a, intl, zh, char, none, ... (default: the "
                                        "language's, else 13a)")
    smooth: str = option("exp", "BLEU smoothing: exp, floor, add-k or none")
    smooth_value: float | None = option(None, "BLEU smoothing value for floor (default 0.1) and add-k (default 1)")
    max_ngram_order: int = option(4, "BLEU's maximum n-gram order")

    def __post_init__(self):
        """Refuse, in one line, BLEU options that sacrebleu would reject with an assertion or a crash, or ignore."""
        check_numbers(self)
        from sacrebleu.metrics import BLEU

        if self.smooth not in BLEU.SMOOTH_DEFAULTS:
            raise NmtkitError(f"unknown BLEU smoothing {self.smooth!r}; choose from {', '.join(BLEU.SMOOTH_DEFAULTS)}")
        if self.smooth_value is not None and BLEU.SMOOTH_DEFAULTS[self.smooth] is None:
            raise NmtkitError(f"a smoothing value is for floor and add-k smoothing, not {self.smooth}")
        if self.smooth_value is not None and self.smooth_value < 0:
            raise NmtkitError(f"the BLEU smoothing value must not be negative, not {self.smooth_value}")
        if self.max_ngram_order < 1:
            raise NmtkitError(f"BLEU's maximum n-gram order must be at least 1, not {self.max_ngram_order}")


@dataclass
class ChrfOptions:
    prefix: ClassVar[str] = "chrf_"
    char_order: int = option(6, "chrF character n-gram order")
    word_order: int = option(0, "chrF word n-gram order (chrf++ is 2)")
    beta: int = option(2, "chrF's beta: recall weighs beta times as much as precision")
    whitespace: bool = option(False, "keep whitespace in chrF's character n-grams")
    eps_smoothing: bool = option(False, "chrF's epsilon smoothing (chrF++.py, NLTK, Moses) for every order")

    def __post_init__(self):
        """Refuse, in one line, chrF options for which sacrebleu's formula is undefined."""
        check_numbers(self)
        if self.char_order < 1 or self.word_order < 0:
            raise NmtkitError(f"chrF needs character n-gram order >= 1 and word order >= 0, not {self.char_order} and "
                              f"{self.word_order}")
        if self.beta < 0:
            raise NmtkitError(f"chrF's beta must not be negative, not {self.beta}")


@dataclass
class TerOptions:
    prefix: ClassVar[str] = "ter_"
    normalized: bool = option(False, "TER: normalize and tokenize punctuation as tercom does")
    no_punct: bool = option(False, "TER: remove punctuation")
    asian_support: bool = option(False, "TER: split CJK characters and punctuation (with normalized/no-punct)")
    case_sensitive: bool = option(False, "TER: case-sensitive (sacrebleu's TER lowercases by default)")


@dataclass
class EditOptions:
    prefix: ClassVar[str] = "edit_"
    costs: str = option("1,1,1", "edit distance costs 'ins,del,sub' (1,1,2 is Jurafsky and Martin's)")
    unit: Literal["char", "word"] = option("char", "edit distance over characters or whitespace tokens")

    def __post_init__(self):
        if self.unit not in ("char", "word"):
            raise NmtkitError(f"edit unit must be char or word, not {self.unit!r}")
        self.parsed_costs()

    def parsed_costs(self) -> tuple[int, int, int]:
        """'ins,del,sub', e.g. '1,1,2', as three integers (`nmtkit.metrics.edit.EditCosts` refuses negative ones)."""
        try:
            insertion, deletion, substitution = (int(part) for part in self.costs.split(","))
        except ValueError as error:
            raise NmtkitError(f"edit costs {self.costs!r} are not three integers 'ins,del,sub' such as "
                              "1,1,2") from error
        return insertion, deletion, substitution


OPTIONS: tuple[type, ...] = (BleuOptions, ChrfOptions, TerOptions, EditOptions)  # every metric's, for the flags

Options = TypeVar("Options")


@dataclass
class EvaluateSettings:
    """The command's own settings, whatever the metrics."""

    metrics: list[str] = option(["bleu", "chrf"], "metrics to compute, e.g. bleu,chrf,ter,wer (an unknown name lists "
                                                  "the registered ones)")
    device: str = option("auto", "auto (CUDA when present), cpu, cuda or cuda:N")
    sentence: bool = option(False, "also score each sentence (sentence BLEU uses effective order)")
    samples: int = option(1000, "paired bootstrap resamples when comparing with a baseline (sacrebleu's default)")
    seed: int = option(12345, "seed of the bootstrap resampling (sacrebleu's default)")
    lowercase: bool = option(False, "case-insensitive BLEU and chrF")
    lang: str | None = option(None, "target language code (zh, ja, th, de_DE...): picks BLEU's default tokenizer; "
                                    "default: the first reference file's suffix")

    def __post_init__(self):
        check_numbers(self)
        if self.lang is not None and not LANGUAGE_CODE.fullmatch(self.lang):
            raise NmtkitError(f"language {self.lang!r} is not a code such as zh, ja, th or de_DE")
        if self.samples < 1:
            raise NmtkitError(f"bootstrap needs at least one resample, not {self.samples}")
        for cls in OPTIONS:  # each metric's options checked by its class, now, before any scoring
            self.options(cls)

    def options(self, cls: type[Options]) -> Options:
        """A metric's options, from the `<prefix><field>` settings."""
        return cls(**{item.name: getattr(self, cls.prefix + item.name) for item in dataclasses.fields(cls)})


def _flags(cls: type) -> list[tuple[str, object, dataclasses.Field]]:
    """An options class's fields as `EvaluateConfig` fields, named with its prefix (same default and help)."""
    hints = typing.get_type_hints(cls)
    return [(cls.prefix + item.name, hints[item.name],
             dataclasses.field(default=item.default, metadata=item.metadata)) for item in dataclasses.fields(cls)]


EvaluateConfig = dataclasses.make_dataclass(
    "EvaluateConfig", [flag for cls in OPTIONS for flag in _flags(cls)], bases=(EvaluateSettings,),
    namespace={"__doc__": "What `nmtkit evaluate` computes and how: its settings and every metric's options.",
               "__module__": __name__})
