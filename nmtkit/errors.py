"""The one exception type the CLI turns into a one-line error message and a non-zero exit."""


class NmtkitError(Exception):
    """An error caused by the user's input or environment, reported without a traceback."""
