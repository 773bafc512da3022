"""What `nmtkit robustness` writes: `RobustnessConfig`, each setting with its default and help text.

The command line makes its options from these fields at every start, whatever the command, so this module imports
neither numpy nor the readers (`nmtkit.data.robustness` writes the sets).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmtkit.config.sections import LINE_CAP_HELP, MAX_LINE_BYTES, option
from nmtkit.config.values import check_numbers
from nmtkit.errors import NmtkitError

# The messy sets, named as Mozilla's translations pipeline names its flores_aug sets where they mean the same.
SET_NAMES = ("title", "upper", "punct", "typos", "merge", "inline-noise")
CLEAN = "clean"  # the test set as it is, written beside them and scored first


@dataclass
class RobustnessConfig:
    """Which robustness sets `nmtkit robustness` writes, and how."""

    sets: list[str] = option(list(SET_NAMES), "the sets to write beside clean: title (each word capitalised), upper, "
                                              "punct (no final mark where both sides end in one of a kind), typos "
                                              "(the source only), merge (2-3 lines to a line), inline-noise (the same "
                                              "Unicode noise in both sides)")
    seed: int = option(1, "seed of the sets' random draws (typos, merged lines, noise): the same sets for the same "
                          "seed and test set")
    max_bytes: int = option(1 << 27, "the largest test set file read, in bytes: a larger one is an error before "
                                     "anything is read", low=1)
    max_line_bytes: int = option(MAX_LINE_BYTES, LINE_CAP_HELP, low=1)

    def __post_init__(self):
        check_numbers(self)
        unknown = [name for name in self.sets if name not in SET_NAMES]
        if unknown or len(set(self.sets)) != len(self.sets):
            problem = f"unknown set {', '.join(map(repr, unknown))}" if unknown else f"a set named twice: {self.sets}"
            raise NmtkitError(f"{problem}; the sets are {', '.join(SET_NAMES)}")
