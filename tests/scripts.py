"""Scripts that are not part of the package (recipes/, benchmarks/): import one as a module for its tests, or give
a recipe's shell script a PATH holding the commands it calls."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative_path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def tool_dir() -> str:
    """A folder holding `python` and `nmtkit`, each running the tests' interpreter (made once per test process).

    The recipes' scripts call both. Under `make test` they are in the virtual environment's bin folder, but where
    nmtkit runs from a checkout (PYTHONPATH, no install) there is no `nmtkit` command, and some systems have `python3`
    and no `python`."""
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


def stand_in_nmtkit(folder: Path, script: str) -> tuple[dict[str, str], Path]:
    """An environment whose `nmtkit` is `script` (a stand-in that logs its calls to the returned file and trains
    nothing), ahead of `recipe_path`'s tools."""
    bin_dir, calls = folder / "bin", folder / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nmtkit").write_text(script)
    (bin_dir / "nmtkit").chmod(0o755)
    calls.unlink(missing_ok=True)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}" + recipe_path(os.environ["PATH"]),
            "NMTKIT_CALLS": str(calls)}, calls
