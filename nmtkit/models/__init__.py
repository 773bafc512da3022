"""The model zoo. Each architecture lives in its own file and registers itself on import."""

from nmtkit.models import transformer  # noqa: F401
