"""What `nmtkit score-pairs` keeps: `PairScoreConfig`, each setting with its default and help text.

The command line makes its options from these fields at every start, whatever the command, so this module imports
neither torch nor numpy (`nmtkit.scoring.command` does the scoring).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmtkit.config.sections import LINE_CAP_HELP, MAX_LINE_BYTES, option
from nmtkit.config.values import check_numbers
from nmtkit.errors import NmtkitError


@dataclass
class PairScoreConfig:
    """How `nmtkit score-pairs` scores sentence pairs and which it keeps."""

    keep: float = option(1.0, "with --out-src/--out-tgt: keep this share (0-1] of the scored pairs, those with the "
                              "best scores", low=0.0, high=1.0)
    min_score: float = option(0.0, "with --out-src/--out-tgt: keep only pairs scoring at least this (0-1; 0 = off)",
                              low=0.0, high=1.0)
    entropies: bool = option(False, "write `score<TAB>H(tgt|src)<TAB>H(src|tgt)<TAB>status` a line (the two "
                                    "models' cross-entropies per token, in nats; status scored, empty or too_long) "
                                    "instead of the score alone")
    src_lang: str = option("", "language of --src: the target-language tag of a multilingual --reverse-model")
    tgt_lang: str = option("", "language of --tgt: the target-language tag of a multilingual -m model")
    batch_tokens: int = option(4000, "token budget per batch (the longer side of each pair, padding included); "
                                     "memory is about 12 bytes x batch_tokens x the target vocabulary", 1, 1 << 20)
    max_line_bytes: int = option(MAX_LINE_BYTES, LINE_CAP_HELP, low=1)

    def __post_init__(self):
        check_numbers(self)
        if self.keep == 0:
            raise NmtkitError("keep is the share of scored pairs to keep, more than 0 and at most 1 (0.8: the best "
                              "80%); got 0")

    @property
    def selects(self) -> bool:
        """Whether these settings drop pairs (they are meant for --out-src/--out-tgt)."""
        return self.keep < 1 or self.min_score > 0
