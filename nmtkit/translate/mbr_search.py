"""MBR decoding over any engine (`decode.mbr` N): the engine draws each line's N candidates (`candidate_search`: the
N-best of a beam of N, or N samples, each source searched N times in one batch), which are decoded to text and
ranked by `nmtkit.decoding.mbr.mbr_choices` (the utility between candidates, on the engine's device where it has
one). Imported only when MBR is asked for: it needs torch, which an exported model's translation otherwise does
not import."""

from __future__ import annotations

from collections.abc import Callable

import torch

from nmtkit.config.sections import DecodeConfig
from nmtkit.data.subword import Subword
from nmtkit.decoding.hypotheses import Hypothesis
from nmtkit.decoding.mbr import mbr_choices
from nmtkit.translate.engine import Engine, override_decode


def candidate_decode(decode: DecodeConfig) -> DecodeConfig:
    """The search settings that draw MBR's candidates: a beam of N and its N-best, or one sample (drawn N times)."""
    if decode.mbr_candidates == "beam":
        return override_decode(decode, {"mbr": 0, "beam": decode.mbr, "nbest": decode.mbr, "epsilon": 0.0})
    return override_decode(decode, {"mbr": 0, "sample": True, "beam": 1, "nbest": 1})


def candidate_search(engine: Engine, sources: list[list[int]], constraints: list | None,
                     check: Callable[[], None] | None) -> list[list[Hypothesis]]:
    """Each source's candidates, as the engine's search with `candidate_decode`'s settings finds them."""
    count = engine.decode.mbr
    searcher = engine.with_decode(candidate_decode(engine.decode))
    if engine.decode.mbr_candidates == "beam":
        return searcher.search(sources, constraints, check)
    repeated = [ids for ids in sources for _ in range(count)]
    found = searcher.search(repeated, None, check)
    return [[hyps[0] for hyps in found[row * count: (row + 1) * count]] for row in range(len(sources))]


def mbr_search(engine: Engine, subword: Subword, sources: list[list[int]], constraints: list | None,
               check: Callable[[], None] | None) -> list[list[Hypothesis]]:
    """`Engine.search` under MBR: each source's chosen candidate, alone (`decode.nbest` is 1 under MBR)."""
    found = candidate_search(engine, sources, constraints, check)
    texts = subword.decode([hyp.tokens for hyps in found for hyp in hyps])
    candidates, start = [], 0
    for hyps in found:
        candidates.append(texts[start: start + len(hyps)])
        start += len(hyps)
    choices = mbr_choices(candidates, engine.decode.mbr_utility, torch.device(str(engine.device)), check)
    return [[hyps[choice]] for hyps, choice in zip(found, choices)]
