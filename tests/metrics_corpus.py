"""Corpora for the metrics parity tests: seeded random text full of awkward cases, and a little real text."""

from __future__ import annotations

import random

WORDS = [
    "the", "cat", "sat", "on", "a", "mat", "The", "CAT", "Der", "Hund", "läuft", "naïve", "café", "ΣΑΣ", "ς",
    "İstanbul", "straße", "ﬁne", "日本語", "中文", "测试", "，", "。", "это", "тест", "3.14", "1,000", ".5", "5.",
    "9-5", "e-mail", "U.S.", "don't", "&amp;", "&quot;hi&quot;", "&lt;b&gt;", "<skipped>", "(x)", "[y]", "{z}",
    "$5", "100%", "a/b", "@home", "#tag", "...", "--", "-", "!", "?", ",", ".", ";", ":", '"', "'", "«", "»",
    "—", "…", "¿", "€", "🙂", "x", "y",
]
SPACES = [" "] * 8 + ["  ", "\t", "\u00a0", "\u3000", "\u2003"]

REAL = [  # (reference, hypothesis)
    ("The European Union's 27 member states agreed on Tuesday to cut emissions by 55% by 2030.",
     "On Tuesday, the 27 EU member states agreed to reduce emissions by 55 % by 2030."),
    ("\"We are not there yet,\" said the minister, adding that talks would resume in January.",
     "\"We're not there yet\", the minister said, adding talks would resume in January."),
    ("Prices rose 3.2 per cent year-on-year in October, the fastest pace since 1992.",
     "Prices rose by 3.2% year on year in October - the fastest pace since 1992."),
    ("Die Katze saß auf der Matte.", "Die Katze sass auf der Matte."),
    ("Il a dit : « Nous verrons demain. »", "Il a dit: « On verra demain. »"),
    ("我们明天早上九点见。", "我们明天上午9点见面。"),
    ("Yes.", "Yes."),
    ("The meeting, which lasted four hours, ended without an agreement.",
     "The four-hour meeting ended without agreement."),
    ("She moved to New York in the late 1990s & never looked back.",
     "She moved to New York at the end of the 1990s and never looked back."),
    ("Is this the right way to the station?", "Is it the good way to station?"),
]


def random_line(rng: random.Random, max_words: int = 14) -> str:
    """Words and punctuation with irregular (including non-ASCII) whitespace, sometimes around the line."""
    words = rng.choices(WORDS, k=rng.randint(0, max_words))
    line = "".join(word + rng.choice(SPACES) for word in words)
    if rng.random() < 0.2:
        line = rng.choice([" ", "\t", "\u00a0"]) + line
    return line.rstrip(" ") if rng.random() < 0.5 else line


def edited(rng: random.Random, line: str) -> str:
    """The line with a few words substituted, deleted or inserted."""
    words = line.split()
    for _ in range(rng.randint(0, 4)):
        position = rng.randint(0, len(words))
        operation = rng.random()
        if operation < 0.35 and position < len(words):
            words[position] = rng.choice(WORDS)
        elif operation < 0.7 and position < len(words):
            del words[position]
        else:
            words.insert(position, rng.choice(WORDS))
    return rng.choice(SPACES[:9]).join(words)


def random_corpus(seed: int, lines: int = 60, refs: int = 1) -> tuple[list[str], list[list[str]]]:
    """Hypotheses and `refs` reference streams; the second reference is an edit of the first (near-ties)."""
    rng = random.Random(seed)
    first = [random_line(rng) for _ in range(lines)]
    streams = [first] + [[edited(rng, line) for line in first] for _ in range(refs - 1)]
    hypotheses = [edited(rng, line) if rng.random() < 0.8 else random_line(rng) for line in first]
    return hypotheses, streams


def edge_corpus() -> tuple[list[str], list[str]]:
    """Hypotheses and references with empty lines on either side, one-token lines and a very long line."""
    rng = random.Random(7)
    long_reference = " ".join(rng.choices(WORDS, k=400))
    pairs = [("", "a b c"), ("a b c", ""), ("", ""), ("x", "x"), ("x", "y"), (".", "."), ("日本語", "日本"),
             (edited(rng, long_reference), long_reference), ("   ", "a"), ("a", "   "), ("\t", "")]
    pairs += [(hypothesis, reference) for reference, hypothesis in REAL]
    return [hypothesis for hypothesis, _ in pairs], [reference for _, reference in pairs]
