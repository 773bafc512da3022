"""The command line run in-process (a subprocess per call would cost seconds of imports), and its error contract."""

from __future__ import annotations

from typer.testing import CliRunner

from nmtkit.cli import app


def nmtkit(*args: str, stdin: str | None = None):
    """`nmtkit --quiet ARGS` through typer's runner; the result has exit_code, stdout, stderr and exception."""
    return CliRunner().invoke(app, ["--quiet", *args], input=stdin)


def assert_error(result, *needles: str) -> None:
    """One `error:` line naming every one of `needles`, a non-zero exit, no traceback."""
    assert result.exit_code != 0, result.stdout
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
