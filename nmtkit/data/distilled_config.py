"""What `nmtkit filter-distilled` drops: `DistillFilterConfig`, each setting with its default and help text.

The command line makes its options from these fields at every start, whatever the command, so this module imports
neither numpy nor the corpus readers (`nmtkit.data.distilled` does the filtering).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmtkit.config.sections import LINE_CAP_HELP, MAX_LINE_BYTES, option
from nmtkit.config.values import check_numbers
from nmtkit.errors import NmtkitError


@dataclass
class DistillFilterConfig:
    """Which distilled pairs `nmtkit filter-distilled` drops."""

    max_ratio: float = option(2.0, "drop pairs whose length ratio (source / translation, in words as prepare counts "
                                   "them) differs from the distilled pairs' median ratio by more than this factor "
                                   "(0 = off)", low=0.0)
    drop_worst: float = option(0.0, "drop this share (0-1) of the pairs, those with the lowest teacher score per "
                                    "token", low=0.0, high=1.0)
    max_line_bytes: int = option(MAX_LINE_BYTES, LINE_CAP_HELP, low=1)

    def __post_init__(self):
        check_numbers(self)
        if 0 < self.max_ratio < 1:
            raise NmtkitError(f"max_ratio is a factor of at least 1 (or 0 = off), got {self.max_ratio}")
