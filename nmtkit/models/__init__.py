"""The model zoo. Each architecture lives in its own file and registers itself on import."""

from nmtkit.models import bahdanau, convs2s, gnmt, luong, seq2seq, transformer  # noqa: F401
