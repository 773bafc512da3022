"""The command line's log handler: records logged after an in-process command go to the sys.stderr of their time."""

from __future__ import annotations

import logging

from cli_runner import nmtkit


def test_records_after_an_in_process_command_reach_the_current_stderr(capsys):
    """The runner closes the sys.stderr it gave the command; a handler bound to it would print `--- Logging error
    --- ValueError: I/O operation on closed file` for every later record (issue 47, item 10)."""
    result = nmtkit("translate", "-m", "/nonexistent/model.pt", stdin="a\n")
    assert result.exit_code != 0 and "error:" in result.stderr
    capsys.readouterr()
    logging.getLogger("nmtkit").warning("logged after the command")
    err = capsys.readouterr().err
    assert "logged after the command" in err and "Logging error" not in err
