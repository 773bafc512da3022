"""The tokens of an HTML or XML fragment (`nmtkit.symbols.markup`), by a tokenizer of our own after HTML5's
(https://html.spec.whatwg.org/multipage/parsing.html#tokenization), simplified: one pass, each token found by a
pattern that never looks back, so the time is linear in the fragment's length whatever it holds. The standard
library's `html.parser` is not (in Python 3.11 `"<a " * n` and `"<!--" * n` take time quadratic in n).

Every character of the fragment is in exactly one token, in order:
- text: up to the next markup; a `<` before anything but a letter, `!`, `?` or `/` is text (`a < b`, `<3`), and so
  is `</` at the end; `script` and `style` hold text up to their end tag, whatever that text looks like;
- a start tag, an end tag or an empty element (`<br/>`): attribute values quoted or not, a `>` inside a quoted value
  does not end the tag;
- an atom (markup that means nothing to the text): a comment, a CDATA section, a bogus comment (`<!x>`, `</ x>`),
  `</>`; one the fragment ends inside reaches to the fragment's end;
- a break: a doctype, a processing instruction, and a tag the fragment ends inside (`<b and c`, `<a href="x`),
  each to its `>` or the fragment's end.
"""

from __future__ import annotations

import re
from html import unescape as html_unescape

TEXT, START, EMPTY, END, ATOM, BREAK = "text", "start", "startend", "end", "atom", "break"
RAW_TEXT = ("script", "style")

Token = tuple[int, int, str, str, bool]  # (start, end, kind, tag name in lower case, translate="no")

MARKUP = re.compile(r"<(?:[A-Za-z!?]|/.)", re.DOTALL)
# HTML5's tag: a name, then attributes (a name whose first character may be `=`; `=` and a value, quoted or not)
# and separators (a `/` outside a value is one), read one attribute a match: a pattern repeating a group would
# hold a backtracking frame per attribute of `"<a " * n`. Each ends before a `>` or at the fragment's end.
_SPACE = r"\t\n\f\r "
TAG_NAME = re.compile(rf"</?([A-Za-z][^{_SPACE}/>]*)")
ATTRIBUTE = re.compile(rf"""[{_SPACE}/]*(?:([^{_SPACE}/>][^{_SPACE}/>=]*)"""
                       rf"""(?:[{_SPACE}]*=[{_SPACE}]*("[^"]*"?|'[^']*'?|[^{_SPACE}>]*))?)?""")
COMMENT_END = re.compile("--!?>")
RAW_TEXT_END = {name: re.compile(f"</{name}[{_SPACE}/>]", re.IGNORECASE) for name in RAW_TEXT}
CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")  # html.unescape's own
LONGEST_NUMBER = 8  # significant digits: beyond this a character reference is past U+10FFFF, decimal or hex


def unescape(text: str) -> str:
    """`html.unescape(text)`, without its `int()` of a reference's digits (over 4,300 decimal digits are a ValueError
    in Python 3.11): a reference with more digits than any character has is U+FFFD, as html.unescape makes it."""
    return CHARREF.sub(_reference, text) if "&" in text else text


def _reference(match: re.Match) -> str:
    name = match.group(1)
    if name[0] == "#":
        digits = name[2:] if name[1:2] in "xX" else name[1:]
        if len(digits.rstrip(";").lstrip("0")) > LONGEST_NUMBER:
            return "\ufffd"
    return html_unescape(match.group())


def scan(fragment: str) -> list[Token]:
    """The fragment's tokens, in order, together exactly its characters (see the module's doc)."""
    tokens: list[Token] = []
    position = 0
    while position < len(fragment):
        found = MARKUP.search(fragment, position)
        start = len(fragment) if found is None else found.start()
        if start > position:
            tokens.append((position, start, TEXT, "", False))
        if found is None:
            break
        tokens.append(_markup(fragment, start))
        _, position, kind, name, _ = tokens[-1]
        if kind == START and name in RAW_TEXT:
            close = RAW_TEXT_END[name].search(fragment, position)
            end = len(fragment) if close is None else close.start()
            tokens += [(position, end, TEXT, "", False)] if end > position else []
            position = end
    return tokens


def _until(fragment: str, start: int, begin: int, close: str, kind: str) -> Token:
    """Markup from `start` to the first `close` at or after `begin`, or to the fragment's end."""
    end = fragment.find(close, begin)
    return start, len(fragment) if end < 0 else end + len(close), kind, "", False


def _markup(fragment: str, start: int) -> Token:
    """The token of the markup at `start` (`MARKUP` matched there)."""
    if fragment.startswith("<!--", start):
        abrupt = next((len(end) for end in (">", "->") if fragment.startswith(end, start + 4)), 0)
        end = COMMENT_END.search(fragment, start + 4)
        last = start + 4 + abrupt if abrupt else len(fragment) if end is None else end.end()
        return start, last, ATOM, "", False
    if fragment.startswith("<![CDATA[", start):
        return _until(fragment, start, start + 9, "]]>", ATOM)
    if fragment.startswith("<!", start):
        return _until(fragment, start, start + 2, ">", BREAK if fragment[start + 2:start + 9].lower() == "doctype"
                      else ATOM)
    if fragment.startswith("<?", start):
        return _until(fragment, start, start + 2, ">", BREAK)
    if fragment.startswith("</>", start):
        return start, start + 3, ATOM, "", False
    tag = TAG_NAME.match(fragment, start)
    if tag is None:  # `</` and no letter: a bogus comment
        return _until(fragment, start, start + 2, ">", ATOM)
    position, translate = tag.end(), None
    while attribute := ATTRIBUTE.match(fragment, position):
        if position == attribute.end():
            break
        if translate is None and (attribute.group(1) or "").lower() == "translate":
            translate = attribute.group(2) or ""
        position = attribute.end()
    if position == len(fragment):  # the fragment ends inside the tag
        return start, len(fragment), BREAK, "", False
    name, end = tag.group(1).lower(), position + 1
    if fragment[start + 1] == "/":
        return start, end, END, name, False
    if fragment[end - 2] == "/":  # as html.parser has it: `<a href=x/>` is empty too
        return start, end, EMPTY, name, False
    return start, end, START, name, translate is not None and _is_no(translate)


def _is_no(value: str) -> bool:
    """Whether an attribute's value (quotes and all, as the tag writes it) is `no`, in any case, spaces around it
    ignored, entities decoded."""
    value = value[1:-1] if value[:1] in ("'", '"') else value  # a tag that ends closes its quotes
    return unescape(value).strip().lower() == "no"
