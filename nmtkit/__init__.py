"""nmtkit: a command-line neural machine translation toolkit.

`from nmtkit import Translator`: `Translator.load(path).translate(lines)` for a checkpoint or a directory written
by `nmtkit export` (imported on first use, so that `import nmtkit` stays light for the command line).
"""

from nmtkit.version import __version__  # noqa: F401


def __getattr__(name: str):
    if name == "Translator":
        from nmtkit.translate import Translator

        return Translator
    raise AttributeError(f"module 'nmtkit' has no attribute {name!r}")
