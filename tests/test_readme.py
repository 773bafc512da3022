"""README.md is for users: it opens with the two commands, stays short, and every figure in it has a home.

A figure (a two-decimal number such as 30.65, or a thousands-separated one such as 18,157) lives in one place: a
recipe's README or docs/*.md (docs/benchmarks.md for speed comparisons). README may quote it, but only as it
stands there, so a re-measurement is written once and the README cannot drift from it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 160
FIRST_COMMANDS = ("make recipe-bible", "make test")

# Not preceded by a digit, point or comma, and not part of a longer number or a version such as 2.13.0.
FIGURE = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+|\d+\.\d\d)(?![\d]|[.,]\d)")
# Python's version is not a measurement.
VERSION = re.compile(r"Python \d+\.\d+")


def figures(text: str) -> list[str]:
    """The two-decimal and thousands-separated figures of `text`, in order, versions left out."""
    return FIGURE.findall(VERSION.sub("", text))


def homes_text() -> str:
    paths = sorted(ROOT.glob("docs/*.md")) + sorted(ROOT.glob("recipes/*/README.md"))
    return "\n".join(path.read_text(encoding="utf-8") for path in paths)


def test_figures_finds_both_kinds_and_skips_versions():
    text = "BLEU 30.65 after 18,157 updates (torch 2.13.0, Python 3.11, 1.5 s, 1,002 verses, 12.345)"
    assert figures(text) == ["30.65", "18,157", "1,002"]


def test_every_readme_figure_stands_in_its_home():
    homes = set(figures(homes_text()))
    missing = [figure for figure in figures(README.read_text(encoding="utf-8")) if figure not in homes]
    assert not missing, f"README figures found in no recipe README or docs page: {missing}"


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES
    start = lines.index("```")
    assert start <= 2, "the commands come first, right under the title"
    first_block = lines[start + 1:]
    commands = [line.split("#")[0].strip() for line in first_block[:len(FIRST_COMMANDS)]]
    assert tuple(commands) == FIRST_COMMANDS
    assert first_block[len(FIRST_COMMANDS)] == "```"
