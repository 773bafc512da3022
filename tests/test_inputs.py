"""Input formats (nmtkit/decoding/inputs.py): the parsers alone, then `nmtkit translate --input-format` through the
command line on untrained tiny Transformers written in-process (these tests are about what the output must contain or
start with, not about translation quality)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch
from cli_runner import assert_error, nmtkit
from scaling import assert_linear
from typer.testing import CliRunner

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.cli import app
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import train_subword
from nmtkit.decoding.inputs import Request, parse_requests
from nmtkit.errors import NmtkitError
from nmtkit.registry import build_model

WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez Paul Peter Jerusalem Theophilus the then there".split()
# Translations here run on the CPU: these tests compare a line translated among others, or with constraints, against
# the same line alone, with untrained models whose scores nearly tie; the search itself is tested on every device
# present in test_search.py.
CPU = ("--device", "cpu")
TINY = {"name": "transformer", "encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32,
        "max_positions": 64}


def test_parse_text_tsv_and_jsonl():
    assert parse_requests(["a\tb", ""], "text", "in") == [Request("a\tb"), Request("")]
    assert parse_requests(["a b\tPaul\tthe then", "c"], "tsv", "in") == [Request("a b", ("Paul", "the then")),
                                                                         Request("c")]
    lines = ['{"text": "a", "constraints": ["Paul"], "negative": ["x", "y z"], "prefix": "Th"}',
             '{"text": "b", "constraints": null, "prefix": null}', '{"text": ""}']
    assert parse_requests(lines, "jsonl", "in", first_line=5) == [
        Request("a", ("Paul",), ("x", "y z"), "Th"), Request("b"), Request("")]
    assert not Request("a").constrained and Request("a", prefix="x").constrained


@pytest.mark.parametrize(("line", "needle"), [
    ("{not json", "invalid JSON"),
    ("", "invalid JSON"),
    ('["text"]', "expected a JSON object"),
    ('{"constraints": ["a"]}', 'missing "text"'),
    ('{"text": 3}', '"text" must be a string'),
    ('{"text": "a", "constraints": "Paul"}', '"constraints" must be a list of strings'),
    ('{"text": "a", "constraints": ["Paul", 4]}', '"constraints"[1] must be a string'),
    ('{"text": "a", "negative": [" "]}', '"negative"[0] is empty'),
    ('{"text": "a", "prefix": ["Th"]}', '"prefix" must be a string'),
    ('{"text": "a\\nb"}', "line break"),
    ('{"text": "a", "constraint": ["Paul"]}', 'unknown key "constraint"'),
])
def test_bad_jsonl_lines_are_errors_naming_input_and_line(line, needle):
    with pytest.raises(NmtkitError, match=r"^in\.jsonl:8: ") as caught:
        parse_requests(['{"text": "fine"}', line], "jsonl", "in.jsonl", first_line=7)
    assert needle in str(caught.value)


def test_bad_tsv_lines_and_formats():
    with pytest.raises(NmtkitError, match=r"^<stdin>:1: field 3 is empty"):
        parse_requests(["source\tPaul\t"], "tsv", "<stdin>")
    with pytest.raises(NmtkitError, match="unknown --input-format 'csv'"):
        parse_requests(["a"], "csv", "<stdin>")


@pytest.mark.parametrize(("line", "needle"), [
    ("[" * 100_000, "JSON nested too deeply"),  # json's parser recursed into a RecursionError traceback
    ('{"text": ' + "[" * 900 + "]" * 900 + "}", '"text" must be a string, not [[[[['),
    ('{"text": [' + ", ".join(["1"] * 100_000) + "]}", '"text" must be a string, not [1, 1, 1,'),
    ('{"text": ' + "1" * 5000 + "}", "invalid JSON (a number too long to read)"),
])
def test_hostile_jsonl_lines_are_short_one_line_errors(line, needle):
    with pytest.raises(NmtkitError) as caught:
        parse_requests([line], "jsonl", "in.jsonl")
    message = str(caught.value)
    assert message.startswith("in.jsonl:1: ") and needle in message and len(message) < 120 and "\n" not in message


TSV_AND_JSONL = {  # many fields, huge fields, deep nesting, long runs of one character
    "tsv fields": ("tsv", lambda n: "source" + "\tPaul" * n),
    "tsv huge field": ("tsv", lambda n: "a" * n + "\tb" + "c" * n),
    "tsv tabs": ("tsv", lambda n: "\t" * n),
    "jsonl constraints": ("jsonl", lambda n: json.dumps({"text": "a", "constraints": ["Paul"] * n})),
    "jsonl huge text": ("jsonl", lambda n: json.dumps({"text": "a" * n, "prefix": "b" * n})),
    "jsonl escapes": ("jsonl", lambda n: json.dumps({"text": "\u00e9\n" * n})),
    "jsonl nesting": ("jsonl", lambda n: "[" * n),
    "jsonl objects": ("jsonl", lambda n: '{"text": ' + '{"a": ' * n),
}


@pytest.mark.parametrize("family", TSV_AND_JSONL)
def test_parsing_requests_takes_linear_time(family):
    input_format, make = TSV_AND_JSONL[family]

    def parse(line: str) -> None:
        try:
            parse_requests([line], input_format, "in")
        except NmtkitError:
            pass

    assert_linear(parse, make, name=family)


# --- through the command line ---


def write_model(path: Path, subword_type: str, vocab_size: int) -> str:
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 10))) for _ in range(300)]
    subword = train_subword(lines, DataConfig(subword=subword_type, vocab_size=vocab_size), vocab_size)
    config = build_config({"model": TINY})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    save_atomic(make_payload(config, model, (subword, subword)), path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    """An untrained Transformer on a word vocabulary (a word is one token) and one on BPE pieces."""
    root = tmp_path_factory.mktemp("inputs")
    return {"word": write_model(root / "word.pt", "word", 30), "bpe": write_model(root / "bpe.pt", "bpe", 60)}


def jsonl(*records: dict) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


RECORDS = [{"text": "uno dos tres", "constraints": ["Paul", "the then"]},
           {"text": "cuatro cinco"},
           {"text": "seis siete ocho", "negative": ["Paul", "the"], "constraints": ["Peter"]},
           {"text": ""},
           {"text": "nueve diez uno", "prefix": "Theophilus then", "constraints": ["Jerusalem"]}]


def assert_meets(text: str, record: dict) -> None:
    words = text.split()
    for phrase in record.get("constraints", []):
        assert f" {phrase} " in f" {text} ", (phrase, text)
    for phrase in record.get("negative", []):
        assert phrase not in words, (phrase, text)
    assert text.startswith(record.get("prefix", ""))


@pytest.mark.parametrize("search", [[], ["--greedy"], ["--length-penalty", "none"], ["--length-penalty", "gnmt"],
                                    ["--length-penalty", "sockeye", "--beta", "2"], ["--word-penalty", "0.5"]],
                         ids=["beam", "greedy", "none", "gnmt", "sockeye", "word-penalty"])
def test_jsonl_outputs_meet_their_constraints(models, search):
    result = nmtkit("translate", *CPU, "-m", models["word"], "--input-format", "jsonl", *search, stdin=jsonl(*RECORDS))
    assert result.exit_code == 0, result.stderr
    outputs = result.stdout.split("\n")
    assert len(outputs) == len(RECORDS) + 1 and outputs[-1] == "" and outputs[3] == ""
    for text, record in zip(outputs, RECORDS):
        assert_meets(text, record)
    plain = nmtkit("translate", *CPU, "-m", models["word"], *search, stdin="cuatro cinco\n").stdout
    assert outputs[1] + "\n" == plain  # a line without constraints translates as in text input


def test_nbest_scores_and_ensembles_with_constraints(models):
    model, records = models["word"], RECORDS[:3]
    result = nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl", "--beam", "4", "--nbest", "3",
                    stdin=jsonl(*records))
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    for index, record in enumerate(records):
        hypotheses = [row for row in rows if row[0] == str(index)]
        assert hypotheses and len(hypotheses) <= 3
        for _, text, _ in hypotheses:
            assert_meets(text, record)
    single = nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl", "--scores", stdin=jsonl(*records)).stdout
    assert all(len(line.split(" ||| ")) == 2 for line in single.splitlines())
    ensemble = nmtkit("translate", *CPU, "-m", model, "-m", model, "--input-format", "jsonl", "--scores",
                      stdin=jsonl(*records)).stdout
    assert [line.split(" ||| ")[0] for line in ensemble.splitlines()] == \
        [line.split(" ||| ")[0] for line in single.splitlines()]


def test_tsv_constraints(models, tmp_path: Path):
    source = tmp_path / "in.tsv"
    source.write_text("uno dos\tPaul\tthe then\ntres\n")
    result = nmtkit("translate", *CPU, "-m", models["word"], "--input-format", "tsv", "--input", str(source))
    first, second = result.stdout.splitlines()
    assert_meets(first, {"constraints": ["Paul", "the then"]})
    assert second + "\n" == nmtkit("translate", *CPU, "-m", models["word"], stdin="tres\n").stdout


@pytest.mark.parametrize("prefix", ["Th", "Theophilus", "Theophilus t", "Jer", "Paul "])
def test_a_prefix_ending_mid_word(models, prefix):
    result = nmtkit("translate", *CPU, "-m", models["bpe"], "--input-format", "jsonl", "--nbest", "2",
                    stdin=jsonl({"text": "uno dos tres", "prefix": prefix}))
    assert result.exit_code == 0, result.stderr
    texts = [line.split(" ||| ")[1] for line in result.stdout.splitlines()]
    assert len(texts) == 2 and all(text.startswith(prefix) for text in texts), texts


def test_constraints_are_met_as_whole_words(models):
    """This untrained model glues pieces onto words ("cuatro" + "o" + "o"...): a phrase counts only as whole words,
    and every line can still meet its phrase."""
    rng = random.Random(1)
    records = [{"text": " ".join(rng.choices(WORDS, k=rng.randint(1, 6))), "constraints": [word]}
               for word in WORDS for _ in range(2)]
    result = CliRunner().invoke(app, ["translate", *CPU, "-m", models["bpe"], "--input-format", "jsonl", "--beam", "3",
                                      "--nbest", "3"], input=jsonl(*records))
    assert "cannot all be met" not in result.stderr
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert {int(row[0]) for row in rows} == set(range(len(records)))
    for index, text, _ in rows:
        word = records[int(index)]["constraints"][0]
        assert re.search(rf"(?<!\w){word}(?!\w)", text), (word, text)


def test_impossible_constraints_warn_and_translate_without(models):
    record = {"text": "uno dos", "constraints": ["Paul"], "negative": ["Paul"]}
    result = CliRunner().invoke(app, ["translate", *CPU, "-m", models["word"], "--input-format", "jsonl"],
                                input=jsonl({"text": "tres"}, record))
    assert result.exit_code == 0
    assert "line 2: its constraints cannot all be met" in result.stderr
    alone = nmtkit("translate", *CPU, "-m", models["word"], stdin="uno dos\n").stdout
    assert result.stdout.splitlines()[1] + "\n" == alone


def test_bad_lines_through_the_command_line(models, tmp_path: Path):
    model = models["word"]
    source = tmp_path / "in.jsonl"
    source.write_text(jsonl({"text": "uno"}) + '{"text": "dos", "constraints": "Paul"}\n')
    assert_error(nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl", "--input", str(source)),
                 f"{source}:2:", '"constraints" must be a list')
    assert_error(nmtkit("translate", *CPU, "-m", model, "--input-format", "jsonl", stdin="uno dos\n"), "<stdin>:1:",
                 "invalid JSON")
    assert_error(nmtkit("translate", *CPU, "-m", model, "--input-format", "csv", stdin="uno\n"), "--input-format")
    assert_error(nmtkit("translate", *CPU, "-m", model, "--input-format", "tsv", "--sample", stdin="uno\tPaul\n"),
                 "line 1", "beam search")


def test_a_constraint_outside_the_vocabulary_is_a_warning(models):
    result = CliRunner().invoke(app, ["translate", *CPU, "-m", models["word"], "--input-format", "tsv"],
                                input="uno\tParis\n")
    assert result.exit_code == 0 and result.stdout.count("\n") == 1
    assert "line 1: a constraint or the prefix holds characters the target vocabulary cannot write" in result.stderr
