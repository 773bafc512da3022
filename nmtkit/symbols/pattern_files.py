"""Reading a placeholder pattern file (`--placeholders FILE`, `nmtkit.symbols.placeholders.load_patterns`): its entries,
each with the place it came from, for the errors that name a bad one; checking them is the caller's."""

from __future__ import annotations

from pathlib import Path

from nmtkit.errors import NmtkitError

# The built-in families that ran on Python's re, as manifests and checkpoints recorded them: their `\s` is Unicode
# whitespace there and ASCII on RE2, so a record of one of them is read as today's built-in of that name (which spells
# Python's whitespace out), and a model trained before masks as it did then.
BEFORE_RE2 = {
    "python": r"%\([^()\s]+\)[-+ #0]*(?:[0-9]+|\*)?(?:\.(?:[0-9]+|\*))?[diouxXeEfFgGcrsa%]",
    "brace": r"\{(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)?(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]{}]*\])*"
             r"(?:![rsa])?(?:,\s*-?[0-9]+)?(?::[^{}]*)?\}",
    "tag": r"</[A-Za-z][A-Za-z0-9:._-]*\s*>|<[A-Za-z][A-Za-z0-9:._-]*"
           r"(?:\s+[^\s\"'<>/=]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?)*\s*/?>",
}


def read_pattern_file(path: Path) -> list[tuple[str, str, str | None]]:
    """(where, name, regex) of each entry of a pattern file, YAML (`.yaml`, `.yml`) or `name<TAB>regex` lines; regex
    None names a built-in family. An unreadable file is a one-line error."""
    try:
        return _read_yaml(path) if path.suffix in (".yaml", ".yml") else _read_lines(path)
    except (OSError, UnicodeDecodeError) as error:
        raise NmtkitError(f"cannot read the pattern file {path} ({error})") from error


def _read_yaml(path: Path) -> list[tuple[str, str, str | None]]:
    """(where, name, regex) of each entry of a YAML mapping `name: regex` (`name:` alone: a built-in family)."""
    import yaml  # here, not at the top: PyYAML takes 30 ms to import, and only pattern files in YAML need it

    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise NmtkitError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from error
    if not isinstance(node, yaml.MappingNode):
        raise NmtkitError(f"{path}: a pattern file in YAML is a mapping of family names to regular expressions")
    entries = []
    for key, value in node.value:
        regex = None if value.tag.endswith(":null") else value.value if isinstance(value, yaml.ScalarNode) else value
        entries.append((f"{path}:{key.start_mark.line + 1}", key.value, regex))
    return entries


def _read_lines(path: Path) -> list[tuple[str, str, str | None]]:
    """(where, name, regex) of each `name<TAB>regex` line (a name alone: a built-in family); blank lines and lines
    starting with # are skipped."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            name, tab, regex = line.partition("\t")
            entries.append((f"{path}:{number}", name.strip(), regex if tab else None))
    return entries
