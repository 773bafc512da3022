"""Placeholders at translation time (nmtkit.translate.masking): the rule (model, auto, none, a pattern file), masking
before the subwords and restoring after decoding through the Translator, the CLI, serve and exported models, the
check and repair of every hypothesis, and word alignments mapped back to the original words.

The models are tiny Transformers of random weights (their outputs are never compared with fixed text): the promise
that each output holds exactly its source's placeholders must hold whatever a model writes. An echo engine (the
hypothesis is the source) shows the byte-exact round trip."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from aiohttp.test_utils import TestClient, TestServer
from cli_runner import assert_error, nmtkit
from letter_task import letter_lines, train_tiny

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.prepare import SplitFiles, prepare_data
from nmtkit.data.subword import train_subword
from nmtkit.decoding.hypotheses import Hypothesis
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.export.command import export_model
from nmtkit.registry import build_model
from nmtkit.serve.app import ServeConfig, Service, make_app
from nmtkit.symbols.placeholders import load_patterns, placeholder_keys, reserved_symbols
from nmtkit.translate import Translator
from nmtkit.translate.engine import Capabilities
from nmtkit.translate.masking import PlaceholderCounts, word_map

PATTERNS = load_patterns("auto")
LINES = ["Open %s in <b>the <i>new</i> window</b> now", "%d", "{0} files &amp; $HOME", "plain words only",
         "<a href=\"x y\">here</a> and %1$s", "", "%s%s%s"]


def kept(source: str, translation: str) -> bool:
    """Whether `translation` holds exactly the placeholders of `source` (their texts, each as often; printf
    conversions of the same arguments, `%s %d` as `%2$d %1$s`)."""
    return placeholder_keys(source, PATTERNS) == placeholder_keys(translation, PATTERNS)


def checkpoint(path: Path, record: dict | None, symbols: bool = True) -> Path:
    """A random Transformer whose subwords hold the reserved symbols (unless not `symbols`), its data's masking
    `record` in the checkpoint."""
    rng = random.Random(0)
    lines = [" ".join(rng.choices("open in the new window now files and here plain words only text".split(), k=6))
             for _ in range(60)] + ["ph 0123456789 %$&;{}"]  # characters to spell a placeholder with
    subword = train_subword(lines, DataConfig(subword="bpe", vocab_size=110), 110,
                            user_symbols=reserved_symbols() if symbols else ())
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 64}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True)
    save_atomic(make_payload(config, model, (subword, subword), placeholders=record), path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("masking")
    record = {"rule": "auto", "families": PATTERNS.as_dict()}
    masked = checkpoint(root / "masked.pt", record)
    export_model(masked, root / "ct2")
    return SimpleNamespace(masked=masked, exported=root / "ct2", unmasked=checkpoint(root / "plain.pt", None),
                           no_symbols=checkpoint(root / "no-symbols.pt", None, symbols=False))


def test_the_default_rule_is_the_models(models):
    assert Translator.load(models.masked, "cpu").masking.patterns.as_dict() == PATTERNS.as_dict()
    assert Translator.load(models.unmasked, "cpu").masking.patterns is None
    assert Translator.load(models.unmasked, "cpu", placeholders="auto").masking.patterns.as_dict() == \
        PATTERNS.as_dict()
    assert Translator.load(models.masked, "cpu", placeholders="none").masking.patterns is None


def test_masking_with_a_vocabulary_without_symbols_is_a_one_line_error(models, tmp_path):
    with pytest.raises(NmtkitError, match="no placeholder symbols"):
        Translator.load(models.no_symbols, "cpu", placeholders="auto")
    assert_error(nmtkit("translate", "-m", str(models.no_symbols), "--placeholders", "auto", stdin="a\n"),
                 "--placeholders auto", "--placeholders none")


def test_a_malformed_pattern_file_is_a_one_line_error_from_translate(models, tmp_path):
    patterns = tmp_path / "patterns.txt"
    patterns.write_text("ticket\tTICKET-[0-9]+\nbroken\t(unclosed\n", encoding="utf-8")
    assert_error(nmtkit("translate", "-m", str(models.masked), "--placeholders", str(patterns), stdin="a\n"),
                 f"{patterns}:2", "broken", "bad regular expression")
    assert_error(nmtkit("translate", "-m", str(models.masked), "--placeholders", "autoo", stdin="a\n"), "autoo")
    assert_error(nmtkit("serve", "-m", str(models.masked), "--placeholders", str(patterns)), f"{patterns}:2")


def test_every_translation_holds_its_sources_placeholders(models):
    """Whatever a random model writes, each hypothesis (n-best too) holds exactly the source's placeholders, on
    either engine; lines without placeholders are not counted."""
    for model in (models.masked, models.exported):
        translator = Translator.load(model, "cpu", 1, beam=3, nbest=3)
        for line, hyps in zip(LINES, translator.translate_nbest(LINES)):
            assert all(kept(line, text) for text, _ in hyps), (line, hyps)
        assert translator.placeholder_counts.lines == 5


def test_placeholders_none_translates_as_a_model_without_them(models):
    lines = [line for line in LINES if line]
    plain = Translator.load(models.unmasked, "cpu", 1).translate(lines)
    assert Translator.load(models.unmasked, "cpu", 1, placeholders="none").translate(lines) == plain
    with_none = Translator.load(models.masked, "cpu", 1, placeholders="none")
    assert with_none.encode([Request(line) for line in lines]) == \
        [with_none.loaded.src_subword.encode([line])[0] for line in lines]
    assert with_none.placeholder_counts.lines == 0


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, export) of a tiny Transformer trained for a few steps on letters with placeholders among them
    (lower -> upper case, the placeholders as they are), prepared with placeholders=auto."""
    root = tmp_path_factory.mktemp("trained")
    rng = random.Random(1)
    pairs = []
    for line in letter_lines(260, seed=0):
        words = line.split()
        words.insert(rng.randint(0, len(words)), rng.choice(["%s", "{0}", "<b>", "&amp;", "$HOME"]))
        pairs.append((" ".join(words), " ".join(word if word[0] in "%{<&$" else word.upper() for word in words)))
    for side, texts in (("src", [src for src, _ in pairs]), ("tgt", [tgt for _, tgt in pairs])):
        (root / f"train.{side}").write_text("\n".join(texts) + "\n", encoding="utf-8")
    prepare_data({"train": SplitFiles(root / "train.src", root / "train.tgt")}, root / "data",
                 DataConfig(subword="bpe", vocab_size=100, placeholders="auto"))
    checkpoint = train_tiny(root / "data", root / "run", steps=10)  # outputs are not compared
    export_model(checkpoint, root / "ct2")
    return checkpoint, root / "ct2"


def test_a_model_trained_with_placeholders_masks_alike_as_checkpoint_and_export(trained):
    lines = ["a %s b", "<b>c</b> d {0} e &amp;", "f g h"]
    requests = [Request(line) for line in lines]
    checkpoint, exported = (Translator.load(path, "cpu", 1) for path in trained)
    assert checkpoint.masking.patterns.as_dict() == exported.masking.patterns.as_dict() == PATTERNS.as_dict()
    assert exported.encode(requests) == checkpoint.encode(requests)
    for translator in (checkpoint, exported):
        assert all(kept(line, text) for line, text in zip(lines, translator.translate(lines)))


@pytest.mark.isa  # CTranslate2's kernels against PyTorch's: the repair's attention included
def test_an_export_carries_the_rule_and_masks_as_its_checkpoint(models):
    assert json.loads((models.exported / "nmtkit.json").read_text())["placeholders"]["families"] == \
        PATTERNS.as_dict()
    requests = [Request(line) for line in LINES]
    # without the search-time guarantee, which only the PyTorch engine has, the checkpoint's lines are checked and
    # repaired as the export's are, so the two agree
    checkpoint = Translator.load(models.masked, "cpu", guard_placeholders=False)
    exported = Translator.load(models.exported, "cpu")
    symbol = checkpoint.loaded.src_subword.processor.piece_to_id("｟ph1｠")
    assert exported.encode(requests) == checkpoint.encode(requests)
    assert symbol in checkpoint.encode(requests)[0]
    assert exported.translate(LINES) == checkpoint.translate(LINES)


class EchoEngine:
    """Writes its source back without the symbols of `drop` (and the lone "▁" before one); each target token
    attends to the source token it copies, and half as much to those dropped just before that one."""

    name, capabilities, max_source = "Echo", Capabilities(alignments=True), 64

    def __init__(self, loaded, decode: DecodeConfig, drop: tuple[str, ...] = ()):
        self.loaded, self.decode = loaded, decode
        piece_id = loaded.src_subword.processor.piece_to_id
        self.drop, self.space = {piece_id(symbol) for symbol in drop}, piece_id("▁")

    def copied(self, source: list[int]) -> list[int]:
        """The positions of `source` that the echo keeps."""
        before_dropped = [token == self.space and next_token in self.drop
                          for token, next_token in zip(source, [*source[1:], None])]
        return [position for position, token in enumerate(source)
                if token not in self.drop and not before_dropped[position]]

    def search(self, sources, constraints, check):
        return [[Hypothesis([ids[position] for position in self.copied(ids)], 0.0)] for ids in sources]

    def align(self, lines, translations):
        return [" ".join(f"{i}-{i}" for i in range(min(len(line.split()), len(translation.split()))))
                for line, translation in zip(lines, translations)]

    def attention(self, sources, targets):
        matrices = []
        for source in sources:
            kept = self.copied(source)
            rows = [[0.0] * len(source) for _ in range(len(kept) + 1)]
            for row, position in enumerate([*kept, len(source)]):  # the last row: EOS's
                rows[row][position:position + 1] = [1.0] * (position < len(source))
                for dropped in range(kept[row - 1] + 1 if row else 0, position):
                    rows[row][dropped] = 0.5
            matrices.append(rows)
        return matrices


@pytest.fixture(scope="module")
def loaded(models):
    return Translator.load(models.masked, "cpu").loaded


def test_an_echo_round_trips_every_line_byte_for_byte(loaded):
    lines = ["open %s in the <b>new</b> window", "%(name)s", "｟ph1｠", "the ｟｠ files ${HOME}&#169;",
             "<i>open</i>" * 10, "now   %d  ", "text ｟ph1｠ with files｠"]
    translator = Translator(EchoEngine(loaded, DecodeConfig()))
    assert translator.translate(lines) == lines
    assert translator.placeholder_counts == PlaceholderCounts(lines=7, repaired=0)


def test_a_lost_placeholder_goes_where_the_attention_points(loaded):
    translator = Translator(EchoEngine(loaded, DecodeConfig(), drop=("｟ph1｠", "｟/t1｠")))
    assert translator.translate(["open %s in the <b>new window</b> now"]) == ["open %s in the <b>new window</b> now"]
    assert translator.placeholder_counts == PlaceholderCounts(lines=1, repaired=1)
    assert translator.translate(["open %s", "in"]) == ["open %s", "in"]
    assert translator.placeholder_counts == PlaceholderCounts(lines=2, repaired=2)


class SpellingEngine(EchoEngine):
    """The echo, then `tail` spelled in ordinary pieces (a placeholder written out, as `%`, `1`, `$`, `s`)."""

    def __init__(self, loaded, decode: DecodeConfig, tail: str):
        super().__init__(loaded, decode)
        self.tail = loaded.tgt_subword.encode([tail])[0]

    def search(self, sources, constraints, check):
        return [[Hypothesis(found[0].tokens + self.tail, 0.0)] for found in super().search(sources, constraints, check)]


def test_a_placeholder_spelled_out_of_ordinary_pieces_is_removed(loaded):
    translator = Translator(SpellingEngine(loaded, DecodeConfig(), "and %1$s here {0}"))
    assert translator.translate(["open %s now", "open <b>in</b>"]) == \
        ["open %s now and here", "open <b>in</b> and here"]
    assert translator.placeholder_counts == PlaceholderCounts(lines=2, repaired=2)
    assert translator.translate(["open in"]) == ["open in and %1$s here {0}"]  # no placeholder: nothing checked


def test_a_placeholder_glued_to_the_text_beside_it_is_separated(loaded):
    translator = Translator(SpellingEngine(loaded, DecodeConfig(), "files"))
    assert translator.translate(["open $HOME", "open %s"]) == ["open $HOME files", "open %s files"]
    assert translator.placeholder_counts == PlaceholderCounts(lines=2, repaired=0)
    translator.engine.tail = translator.engine.tail[1:]  # no "▁": "$HOME" + "files" would read "$HOMEfiles"
    assert translator.translate(["open $HOME", "open %s"]) == ["open $HOME files", "open %sfiles"]
    assert translator.placeholder_counts == PlaceholderCounts(lines=4, repaired=1)


class SwappingEngine(EchoEngine):
    """The echo with its first two placeholder symbols swapped: a translation that reorders them."""

    def search(self, sources, constraints, check):
        piece_id = self.loaded.tgt_subword.processor.piece_to_id
        swap = {piece_id("｟ph1｠"): piece_id("｟ph2｠"), piece_id("｟ph2｠"): piece_id("｟ph1｠")}
        return [[Hypothesis([swap.get(token, token) for token in found[0].tokens], 0.0)]
                for found in super().search(sources, constraints, check)]


def test_reordered_printf_arguments_come_back_positional_with_their_links(loaded):
    translator = Translator(SwappingEngine(loaded, DecodeConfig()))
    lines = ["open %s in %d now", "open {0} in {1}", "open %1$s in %2$s"]
    assert translator.translate(lines) == ["open %2$d in %1$s now", "open {1} in {0}", "open %2$s in %1$s"]
    assert translator.translate_aligned([Request(lines[0])])[1] == ["0-0 1-1 2-2 3-3 4-4"]


def test_alignments_index_the_original_words(models):
    result = nmtkit("translate", "-m", str(models.masked), "--alignment", "--threads", "1", "--device", "cpu",
                    stdin="".join(line + "\n" for line in LINES))
    assert result.exit_code == 0, result.stderr
    for line, output in zip(LINES, result.stdout.splitlines()):
        translation, links = output.split(" ||| ")
        assert kept(line, translation)
        for link in links.split():
            source, target = map(int, link.split("-"))
            assert source < len(line.split()) and target < len(translation.split())


def test_links_of_masked_words_are_links_of_their_original_words(loaded):
    translator = Translator(EchoEngine(loaded, DecodeConfig()))
    line = 'open <a href="x y">here</a> %s'  # masked: open ｟t1｠here｟/t1｠ ｟ph1｠
    assert translator.translate_aligned([Request(line)]) == \
        ([[(line, 0.0)]], ["0-0 1-1 1-2 1-3 2-1 2-2 2-3 3-1 3-2 3-3 4-4"])
    unmasked = Translator(EchoEngine(loaded, DecodeConfig(placeholders="none")))
    assert unmasked.translate_aligned([Request("open ｟ph1｠ here")])[1] == ["0-0 1-1 2-2"]


def test_word_map_follows_placeholders_with_spaces_inside():
    text = 'Click <a href="x y">here</a> for %s files'
    masked = "Click ｟t1｠here｟/t1｠ for ｟ph1｠ files"
    originals = {"｟t1｠": '<a href="x y">', "｟/t1｠": "</a>", "｟ph1｠": "%s"}
    assert text.split()[1:4] == ["<a", 'href="x', 'y">here</a>']
    assert word_map(masked, originals) == [[0], [1, 2, 3], [4], [5], [6]]


def test_translate_says_how_many_lines_were_repaired(models):
    translator = Translator.load(models.exported, "cpu", 1)
    translator.translate(LINES)
    counts = translator.placeholder_counts
    result = nmtkit("translate", "-m", str(models.exported), "--threads", "1", "--device", "cpu",
                    stdin="".join(line + "\n" for line in LINES))
    assert result.exit_code == 0
    assert all(kept(line, output) for line, output in zip(LINES, result.stdout.splitlines()))
    said = f"{counts.repaired} of {counts.lines} lines with placeholders lost or broke them; repaired"
    assert (said in result.stderr) == (counts.repaired > 0), result.stderr


def test_serve_applies_the_rule_the_python_api_applies(models, caplog):
    translator = Translator.load(models.masked, "cpu", 1)
    sentences = [line for line in LINES if line]

    async def main() -> dict:
        async with TestClient(TestServer(make_app(Service(translator, ServeConfig(batch_wait_ms=1))))) as client:
            response = await client.post("/translate", json={"sentences": sentences})
            return await response.json()

    answer = asyncio.run(main())
    assert answer["translations"] == Translator.load(models.masked, "cpu", 1).translate(sentences)
    assert all(kept(line, text) for line, text in zip(sentences, answer["translations"]))
    repaired = translator.placeholder_counts.repaired
    said = f"{repaired} of {len(sentences)} sentences lost or broke placeholders; repaired"
    assert (said in caplog.text) == (repaired > 0), caplog.text
