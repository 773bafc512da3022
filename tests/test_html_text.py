"""Placeholders inside the text of HTML input (nmtkit/translate/html_text.py): entities decoded with their offsets,
what the model sees, the byte-exact round trip through an echo, a placeholder spelled out or glued, and, whatever
tiny random Transformers write (PyTorch and the CTranslate2 export), each placeholder of the text exactly once and
the output well-formed; `--placeholders none` translates as before the rule reached the text."""

from __future__ import annotations

import copy
import random
import re
from collections import Counter
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from cli_runner import nmtkit
from test_markup import TINY, EchoEngine, is_xml  # the same echo engine, tiny model and check

from nmtkit.checkpoint.payload import LoadedModel, make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.subword import Subword, train_subword
from nmtkit.export.command import export_model
from nmtkit.registry import build_model
from nmtkit.symbols.markup import MarkupStats, translate_fragments
from nmtkit.symbols.placeholders import Patterns, load_patterns, reserved_symbols
from nmtkit.translate import Translator, translate_html
from nmtkit.translate.html_text import TextPlaceholders, decoded
from nmtkit.translate.masking import Masking

PATTERNS = load_patterns("auto")
WORDS = "open now files and more here words text the new window".split()
# every segment holds placeholders of its text; none of them is a part of another, nor of the markup
FRAGMENTS = ['<p>open <b>%s</b> now, {0} files &amp; more</p>',
             '<p>open $HOME now</p><p>the <i>new %(name)s</i> window</p>',
             '<div>here ${XDG_HOME} and <a href="x?a=1&amp;b=2">%1$s text</a> words &lt;br/&gt;</div>',
             '<p>text &amp;amp; and &#123;2&#125; <img src="a.png"/> now</p>']
TEXT_PLACEHOLDERS = ["%s", "{0}", "$HOME", "%(name)s", "${XDG_HOME}", "%1$s", "&lt;br/&gt;", "&amp;amp;",
                     "&#123;2&#125;"]


@pytest.mark.parametrize("seed", range(5))
def test_decoded_is_unescape_and_its_offsets_cut_raw_between_entities(seed):
    rng = random.Random(seed)
    raw = "".join(rng.choices(["&", "amp", ";", "#", "x", "1", "2F", "lt", " ", "a", "&NotEqualTilde;"], k=40))
    text, bounds = decoded(raw)
    assert text == unescape(raw)
    assert bounds[0] == 0 and bounds[len(text)] == len(raw)
    assert all(unescape(raw[:offset]) == text[:position] for position, offset in bounds.items())


def test_a_placeholder_comes_back_as_written_and_one_whose_edge_cuts_an_entity_stays_text():
    mask = TextPlaceholders(Patterns.from_dict({"bang": "!x", "cut": "\u0338y"}), 32)
    # &excl; is "!": the placeholder is "&excl;x" in the fragment; &NotEqualTilde; is two characters, "≂" + U+0338
    text = mask.mask("a !x b &excl;x c &NotEqualTilde;y", Counter())
    assert text == "a ｟ph1｠ b ｟ph2｠ c \u2242\u0338y"
    assert mask.originals == {"｟ph1｠": "!x", "｟ph2｠": "&excl;x"} and mask.texts["｟ph2｠"] == "!x"
    assert not mask.complete


def subword() -> Subword:
    """BPE with the reserved symbols and the characters of the fragments' words, but none a placeholder is made of
    (% $ { } ;): a model can write a placeholder only as its symbol."""
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=6)) + rng.choice([",", ".", " &", " <", " >"]) for _ in range(80)]
    lines.append("w 0123456789")
    return train_subword(lines, DataConfig(subword="bpe", vocab_size=60), 60 + len(reserved_symbols()),
                         user_symbols=reserved_symbols())


@pytest.fixture(scope="module")
def vocabulary() -> Subword:
    return subword()


def echo(vocabulary: Subword, placeholders: str) -> EchoEngine:
    return EchoEngine(LoadedModel(build_config({"model": TINY}), None, vocabulary, vocabulary),
                      decode=DecodeConfig(placeholders=placeholders))


def test_an_echo_gives_the_input_back_byte_for_byte_with_the_texts_placeholders_as_symbols(vocabulary):
    engine = echo(vocabulary, "auto")
    fragments = [*FRAGMENTS, "<p>open <code>%s {0}</code> now %d</p>", "<p>open ｟ph1｠ now ｟ and %s</p>",
                 "<p>" + " ".join(f"<b>w{k}</b> w {{{k}}}" for k in range(20)) + "</p>"]
    stats = MarkupStats()
    assert translate_html(Translator(engine), fragments, (), stats) == fragments
    assert stats.repaired == 0
    pieces = [vocabulary.processor.id_to_piece(token) for source in engine.seen for token in source]
    placeholders = [piece for piece in pieces if piece.startswith("｟ph")]
    # the texts' and <img> (FRAGMENTS); <code> and %d; 3 runs of brackets and %s; split (17 tag pairs): one a text
    assert len(placeholders) == 10 + 2 + 4 + 20
    assert not any(char in "%${}" for piece in pieces for char in piece)


def test_the_symbols_of_a_segment_are_numbered_together_in_order_and_at_most_32(vocabulary):
    sent = []

    def record(texts):
        sent.extend(texts)
        return texts

    fragment = "<p>open %s <img/> now {0}</p><p>w {0} <img/> " + " ".join(f"w {{{k}}}" for k in range(1, 32)) + "</p>"
    output = translate_fragments([fragment], record, True, (), None, lambda atoms: TextPlaceholders.of(PATTERNS, atoms))
    assert output == [fragment]
    assert sent[0] == "open ｟ph1｠ ｟ph2｠ now ｟ph3｠"
    assert sent[1].startswith("w ｟ph1｠ ｟ph2｠ w ｟ph3｠")  # 33 placeholders: the last of the text stays text
    assert sent[1].count("｟ph") == 32 and sent[1].endswith("w ｟ph32｠ w {31}")


def test_printf_arguments_a_translation_reorders_come_back_positional():
    def swap(texts):
        swapped = {"｟ph1｠": "｟ph2｠", "｟ph2｠": "｟ph1｠"}
        return [re.sub("｟ph[12]｠", lambda match: swapped[match.group()], text) for text in texts]

    output = translate_fragments(["<p>copy <b>%s</b> to %d</p>"], swap, True, (), MarkupStats(),
                                 lambda atoms: TextPlaceholders.of(PATTERNS, atoms))
    assert output == ["<p>copy <b>%2$d</b> to %1$s</p>"]


def test_a_placeholder_spelled_out_or_glued_is_repaired(vocabulary):
    def spell(texts):
        return [text.replace("｟ph1｠", "｟ph1｠s") + " %d" for text in texts]

    stats = MarkupStats()
    output = translate_fragments(["<p>open <b>$HOME</b> now</p>"], spell, True, (), stats,
                                 lambda atoms: TextPlaceholders.of(PATTERNS, atoms))
    assert output == ["<p>open <b>$HOME s</b> now</p>"] and stats.repaired == 1


def checkpoint(path: Path, vocabulary: Subword, seed: int) -> Path:
    config = build_config({"model": TINY})
    torch.manual_seed(seed)
    model = build_model(config.model, vocabulary.vocab_size, vocabulary.vocab_size, True)
    save_atomic(make_payload(config, model, (vocabulary, vocabulary),
                             placeholders={"rule": "auto", "families": PATTERNS.as_dict()}), path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory, vocabulary) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("html-text")
    checkpoints = [checkpoint(root / f"model-{seed}.pt", vocabulary, seed) for seed in range(3)]
    export_model(checkpoints[0], root / "ct2")
    return SimpleNamespace(checkpoints=checkpoints, exported=root / "ct2")


def test_each_placeholder_of_the_text_comes_out_exactly_once_whatever_a_random_model_writes(models):
    for model in [*models.checkpoints, models.exported]:
        for beam in (1, 3):
            translator = Translator.load(model, "cpu", 1, beam=beam, max_len_a=1.0, max_len_b=6)
            for fragment, output in zip(FRAGMENTS, translate_html(translator, FRAGMENTS)):
                assert is_xml(output), output
                assert all(output.count(text) == fragment.count(text) for text in TEXT_PLACEHOLDERS), \
                    (model, fragment, output)


def test_placeholders_none_translates_html_as_before(models):
    translator = Translator.load(models.checkpoints[1], "cpu", 1, beam=2, max_len_a=1.0, max_len_b=6,
                                 placeholders="none")
    unmasked = copy.copy(translator)
    unmasked.masking = Masking("none", translator.loaded, translator.masking.counts)
    before = translate_fragments(FRAGMENTS, unmasked.translate, True)  # as translate_html called it before
    assert translate_html(translator, FRAGMENTS) == before


def test_the_command_keeps_the_placeholders_of_the_text_unless_told_none(models):
    fragment = "<p>open <b>%s</b> now.</p>"  # README's example, in the vocabulary's letters
    args = ("translate", "-m", str(models.checkpoints[2]), "--device", "cpu", "--threads", "1", "--input-format",
            "html", "--max-len-a", "1", "--max-len-b", "4")
    kept = nmtkit(*args, stdin=fragment + "\n")
    assert kept.exit_code == 0 and kept.stdout.count("%s") == 1 and is_xml(kept.stdout), kept.stdout
    translator = Translator.load(models.checkpoints[2], "cpu", 1, max_len_a=1.0, max_len_b=4, placeholders="none")
    assert nmtkit(*args, "--placeholders", "none", stdin=fragment + "\n").stdout == \
        translate_html(translator, [fragment])[0] + "\n"
