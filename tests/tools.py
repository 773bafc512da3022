"""A folder of the commands the recipes' shell scripts call, for tests that run those scripts.

The scripts call `python` and `nmtkit`. Under `make test` both are in the virtual environment's bin folder, but
where nmtkit runs from a checkout (PYTHONPATH, no install) there is no `nmtkit` command, and some systems have
`python3` and no `python`: this folder holds both, each running the interpreter of the tests.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path


@functools.cache
def tool_dir() -> str:
    """The folder holding `python` and `nmtkit`, to put first on a recipe's PATH (made once per test process)."""
    folder = Path(tempfile.mkdtemp(prefix="nmtkit-tools-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for name, command in (("python", f'exec "{sys.executable}" "$@"'),
                          ("nmtkit", f'exec "{sys.executable}" -m nmtkit "$@"')):
        script = folder / name
        script.write_text(f"#!/bin/sh\n{command}\n", encoding="utf-8")
        script.chmod(0o755)
    return str(folder)


def recipe_path(rest: str) -> str:
    """A PATH for a recipe's script: the folder of `tool_dir`, the interpreter's own bin folder, then `rest`."""
    return os.pathsep.join([tool_dir(), str(Path(sys.executable).parent), rest])
