"""The restrictions that a line asks for by a request field (`nmtkit.decoding.restriction`): registering one here
makes its field a key of `--input-format jsonl` lines and of `serve`'s sentence objects. A new restriction is one
class, in a module of its own, and one line here; this module imports no torch (reading requests must not)."""

from nmtkit.decoding.restriction import RESTRICTIONS, register_restriction


def count_at_least(least: int):
    """A check for a whole number >= `least` (JSON's true and false are not numbers here)."""

    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"must be a whole number >= {least}")
        return value

    return check


register_restriction("no_repeat_ngram", count_at_least(1), "nmtkit.decoding.no_repeat:NoRepeatNgram")

__all__ = ["RESTRICTIONS"]
