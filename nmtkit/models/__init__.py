"""The model zoo. Each architecture lives in its own file and registers itself on import."""

import nmtkit.models.bahdanau  # noqa: F401
import nmtkit.models.convs2s  # noqa: F401
import nmtkit.models.gnmt  # noqa: F401
import nmtkit.models.luong  # noqa: F401
import nmtkit.models.seq2seq  # noqa: F401
import nmtkit.models.transformer  # noqa: F401
