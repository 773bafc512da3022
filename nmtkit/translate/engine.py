"""What a `Translator` needs of an engine: one search method over batches of subword ids, and the capabilities it
declares (the translator and `nmtkit serve` read these, never the engine's type). The engines:
`torch_engine.TorchEngine` (a checkpoint, `nmtkit.decoding.search`) and `ctranslate2_engine.CTranslate2Engine` (a
directory written by `nmtkit export`); keep torch out of an engine's imports when it runs without PyTorch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from nmtkit.config.sections import DecodeConfig, to_dict
from nmtkit.config.values import from_dict
from nmtkit.data.subword import Subword
from nmtkit.data.tags import tag_ids
from nmtkit.decoding.hypotheses import Hypothesis
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError


def override_decode(defaults: DecodeConfig, overrides: dict) -> DecodeConfig:
    """`defaults` with `overrides` (DecodeConfig field -> value) applied and validated; unknown names are errors."""
    return from_dict(DecodeConfig, {**to_dict(defaults), **overrides}, "decode.")


def check_tags(decode: DecodeConfig, loaded: LoadedFiles) -> None:
    """An error for a decode.tgt_lang that a multilingual model lacks, or a decode.tag (corpus tag) that the model
    was not trained with."""
    lang = decode.tgt_lang
    if lang and loaded.tags and lang not in loaded.tags:
        raise NmtkitError(f"unknown --tgt-lang {lang!r}; this model translates into {', '.join(sorted(loaded.tags))}")
    if decode.tag:
        tag_ids(decode.tag, loaded.src_subword, loaded.tags)


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do besides searching one batch at a time with plain search settings."""

    constraints: bool = False  # lexical constraints and prefixes (`encode_constraints`, then `search`)
    alignments: bool = False  # word alignments from the model's attention (`align`)
    guards_placeholders: bool = False  # its search keeps the source's placeholder symbols (`decode.guard_placeholders`)
    workers: int = 1  # batches it searches at once (`search` called from that many threads)
    batch_tokens: int = 0  # most source tokens of a batch it searches fastest (0: no such cap)


class LoadedFiles(Protocol):
    """The parts of a loaded model that the translator's pipeline reads (both `LoadedModel` and `ExportedModel`)."""

    src_subword: Subword
    tgt_subword: Subword
    langs: tuple[str | None, str | None]
    tags: dict[str, int]  # a multilingual model's target languages and their tag ids
    placeholders: dict | None  # the placeholder masking of its training data (`prepare`'s record); None: none


class Engine(Protocol):
    """Searches batches of subword ids with one set of search settings (`decode`)."""

    name: str  # "PyTorch", "CTranslate2": named in errors and in `nmtkit serve`'s /health
    loaded: LoadedFiles
    decode: DecodeConfig
    max_source: int  # the longest source it reads, EOS excluded
    capabilities: Capabilities
    device: object  # where it computes, as torch names it (torch.device, or "cpu", "cuda:0"): MBR's utilities too

    def with_decode(self, decode: DecodeConfig) -> Engine:
        """This engine with other search settings, sharing the loaded model; NmtkitError for settings it lacks."""

    def search(self, sources: list[list[int]], constraints: list | None,
               check: Callable[[], None] | None) -> list[list[Hypothesis]]:
        """Up to `decode.nbest` hypotheses per source (ids without EOS), best first; `constraints` (one per source,
        from `encode_constraints`, or None) only where declared; `check` is called before each decoding step (or
        before the batch, where a search cannot stop between steps) and stops the search by raising."""

    def encode_constraints(self, request: Request) -> object:
        """A request's constraints and prefix in the engine's form (only where `capabilities.constraints`)."""

    def token_log_probs(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[float]]:
        """log p of each target token and of the EOS that ends it (len(target) + 1 values), each (source, target)
        pair of ids teacher-forced through the model (`nmtkit.decoding.confidence`)."""

    def align(self, lines: list[str], translations: list[str]) -> list[str]:
        """Pharaoh word links of each line and its translation (only where `capabilities.alignments`)."""

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[list[float]]]:
        """The model's attention when teacher-forced on each (source, target) pair of ids: a row over the source
        tokens for each target token (and maybe more, for EOS); no rows for a model without attention. Places a
        placeholder that a translation lost (`nmtkit.translate.repair`)."""
