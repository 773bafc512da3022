"""Imports flow downhill (ARCHITECTURE.md): no import circles among nmtkit's modules, counting the imports hidden
inside functions, and every module imports on its own (first, in a fresh interpreter)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nmtkit"



def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def known_module(name: str) -> str:
    """The nmtkit module an import of `name` executes: the longest prefix of it that is a module."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imported_modules(name: str) -> set[str]:
    """Every nmtkit module `name` imports, at module level or inside functions; relative imports resolved."""
    package = name if is_package(name) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names)
    return {known_module(target) for target in found if target == "nmtkit" or target.startswith("nmtkit.")} - {name}


def import_graph() -> dict[str, set[str]]:
    return {name: imported_modules(name) for name in MODULES}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component, member = set(), None
            while member != node:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_import_graph_is_read_from_the_source():
    graph = import_graph()
    assert "nmtkit.data.dataset" in graph["nmtkit.translate.torch_engine"]
    assert "nmtkit.translate.torch_engine" in graph["nmtkit.translate.translator"]  # inside a function
    assert "nmtkit.errors" in graph["nmtkit.cli"]
    assert "nmtkit.training.command" in graph["nmtkit.cli"]  # an import inside a function counts


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [{"a", "b", "c"}]


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, f"import circles: {found}"


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in packages)


def test_training_is_imported_by_the_command_line_alone():
    graph = import_graph()
    importers = {name for name, targets in graph.items()
                 if not within(name, ("nmtkit.training",)) and any(within(t, ("nmtkit.training",)) for t in targets)}
    assert importers == {"nmtkit.cli"}


def test_the_data_package_imports_nothing_above_it():
    """prepare takes a checkpoint's vocabulary through nmtkit.checkpoint.file, below the models, not through
    nmtkit.checkpoint.payload or fine-tuning."""
    above = ("nmtkit.cli", "nmtkit.training", "nmtkit.translate", "nmtkit.align", "nmtkit.decoding.search",
             "nmtkit.checkpoint.payload", "nmtkit.config.run", "nmtkit.models", "nmtkit.modules")
    graph = import_graph()
    upward = {name: sorted(t for t in targets if within(t, above))
              for name, targets in graph.items() if within(name, ("nmtkit.data",))}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def run_python(script: str) -> str:
    """The standard output of `script` in a fresh interpreter on this checkout, which must succeed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_module_imports_on_its_own():
    """Each module imported first, with no nmtkit module loaded before it (a circle or a missing import shows up
    as an ImportError only in that order); one interpreter, nmtkit's modules cleared between imports."""
    names = sorted(name for name in MODULES if name != "nmtkit.__main__")  # __main__ runs the command line
    script = ("import importlib, sys\n"
              f"for name in {names!r}:\n"
              "    for loaded in [key for key in sys.modules if key == 'nmtkit' or key.startswith('nmtkit.')]:\n"
              "        del sys.modules[loaded]\n"
              "    try:\n"
              "        importlib.import_module(name)\n"
              "    except Exception as error:\n"
              "        print(f'{name}: {type(error).__name__}: {error}')\n")
    assert run_python(script) == ""


def test_the_exported_model_path_imports_no_torch():
    """`nmtkit translate -m EXPORTED_DIR` starts without torch (about 2 s of imports against CTranslate2's 0.2 s)
    or numpy (0.08 s): the modules on its path import neither when loaded (tests/test_export.py translates through
    them)."""
    path = ["nmtkit.cli", "nmtkit.translate", "nmtkit.translate.translator", "nmtkit.translate.engine",
            "nmtkit.translate.exported", "nmtkit.translate.ctranslate2_engine", "nmtkit.decoding.hypotheses",
            "nmtkit.data.batching"]
    script = ("import importlib, sys\n"
              f"for name in {path!r}:\n"
              "    importlib.import_module(name)\n"
              "print(sorted(name for name in sys.modules if name.split('.')[0] in ('torch', 'numpy'))[:3])\n")
    assert run_python(script) == "[]\n"
