"""HTML/XML input (nmtkit/symbols/markup.py): what goes to the model, what is kept, the repair of what a model does to
tag symbols, well-formed output under a fake translation that scrambles, drops and duplicates words and symbols; then
`nmtkit translate --input-format html` end to end on untrained tiny Transformers (with and without the reserved
symbols in their vocabulary)."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from cli_runner import assert_error, nmtkit
from typer.testing import CliRunner

from nmtkit.checkpoint.payload import LoadedModel, make_payload, save_atomic
from nmtkit.cli import app
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.subword import Subword, train_subword
from nmtkit.decoding.hypotheses import Hypothesis
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model
from nmtkit.symbols.markup import VOID, MarkupStats, repair, skip_tags, translate_fragments
from nmtkit.symbols.placeholders import CLOSE, OPEN, reserved_symbols
from nmtkit.translate import Translator, translate_html
from nmtkit.translate.engine import Capabilities

T1, T1_, T2, T2_, PH1 = "｟t1｠", "｟/t1｠", "｟t2｠", "｟/t2｠", "｟ph1｠"
SYMBOL = re.compile(f"{OPEN}/?(?:ph|t)[0-9]+{CLOSE}")


class Markup(HTMLParser):
    """What an independent parser sees of a fragment: its tags (as written), comments, and whether its elements
    are balanced (every start tag of a non-void element closed, in order)."""

    def __init__(self, fragment: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.open, self.balanced = [], [], True
        self.feed(fragment)
        self.close()
        self.balanced &= not self.open

    def handle_starttag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())
        self.open += [] if tag in VOID else [tag]

    def handle_startendtag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())

    def handle_endtag(self, tag):
        self.tags.append(f"</{tag}>")
        self.balanced &= bool(self.open) and self.open.pop() == tag

    def handle_comment(self, data):
        self.tags.append(f"<!--{data}-->")


def is_xml(fragment: str) -> bool:
    try:
        ElementTree.fromstring(f"<root>{fragment}</root>")
    except ElementTree.ParseError:
        return False
    return True


def translated(fragments: list[str], symbols: bool, translate=None,
               skip=()) -> tuple[list[str], list[str], MarkupStats]:
    """The outputs of `translate` (default: upper-case) through the markup, the texts it was given, the stats."""
    sent, stats = [], MarkupStats()

    def record(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return (translate or (lambda texts: [text.upper() for text in texts]))(texts)

    return translate_fragments(fragments, record, symbols, skip, stats), sent, stats


# --- what the model sees, what is kept ---


def test_blocks_split_segments_and_inline_tags_become_symbols_or_split_the_text():
    fragment = '<p>Hello <b>world</b> and <a href="a.html?x=1&amp;y=2" title="Keep me">more</a></p><p>Bye</p>'
    out, sent, stats = translated([fragment], symbols=True)
    assert sent == [f"Hello {T1}world{T1_} and {T2}more{T2_}", "Bye"]
    assert (stats.segments, stats.split) == (2, 0)
    out, sent, stats = translated([fragment], symbols=False)
    assert sent == ["Hello", "world", "and", "more", "Bye"]
    assert out == ['<p>HELLO <b>WORLD</b> AND <a href="a.html?x=1&amp;y=2" title="Keep me">MORE</a></p><p>BYE</p>']
    assert (stats.segments, stats.split, stats.repaired) == (2, 1, 0)


@pytest.mark.parametrize("symbols", [True, False])
def test_markup_around_a_whole_segment_stays_outside_and_whitespace_stays(symbols):
    out, sent, _ = translated(['  <li> <a href="/home"><b>Home page</b></a> </li>\t<br>'], symbols)
    assert sent == ["Home page"]
    assert out == ['  <li> <a href="/home"><b>HOME PAGE</b></a> </li>\t<br>']


@pytest.mark.parametrize("symbols", [True, False])
def test_excluded_elements_comments_and_attributes_are_kept_byte_for_byte(symbols):
    kept = ['<code>ls -l &amp;&amp; x</code>', '<span translate="NO">Brand Name</span>', "<!-- a note -->",
            '<img src="a.png" alt="An image">', "<kbd>Ctrl C</kbd>"]
    fragment = (f"<p>Run {kept[0]} now, {kept[1]} says {kept[2]} hi {kept[3]} and press {kept[4]} done</p>"
                '<pre>raw  <b>text</b></pre><script>if (a < b) s = "</p>";</script><style>p {color: red}</style>')
    out, sent, _ = translated([fragment], symbols, skip=["kbd"])
    for piece in [*kept, "<pre>raw  <b>text</b></pre>", '<script>if (a < b) s = "</p>";</script>']:
        assert out[0].count(piece) == 1, piece
    assert not any(word in text for text in sent for word in ("ls", "Brand", "note", "image", "Ctrl", "raw", "red"))
    if symbols:
        assert sent == ["Run ｟ph1｠ now, ｟ph2｠ says ｟ph3｠ hi ｟ph4｠ and press ｟ph5｠ done"]


def test_entities_are_decoded_for_the_model_and_the_translation_escaped():
    out, sent, _ = translated(["<p>Tom &amp; Jerry &eacute;t&eacute; &#169; &lt;tag&gt;</p>"], symbols=True,
                              translate=lambda texts: ["a < b & c > d" for _ in texts])
    assert sent == ["Tom & Jerry été © <tag>"]
    assert out == ["<p>a &lt; b &amp; c &gt; d</p>"]


def test_text_without_letters_is_kept_and_lines_map_one_to_one():
    fragments = ["", "plain text", "<td>42 &#169;</td><td> | </td>", "<p></p>", "<br/>"]
    out, sent, _ = translated(fragments, symbols=True)
    assert sent == ["plain text"]
    assert out == ["", "PLAIN TEXT", *fragments[2:]]


def test_a_tag_unpaired_in_its_segment_splits_it_and_so_does_too_much_markup():
    _, sent, _ = translated(["<b>bold <i>italic</i><p>para</p>tail</b>"], symbols=True)
    assert sent == [f"bold {T1}italic{T1_}", "para", "tail"]
    many = "<p>" + " ".join(f"w{index} <b>x</b>" for index in range(17)) + "</p>"  # 16 tag pairs at most
    _, sent, stats = translated([many], symbols=True)
    assert len(sent) == 34 and not any(OPEN in text for text in sent) and stats.split == 1
    _, sent, stats = translated(["<p>a ｟ b <i>c</i></p>"], symbols=True)
    assert sent == ["a ｟ b", "c"] and stats.split == 1


def test_skip_tags_adds_to_the_defaults_and_refuses_what_is_no_tag_name():
    assert skip_tags(["kbd", " VAR ", ""]) == skip_tags([]) | {"kbd", "var"}
    with pytest.raises(NmtkitError, match="--html-skip: 'a b' is not a tag name"):
        skip_tags(["a b"])


# --- the repair of a translation's symbols ---

ORIGINALS = {T1: "<b>", T1_: "</b>", T2: '<a href="x">', T2_: "</a>", PH1: "<img/>"}


@pytest.mark.parametrize(("output", "expected"), [
    (f"a {T1}b{T1_} {T2}c{T2_} {PH1}", f"a {T1}b{T1_} {T2}c{T2_} {PH1}"),  # nothing to repair
    (f"a {T1}b{T1_} {T2}c{T2_}", f"a {T1}b{T1_} {T2}c{T2_}{PH1}"),  # dropped: added at the end
    (f"a {T1}b{T1_}{T1_} {T2}c{T2_} {PH1}{PH1} {T1}", f"a {T1}b{T1_} {T2}c{T2_} {PH1} "),  # duplicated: first kept
    (f"{T1}a{T2}b{T1_}c{T2_}{PH1}", f"{T1}a{T2}bc{T2_}{T1_}{PH1}"),  # crossing: the end tag waits
    (f"{T1_}a{T1}b{T2}c{T2_}{PH1}", f"a{T1}b{T2}c{T2_}{PH1}{T1_}"),  # end before start: moved after it
    (f"a{T1_}b{T2}c{T2_}{PH1}", f"{T1}a{T1_}b{T2}c{T2_}{PH1}"),  # start dropped: at the start
    (f"｟t7｠a ｟ph9｠｟b｠ {T1}{T2}c｟{T2_}{T1_}{PH1}", f"a b {T1}{T2}c{T2_}{T1_}{PH1}"),  # invented, stray brackets
    ("", f"{T1}{T1_}{T2}{T2_}{PH1}"),  # all dropped
])
def test_repair_keeps_each_symbol_once_properly_nested(output, expected):
    tokens, repaired = repair(output, ORIGINALS)
    assert "".join(tokens) == expected
    assert repaired == (output != expected)


def well_nested(tokens: list[str]) -> bool:
    stack = []
    for token in tokens:
        if token.startswith(OPEN + "t"):
            stack.append(token)
        elif token.startswith(OPEN + "/t") and (not stack or stack.pop() != token.replace("/", "", 1)):
            return False
    return not stack


@pytest.mark.parametrize("seed", range(20))
def test_repair_of_random_symbol_soup(seed):
    rng = random.Random(seed)
    originals = {f"{OPEN}{kind}{number}{CLOSE}": "<x>" for number in range(1, 4) for kind in ("t", "/t", "ph")}
    soup = rng.choices([*originals, "｟t9｠", OPEN, "word ", "&"], k=rng.randint(0, 14))
    tokens, _ = repair("".join(soup), originals)
    symbols = [token for token in tokens if token in originals]
    assert sorted(symbols) == sorted(originals) and well_nested(symbols)
    assert not any(OPEN in token or CLOSE in token for token in tokens if token not in originals)


# --- well-formed output whatever the translation does ---

WORDS = ["Hello", "world", "the", "file", "&amp;", "&lt;", "caf&#233;", "42", "a"]


def random_inline(rng: random.Random, depth: int) -> str:
    choices = [lambda: " ".join(rng.choices(WORDS, k=rng.randint(1, 4))),
               lambda: '<img src="i.png" alt="An image"/>', lambda: "<code>x &lt; y &amp;&amp; z</code>",
               lambda: '<span translate="no">Brand Name</span>', lambda: "<!-- note -->",
               lambda: "<kbd>Ctrl</kbd>"]
    if depth < 3:
        choices += [lambda: f"<b>{random_inline(rng, depth + 1)}</b>",
                    lambda: f'<a href="u?a=1&amp;b=2" title="Click here">{random_inline(rng, depth + 1)} x</a>',
                    lambda: f"<em>{random_inline(rng, depth + 1)}</em> {random_inline(rng, depth + 1)}"]
    return " ".join(rng.choice(choices)() for _ in range(rng.randint(1, 3)))


def random_fragment(rng: random.Random) -> str:
    blocks = [lambda: f"<p>{random_inline(rng, 0)}</p>", lambda: f"<li>{random_inline(rng, 0)}</li>",
              lambda: "<br/>", lambda: "<pre>raw <b>text</b></pre>", lambda: random_inline(rng, 0),
              lambda: f'<div class="c"><h2>{random_inline(rng, 1)}</h2>{random_inline(rng, 1)}</div>']
    return "".join(rng.choice(blocks)() for _ in range(rng.randint(1, 4)))


def scramble(rng: random.Random, texts: list[str]) -> list[str]:
    """What a bad model could do: words and symbols shuffled, dropped, duplicated; symbols, brackets and markup
    characters invented."""
    outputs = []
    for text in texts:
        tokens = re.findall(f"{SYMBOL.pattern}|[^\\s{OPEN}]+", text)
        rng.shuffle(tokens)
        tokens = [token for token in tokens if rng.random() > 0.2] + rng.choices(tokens or ["x"], k=2)
        tokens += rng.sample(["｟t5｠", "｟/t1｠", OPEN, "<", "&", "</p>", "x"], k=2)
        outputs.append(" ".join(tokens))
    return outputs


@pytest.mark.parametrize("symbols", [True, False])
def test_output_is_well_formed_and_keeps_the_markup_whatever_the_translation(symbols):
    rng = random.Random(int(symbols))
    fragments = [random_fragment(rng) for _ in range(150)]
    assert all(is_xml(fragment) for fragment in fragments)
    out, _, stats = translated(fragments, symbols, lambda texts: scramble(rng, texts), skip=["kbd"])
    assert len(out) == len(fragments)
    for fragment, output in zip(fragments, out):
        assert is_xml(output), (fragment, output)
        before, after = Markup(fragment), Markup(output)
        assert after.balanced and sorted(after.tags) == sorted(before.tags)
        assert (after.tags == before.tags) or symbols
        for kept in ("<code>x &lt; y &amp;&amp; z</code>", '<span translate="no">Brand Name</span>',
                     "<kbd>Ctrl</kbd>", "<pre>raw <b>text</b></pre>"):
            assert output.count(kept) == fragment.count(kept)
    assert stats.repaired > 0 and stats.segments > 150


@pytest.mark.parametrize("symbols", [True, False])
def test_a_translation_that_copies_its_source_gives_the_input_back(symbols):
    rng = random.Random(2)
    fragments = [random_fragment(rng) for _ in range(100)]
    out, _, stats = translated(fragments, symbols, lambda texts: [f"  {text} " for text in texts])
    assert out == [fragment.replace("&#233;", "é") for fragment in fragments]
    assert stats.repaired == 0


def test_html_that_is_not_xml_stays_balanced():
    fragments = ["<p>One<br>two <img src=a.png> three<hr><b>bold <i>it</i></b></p>", "<ul><li>A<li>B</ul>"]
    rng = random.Random(0)
    for symbols in (True, False):
        out, _, _ = translated(fragments, symbols, lambda texts: scramble(rng, texts))
        first = Markup(out[0])
        assert first.balanced and sorted(first.tags) == sorted(Markup(fragments[0]).tags)
        assert symbols or first.tags == Markup(fragments[0]).tags
        assert sorted(Markup(out[1]).tags) == sorted(Markup(fragments[1]).tags)


@pytest.mark.parametrize("seed", range(5))
def test_any_string_gives_one_line_and_no_error(seed):
    rng = random.Random(seed)
    fragments = ["".join(rng.choices("<>/&;#!-?[]=\"' abpi", k=rng.randint(0, 40))) for _ in range(200)]
    for symbols in (True, False):
        out, _, _ = translated(fragments, symbols, lambda texts: scramble(rng, texts))
        assert len(out) == len(fragments) and not any("\n" in line for line in out)


# --- nmtkit translate --input-format html, on untrained tiny Transformers ---

MODEL_WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez".split()
TINY = {"name": "transformer", "encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32,
        "max_positions": 64}


def tiny_subword(symbols: bool) -> Subword:
    """A BPE vocabulary with the reserved symbols (as `prepare --set placeholders=auto` makes it) or without."""
    rng = random.Random(0)
    lines = [" ".join(rng.choices(MODEL_WORDS, k=rng.randint(1, 8))) for _ in range(100)]
    extra = reserved_symbols() if symbols else []
    return train_subword(lines, DataConfig(subword="bpe", vocab_size=40), 40 + len(extra), user_symbols=extra)


def write_model(path: Path, symbols: bool) -> str:
    """An untrained Transformer on `tiny_subword(symbols)`."""
    subword = tiny_subword(symbols)
    config = build_config({"model": TINY})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    save_atomic(make_payload(config, model, (subword, subword)), path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[bool, str]:
    root = tmp_path_factory.mktemp("markup")
    return {symbols: write_model(root / f"symbols-{symbols}.pt", symbols) for symbols in (True, False)}


PAGE = ['<p>uno <b>dos tres</b> cuatro <a href="x.html?a=1&amp;b=2" title="uno dos">cinco</a> seis</p>',
        "",
        '<li>siete <code>ocho &lt; nueve</code> diez <span translate="no">uno dos</span></li><br/><li>tres</li>',
        "uno dos tres",
        '<div><h1>cuatro <i>cinco <em>seis</em></i> siete</h1><pre>ocho  nueve</pre> <kbd>diez uno</kbd></div>',
        "<!-- uno --><p>dos<img src='a.png'/>tres &#169;</p><script>var a = '<p>';</script>"]
SHORT = ("--beam", "2", "--max-len-a", "1", "--max-len-b", "4")
KEPT = ["<code>ocho &lt; nueve</code>", '<span translate="no">uno dos</span>', "<pre>ocho  nueve</pre>",
        "<kbd>diez uno</kbd>", "<!-- uno -->", "<script>var a = '<p>';</script>"]


@pytest.mark.parametrize("symbols", [True, False])
def test_translate_html_end_to_end(models, symbols):
    result = CliRunner().invoke(app, ["translate", "-m", models[symbols], "--device", "cpu", "--input-format", "html",
                                      "--html-skip", "kbd", *SHORT], input="".join(line + "\n" for line in PAGE))
    assert result.exit_code == 0, result.stderr
    out = result.stdout.split("\n")
    assert len(out) == len(PAGE) + 1 and out[-1] == "" and out[1] == ""
    for fragment, output in zip(PAGE, out):
        assert is_xml(output) or not is_xml(fragment), output
        assert Markup(output).balanced and sorted(Markup(output).tags) == sorted(Markup(fragment).tags)
        assert symbols or Markup(output).tags == Markup(fragment).tags
        assert all(output.count(kept) == fragment.count(kept) for kept in KEPT)
        assert not SYMBOL.search(output) and OPEN not in output
    assert f"html: 6 segments translated, {0 if symbols else 4} piece by piece between their tags" in result.stderr


def test_python_api_translates_html_as_the_command_does(models):
    translator = Translator.load(models[True], device="cpu", threads=1, beam=2, max_len_a=1.0, max_len_b=4)
    stats = MarkupStats()
    command = nmtkit("translate", "-m", models[True], "--device", "cpu", "--threads", "1", "--input-format", "html",
                     *SHORT, stdin="".join(line + "\n" for line in PAGE[:4]))
    assert translate_html(translator, PAGE[:4], (), stats) == command.stdout.split("\n")[:4]
    assert stats.segments == 4


@dataclass
class EchoEngine:
    """An engine whose translation is its source (the ids it is given, recorded): what reaches the model."""

    loaded: LoadedModel
    name: str = "echo"
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    max_source: int = 200
    capabilities: Capabilities = field(default_factory=Capabilities)
    seen: list[list[int]] = field(default_factory=list)

    def search(self, sources, constraints, check):
        self.seen += sources
        return [[Hypothesis(list(source), 0.0)] for source in sources]


@pytest.mark.parametrize("symbols", [True, False])
def test_the_model_sees_each_symbol_as_one_piece_and_an_echo_gives_the_input_back(symbols):
    subword = tiny_subword(symbols)
    engine = EchoEngine(LoadedModel(build_config({"model": TINY}), None, subword, subword))
    fragment = '<p>uno <b>dos</b> tres <i>cuatro <img src="x"/></i> cinco <code>a</code></p><p>seis</p>'
    assert translate_html(Translator(engine), [fragment]) == [fragment]
    ids = {subword.processor.piece_to_id(symbol) for symbol in reserved_symbols()}
    symbols_seen = sum(token in ids for source in engine.seen for token in source)
    assert symbols_seen == (5 if symbols else 0)  # b, i and img; the <code> that ends the segment stays outside
    assert len(engine.seen) == (2 if symbols else 6)


@pytest.mark.parametrize(("args", "needle"), [
    (("--html-skip", "kbd"), "--html-skip applies to --input-format html"),
    (("--input-format", "html", "--html-skip", "kbd,a b"), "--html-skip: 'a b' is not a tag name"),
    (("--input-format", "html", "--nbest", "2"), "no --nbest, --scores or --alignment"),
    (("--input-format", "html", "--scores"), "no --nbest, --scores or --alignment"),
])
def test_translate_html_errors(models, args, needle):
    assert_error(nmtkit("translate", "-m", models[False], "--device", "cpu", *args, stdin="<p>uno</p>\n"), needle)


@pytest.mark.parametrize("symbols", [True, False])
def test_a_line_that_starts_with_an_empty_end_tag_keeps_it(models, symbols):  # issue 63: "</>" was lost
    result = nmtkit("translate", "-m", models[symbols], "--device", "cpu", "--threads", "1", "--input-format", "html",
                    *SHORT, stdin="</>a b c\n</>\n")
    assert result.exit_code == 0, result.stderr
    first, second, end = result.stdout.split("\n")
    assert first.startswith("</>") and second == "</>" and end == ""
