"""nmtkit: a command-line neural machine translation toolkit.

`from nmtkit import Translator`: `Translator.load(path).translate(lines)` for a checkpoint or a directory written
by `nmtkit export` (imported on first use, so that `import nmtkit` stays light for the command line).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Translator":
        from nmtkit.translate import Translator

        return Translator
    raise AttributeError(f"module 'nmtkit' has no attribute {name!r}")
