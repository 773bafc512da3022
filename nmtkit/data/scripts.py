"""Writing systems: which scripts a language is written in, and a character class of each script's letters, for the
script-share filter (`nmtkit.data.clean`).

Python's `unicodedata` has no Script property, but every letter's name starts with its script ("LATIN SMALL LETTER
A", "CYRILLIC CAPITAL LETTER ZHE", "CJK UNIFIED IDEOGRAPH-4E00"): the classes are built from the names once, on first
use (0.2 s for every letter up to U+323AF), as ranges in a regular-expression class that cannot backtrack.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

from nmtkit.data.corpus import UNSPACED
from nmtkit.errors import NmtkitError

LETTER = re.compile(r"[^\W\d_]")  # a letter (str.isalpha, near enough)
# A word: letters only, each character of a script written without spaces alone (as the length filters count them)
WORD = re.compile(f"[{UNSPACED}]|[^\\W\\d_{UNSPACED}]+")

# The first word of the names of a script's letters (after FULLWIDTH or HALFWIDTH), for the scripts of the table.
NAME_WORDS = {
    "Latin": ("LATIN",), "Cyrillic": ("CYRILLIC",), "Greek": ("GREEK",), "Armenian": ("ARMENIAN",),
    "Georgian": ("GEORGIAN",), "Hebrew": ("HEBREW",), "Arabic": ("ARABIC",), "Syriac": ("SYRIAC",),
    "Thaana": ("THAANA",), "Devanagari": ("DEVANAGARI",), "Bengali": ("BENGALI",), "Gurmukhi": ("GURMUKHI",),
    "Gujarati": ("GUJARATI",), "Oriya": ("ORIYA",), "Tamil": ("TAMIL",), "Telugu": ("TELUGU",),
    "Kannada": ("KANNADA",), "Malayalam": ("MALAYALAM",), "Sinhala": ("SINHALA",), "Thai": ("THAI",),
    "Lao": ("LAO",), "Tibetan": ("TIBETAN",), "Myanmar": ("MYANMAR",), "Khmer": ("KHMER",),
    "Ethiopic": ("ETHIOPIC",), "Mongolian": ("MONGOLIAN",), "Hangul": ("HANGUL",),
    "Hiragana": ("HIRAGANA", "KATAKANA-HIRAGANA"), "Katakana": ("KATAKANA",), "Han": ("CJK", "KANGXI"),
    "Bopomofo": ("BOPOMOFO",), "Tifinagh": ("TIFINAGH",), "Cherokee": ("CHEROKEE",), "Canadian": ("CANADIAN",),
    "Yi": ("YI",),
}
SCRIPT_OF_WORD = {word: name for name, words in NAME_WORDS.items() for word in words}
WIDTHS = ("FULLWIDTH", "HALFWIDTH")

LATIN = ("af als an ast az bar bcl br bs ca cbk ceb co cs cy da de diq dsb en eo es et eu fi fr frr fy ga gd gl "
         "gn gv hif hr hsb ht hu ia id ie ilo io is it jbo jv kw la lb li lmo lt lv mg min ms mt mwl nah nap nds nl "
         "nn no nb oc pam pfl pl pms pt qu rm ro sc scn sco sh sk sl so sq su sv sw tk tl tr uz vec vep vi vls vo wa "
         "war yo zu xh ha ig rw lg ln ny sn st tn ts ve wo ff ak ee fo kl se sm to fj mi haw ku")
SCRIPTS = {
    **{lang: ("Latin",) for lang in LATIN.split()},
    **{lang: ("Cyrillic",) for lang in "ru uk be bg mk kk ky mn tg tt ba cv ce av os kv mhr mrj myv sah tyv xal "
       "krc lez rue udm".split()},
    "sr": ("Cyrillic", "Latin"), "el": ("Greek",), "hy": ("Armenian",), "ka": ("Georgian",), "xmf": ("Georgian",),
    "he": ("Hebrew",), "iw": ("Hebrew",), "yi": ("Hebrew",),
    **{lang: ("Arabic",) for lang in "ar arz fa ur ps ckb ug sd azb mzn pnb lrc glk ks".split()},
    "dv": ("Thaana",), **{lang: ("Devanagari",) for lang in "hi mr ne sa mai bh new gom dty bho".split()},
    "bn": ("Bengali",), "as": ("Bengali",), "bpy": ("Bengali",), "pa": ("Gurmukhi",), "gu": ("Gujarati",),
    "or": ("Oriya",), "ta": ("Tamil",), "te": ("Telugu",), "kn": ("Kannada",), "ml": ("Malayalam",),
    "si": ("Sinhala",), "th": ("Thai",), "lo": ("Lao",), "bo": ("Tibetan",), "dz": ("Tibetan",), "my": ("Myanmar",),
    "km": ("Khmer",), "am": ("Ethiopic",), "ti": ("Ethiopic",), "ko": ("Hangul", "Han"),
    "ja": ("Han", "Hiragana", "Katakana"), "zh": ("Han",), "yue": ("Han",), "wuu": ("Han",),
    "zh_tw": ("Han", "Bopomofo"), "sr@latin": ("Latin",), "uz@cyrillic": ("Cyrillic",), "be@latin": ("Latin",),
}


def base_language(code: str) -> str:
    """The language of a code such as zh_CN, pt-BR, sr@latin or EN: its first part, lower case."""
    return re.split(r"[_\-@.]", code.strip().lower(), maxsplit=1)[0]


def has_scripts(code: str, extra: dict[str, list[str]]) -> bool:
    """Whether the scripts of language `code` are known (`scripts_of` finds them)."""
    return any(extra.get(key) or SCRIPTS.get(key)
               for key in (code, code.lower(), code.lower().replace("-", "_"), base_language(code)))


def scripts_of(code: str, extra: dict[str, list[str]]) -> tuple[str, ...]:
    """The scripts language `code` is written in: `extra`'s (data.scripts) first, then the table's, for the whole
    code (sr@latin) then its language (sr); an unknown language or script is an error naming the setting."""
    for key in (code, code.lower(), code.lower().replace("-", "_"), base_language(code)):
        found = extra.get(key) or SCRIPTS.get(key)
        if found:
            unknown = [name for name in found if name not in NAME_WORDS]
            if unknown:
                raise NmtkitError(f"data.scripts: unknown script {unknown[0]!r} for {code!r}; the scripts are "
                                  f"{', '.join(sorted(NAME_WORDS))}")
            return tuple(found)
    raise NmtkitError(f"data.script_share: no scripts known for language {code!r}; give them (e.g. --set "
                      f"'data.scripts={{{base_language(code) or code}: [Latin]}}') or --set data.script_share=0")


@functools.lru_cache(maxsize=1)
def _script_ranges() -> dict[str, list[tuple[int, int]]]:
    """Each script of NAME_WORDS: the ranges of code points of its letters."""
    ranges: dict[str, list[tuple[int, int]]] = {name: [] for name in NAME_WORDS}
    for point in range(min(sys.maxunicode, 0x323AF) + 1):
        char = chr(point)
        if not char.isalpha():
            continue
        words = unicodedata.name(char, "").split(" ", 2)
        name = SCRIPT_OF_WORD.get(words[1] if words[0] in WIDTHS and len(words) > 1 else words[0])
        if name is not None:
            spans = ranges[name]
            if spans and spans[-1][1] == point - 1:
                spans[-1] = (spans[-1][0], point)
            else:
                spans.append((point, point))
    return ranges


@functools.lru_cache(maxsize=64)
def script_words(scripts: tuple[str, ...]) -> re.Pattern:
    """A pattern matching each word (as `WORD` finds them) that starts with a letter of `scripts`."""
    spans = sorted(span for name in scripts for span in _script_ranges()[name])
    letters = "".join(re.escape(chr(low)) if low == high else f"{re.escape(chr(low))}-{re.escape(chr(high))}"
                      for low, high in spans)
    return re.compile(f"[{letters}][^\\W\\d_{UNSPACED}]*")


def script_share(line: str, words: re.Pattern) -> float | None:
    """The share of the line's words (`WORD`: letters only, each character of an unspaced script a word) that
    `words` (`script_words`) finds; None for a line without letters."""
    total = len(WORD.findall(line))
    return min(1.0, len(words.findall(line)) / total) if total else None
