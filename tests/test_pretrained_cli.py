"""`nmtkit import` end to end: its one-line refusals, the safetensors reader on hostile files, and what the other
commands do with an imported model (translate as transformers' generate decodes, export to CTranslate2, fine-tune
and resume exactly)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch
from cli_runner import assert_error, nmtkit
from hf_models import SOURCE, TARGET, TEXTS, m2m100_dir, marian_dir
from scaling import assert_linear
from training_runs import train_losses

from nmtkit.checkpoint.payload import load_checkpoint, restore_model
from nmtkit.data.subword import BOS, EOS, PAD
from nmtkit.decoding.inputs import Request
from nmtkit.errors import NmtkitError
from nmtkit.pretrained.weights import read_safetensors
from nmtkit.translate.translator import Translator


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory) -> dict[str, Path]:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("hf")
    return {"marian": marian_dir(root / "marian", 2.0), "m2m100": m2m100_dir(root / "m2m100", 2.0),
            "multilingual": marian_dir(root / "multilingual", 2.0, languages=("de", "fr"))}


@pytest.fixture(scope="module")
def imported(hf_dirs, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("imported")
    assert nmtkit("import", str(hf_dirs["marian"]), "--out", str(root / "marian")).exit_code == 0
    result = nmtkit("import", str(hf_dirs["m2m100"]), "--out", str(root / "m2m100"), "--src-lang", "en",
                    "--tgt-lang", "de")
    assert result.exit_code == 0 and json.loads(result.stdout)["languages"] == 8
    return {name: root / name / "model.pt" for name in ("marian", "m2m100")}


def copied(directory: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(directory, tmp_path / "copy"))


@pytest.mark.parametrize("damage, needles", [
    (lambda d: (d / "config.json").unlink(), ["config.json"]),
    (lambda d: (d / "vocab.json").unlink(), ["vocab.json"]),
    (lambda d: (d / "target.spm").unlink(), ["target.spm"]),
    (lambda d: (d / "model.safetensors").unlink(), ["no weights"]),
    (lambda d: (d / "source.spm").write_bytes(b"not a model"), ["source.spm", "SentencePiece"]),
    (lambda d: (d / "config.json").write_text("{"), ["config.json", "not JSON"]),
    (lambda d: edit_config(d, model_type="bart"), ["bart", "marian", "m2m_100"]),
    (lambda d: edit_config(d, d_model=64), ["do not match"]),
    (lambda d: edit_config(d, encoder_layers=3), ["lack", "encoder.layers.2"]),
    (lambda d: edit_config(d, activation_function="tanh"), ["tanh"]),
    (lambda d: edit_config(d, decoder_ffn_dim=96), ["encoder_ffn_dim", "decoder_ffn_dim"]),
    (lambda d: (d / "target_vocab.json").write_text("{}"), ["separate", "target_vocab.json"]),
    (lambda d: add_weight(d, "model.encoder.layernorm_embedding.weight"), ["layernorm_embedding"]),
    (lambda d: truncate(d / "model.safetensors"), ["model.safetensors"]),
])
def test_a_missing_or_mismatched_file_is_a_one_line_error(hf_dirs, tmp_path, damage, needles):
    directory = copied(hf_dirs["marian"], tmp_path)
    damage(directory)
    assert_error(nmtkit("import", str(directory), "--out", str(tmp_path / "out")), *needles)
    assert not (tmp_path / "out" / "model.pt").exists()


def edit_config(directory: Path, **changes) -> None:
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **changes}))


def add_weight(directory: Path, name: str) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(directory / "model.safetensors")
    save_file({**weights, name: torch.ones(32)}, directory / "model.safetensors")


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def test_pickled_weights_load_as_data_only(hf_dirs, tmp_path):
    """pytorch_model.bin is read with weights_only: a whole state dict, as older checkpoints were saved (tied copies
    of the embedding, the sinusoidal tables), imports to the same checkpoint as the safetensors file; a position
    table of another layout is refused; a file that pickles anything but tensors is refused, and nothing in it
    runs."""
    from transformers import MarianMTModel

    directory = copied(hf_dirs["marian"], tmp_path)
    assert nmtkit("import", str(directory), "--out", str(tmp_path / "safetensors")).exit_code == 0
    weights = MarianMTModel.from_pretrained(directory).state_dict()
    assert "model.encoder.embed_positions.weight" in weights and "lm_head.weight" in weights
    (directory / "model.safetensors").unlink()
    torch.save(weights, directory / "pytorch_model.bin")
    assert nmtkit("import", str(directory), "--out", str(tmp_path / "bin")).exit_code == 0
    first, second = (torch.load(tmp_path / name / "model.pt", weights_only=True)["model"]
                     for name in ("safetensors", "bin"))
    assert all(torch.equal(first[name], second[name]) for name in first)
    torch.save({**weights, "model.decoder.embed_positions.weight": weights["model.decoder.embed_positions.weight"]
                .flip(1)}, directory / "pytorch_model.bin")
    assert_error(nmtkit("import", str(directory), "--out", str(tmp_path / "flipped")), "decoder position table")
    torch.save({**weights, "hook": Exploit(tmp_path / "ran")}, directory / "pytorch_model.bin")
    assert_error(nmtkit("import", str(directory), "--out", str(tmp_path / "evil")), "pytorch_model.bin",
                 "weights_only")
    assert not (tmp_path / "ran").exists()


class Exploit:
    """Unpickling it creates the file `path`: what a malicious .bin would run instead."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_an_existing_checkpoint_is_kept_and_m2m100_needs_a_source_language(hf_dirs, imported, tmp_path):
    before = imported["marian"].read_bytes()
    assert_error(nmtkit("import", str(hf_dirs["marian"]), "--out", str(imported["marian"].parent)), "already exists")
    assert imported["marian"].read_bytes() == before
    assert_error(nmtkit("import", str(hf_dirs["m2m100"]), "--out", str(tmp_path / "a")), "--src-lang", "en")
    assert_error(nmtkit("import", str(hf_dirs["m2m100"]), "--out", str(tmp_path / "b"), "--src-lang", "xx"), "'xx'")
    assert_error(nmtkit("import", str(hf_dirs["m2m100"]), "--out", str(tmp_path / "c"), "--src-lang", "en",
                        "--tgt-lang", "xx"), "--tgt-lang 'xx'")


def safetensors_file(path: Path, header: dict | bytes, data: bytes = b"") -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize("header, data, needle", [
    (b"", b"", "shorter"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "outside the file"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "8 bytes for a shape of [3]"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}, b"", "no shape"),
    ({"a": {"dtype": "PICKLE", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "no dtype"),
    (b"[1, 2]", b"", "not a JSON object"),
    (b"\xff\xfe", b"", "not JSON"),
])
def test_hostile_safetensors_files_are_one_line_errors(tmp_path, header, data, needle):
    path = safetensors_file(tmp_path / "w.safetensors", header, data)
    if header == b"":
        path.write_bytes(b"\1\0")
    with pytest.raises(NmtkitError) as refused:
        read_safetensors(path)
    assert needle in str(refused.value) and "\n" not in str(refused.value)


def test_a_huge_header_length_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    with pytest.raises(NmtkitError, match="a header of"):
        read_safetensors(path)


def test_the_reader_reads_what_safetensors_writes_in_linear_time(tmp_path):
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(0)
    tensors = {"f32": torch.randn(3, 5, generator=generator), "bf16": torch.randn(7, generator=generator).bfloat16(),
               "i64": torch.arange(4), "empty": torch.zeros(0, 3), "scalar": torch.tensor(2.5)}
    save_file(tensors, tmp_path / "w.safetensors")
    read = read_safetensors(tmp_path / "w.safetensors")
    assert read.keys() == tensors.keys()
    assert all(torch.equal(read[name], value) and read[name].dtype == value.dtype for name, value in tensors.items())

    def many_tensors(count: int) -> Path:  # the adversarial family: a header of `count` one-byte tensors
        path = tmp_path / f"many{count}.safetensors"
        if not path.exists():
            save_file({f"t{index}": torch.zeros(1, dtype=torch.uint8) for index in range(count)}, path)
        return path

    assert_linear(read_safetensors, many_tensors, start=64)


def test_translate_writes_what_generate_decodes(hf_dirs, imported, tmp_path):
    """Greedy search from the command line, text in and text out, against transformers' generate and decode.
    Marian's decode strips the spaces a hypothesis starts or ends with (these random models write some); nmtkit
    writes what the model wrote."""
    from transformers import M2M100ForConditionalGeneration, M2M100Tokenizer, MarianMTModel, MarianTokenizer

    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n")
    for name, model_class, tokenizer_class, extra in (
            ("marian", MarianMTModel, MarianTokenizer, {}),
            ("m2m100", M2M100ForConditionalGeneration, M2M100Tokenizer, {"src_lang": "en", "tgt_lang": "de"})):
        model = model_class.from_pretrained(hf_dirs[name]).eval()
        tokenizer = tokenizer_class.from_pretrained(hf_dirs[name], **extra)
        forced = {"forced_bos_token_id": tokenizer.get_lang_id("de"), "forced_eos_token_id": 2} \
            if name == "m2m100" else {}  # Marian's config.json forces EOS at the limit, as nmtkit does
        with torch.no_grad():
            generated = model.generate(**tokenizer(TEXTS, return_tensors="pt", padding=True), num_beams=1,
                                       do_sample=False, max_new_tokens=40 + bool(forced), **forced)
        expected = tokenizer.batch_decode(generated[:, 1 + bool(forced):], skip_special_tokens=True)
        result = nmtkit("translate", "-m", str(imported[name]), "-i", str(source), "--beam", "1", "--max-len-a",
                        "0", "--max-len-b", "40", "--threads", "1")
        assert result.exit_code == 0, result.stderr
        assert [line.strip() for line in result.stdout.splitlines()] == expected


def test_multilingual_opus_mt_language_tokens_are_target_tags(hf_dirs, tmp_path):
    from transformers import MarianTokenizer

    out = tmp_path / "multilingual"
    assert nmtkit("import", str(hf_dirs["multilingual"]), "--out", str(out), "--tgt-lang", "fr").exit_code == 0
    payload = torch.load(out / "model.pt", weights_only=True)
    vocab = json.loads((hf_dirs["multilingual"] / "vocab.json").read_text())
    from nmtkit.data.subword import Subword

    pieces = Subword(payload["subword"]["src"]).processor
    assert {lang: pieces.id_to_piece(index) for lang, index in payload["langs"]["tags"].items()} == \
        {"de": "<2de>", "fr": "<2fr>"}
    assert payload["config"]["decode"]["tgt_lang"] == "fr"
    theirs = MarianTokenizer.from_pretrained(hf_dirs["multilingual"])(">>fr<< the cat sat .").input_ids
    translator = Translator.load(out / "model.pt", device="cpu", threads=1)
    mine = translator.encode([Request("the cat sat .", tgt_lang="fr")])[0]
    names = {f"<2{lang}>": f">>{lang}<<" for lang in ("de", "fr")}
    assert [vocab[names.get(pieces.id_to_piece(index), pieces.id_to_piece(index))] for index in mine] == theirs[:-1]


def test_the_ctranslate2_export_translates_as_the_checkpoint_does(hf_dirs, imported, tmp_path):
    """Token for token and score for score, n-best lists included (M2M100 and NLLB: test_pretrained_export.py).
    The export keeps Marian's padding token out of the softmax, where nmtkit (and transformers) keep it in but never
    choose it (see nmtkit/export/ctranslate2.py): the model compared here gives it no probability, as trained
    OPUS-MT models give it next to none."""
    from safetensors.torch import load_file, save_file

    directory = copied(hf_dirs["marian"], tmp_path)
    weights = load_file(directory / "model.safetensors")
    weights["final_logits_bias"][0, -1] = -30.0  # the padding token, last in vocab.json
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    checkpoint = tmp_path / "imported" / "model.pt"
    assert nmtkit("import", str(directory), "--out", str(checkpoint.parent)).exit_code == 0
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS + SOURCE[:6]) + "\n")
    for quantization in ("float32", "int8"):
        out = tmp_path / quantization
        assert nmtkit("export", "-m", str(checkpoint), "--out", str(out), "--quantization",
                      quantization).exit_code == 0
    for beam in ("1", "4"):
        options = ["-i", str(source), "--beam", beam, "--threads", "1", "--nbest", beam]
        torch_lines = nmtkit("translate", "-m", str(checkpoint), *options).stdout.splitlines()
        exported = nmtkit("translate", "-m", str(tmp_path / "float32"), *options).stdout.splitlines()
        assert [line.split(" ||| ")[:2] for line in exported] == [line.split(" ||| ")[:2] for line in torch_lines]
        if beam != "1":
            scores = [[float(line.split(" ||| ")[2]) for line in lines] for lines in (exported, torch_lines)]
            assert scores[0] == pytest.approx(scores[1], abs=1e-4)
    int8 = nmtkit("translate", "-m", str(tmp_path / "int8"), "-i", str(source), "--threads", "1")
    assert int8.exit_code == 0 and len(int8.stdout.splitlines()) == len(TEXTS) + 6


def finetune_data(imported: Path, root: Path) -> Path:
    for name, lines in (("train.en", SOURCE), ("train.de", TARGET), ("dev.en", SOURCE[:3]), ("dev.de", TARGET[:3])):
        (root / name).write_text("\n".join(lines) + "\n")
    result = nmtkit("prepare", "--subword-model", str(imported), "--out", str(root / "data"), "--train-src",
                    str(root / "train.en"), "--train-tgt", str(root / "train.de"), "--dev-src", str(root / "dev.en"),
                    "--dev-tgt", str(root / "dev.de"), "--set", "data.langid=false", "--set", "data.dedup=false")
    assert result.exit_code == 0, result.stderr
    return root / "data"


def test_a_fine_tune_of_an_imported_model_resumes_exactly(imported, tmp_path):
    """8 updates in one run, or 4 and then 4 more after --resume: the same losses and weights (a schedule that
    does not depend on the budget, so that both runs have the same one)."""
    data = finetune_data(imported["marian"], tmp_path)

    def train(run: Path, steps: int, *extra: str):
        result = nmtkit("train", "--data", str(data), "--out", str(run), "--init-from", str(imported["marian"]),
                        "--device", "cpu", "--threads", "1", "--seed", "3", "--max-steps", str(steps),
                        "--set", "model.dropout=0.1", "--set", "train.valid_every=4", "--set", "train.log_every=1",
                        "--set", "train.amp=none", "--set", "train.batch_tokens=60", "--set", "train.lr=0.001",
                        "--set", "train.lr_schedule=inverse_sqrt", "--set", "train.warmup=4", *extra)
        assert result.exit_code == 0, result.stderr

    train(tmp_path / "whole", 8)
    train(tmp_path / "halves", 4)
    train(tmp_path / "halves", 8, "--resume")
    losses = [train_losses(run) for run in (tmp_path / "whole", tmp_path / "halves")]
    assert sorted(losses[0]) == list(range(1, 9)) and losses[1] == pytest.approx(losses[0], rel=1e-6)
    whole, halves = (torch.load(run / "last.pt", weights_only=True)["model"]
                     for run in (tmp_path / "whole", tmp_path / "halves"))
    for name, value in whole.items():
        torch.testing.assert_close(halves[name], value, rtol=1e-6, atol=1e-7)
    tuned = torch.load(tmp_path / "whole" / "last.pt", weights_only=True)["model"]
    start = torch.load(imported["marian"], weights_only=True)["model"]
    assert not torch.equal(tuned["encoder.0.feed_forward.inner.weight"], start["encoder.0.feed_forward.inner.weight"])
    assert torch.equal(tuned["logits_bias"], start["logits_bias"])  # Marian's final_logits_bias is not trained


def test_an_m2m100_fine_tune_needs_tagged_sources(imported, tmp_path):
    data = finetune_data(imported["m2m100"], tmp_path)
    assert_error(nmtkit("train", "--data", str(data), "--out", str(tmp_path / "run"), "--init-from",
                        str(imported["m2m100"]), "--max-steps", "1"), "target-language tags", "--corpora")


@pytest.mark.parametrize("name", ["marian", "m2m100"])
def test_ensembles_constraints_and_alignment_take_an_imported_model(imported, tmp_path, name):
    """An imported M2M100 moves its tag into the decoder's state, which ensembles, constrained search and
    alignment carry as they carry any model's."""
    source, target = tmp_path / "in.txt", tmp_path / "ref.txt"
    source.write_text("\n".join(TEXTS) + "\n")
    target.write_text("\n".join(TARGET[:len(TEXTS)]) + "\n")
    model = str(imported[name])
    common = ["-i", str(source), "--beam", "3", "--threads", "1"]
    single = nmtkit("translate", "-m", model, *common)
    assert single.exit_code == 0 and len(single.stdout.splitlines()) == len(TEXTS)
    assert nmtkit("translate", "-m", model, "-m", model, *common).stdout == single.stdout
    request = json.dumps({"text": TEXTS[0], "constraints": ["haus"]})
    constrained = nmtkit("translate", "-m", model, "--input-format", "jsonl", "--beam", "3", "--threads", "1",
                         stdin=request + "\n")
    assert "haus" in constrained.stdout
    aligned = nmtkit("align", "-m", model, "--src", str(source), "--tgt", str(target), "--threads", "1")
    assert aligned.exit_code == 0 and len(aligned.stdout.splitlines()) == len(TEXTS)


@pytest.mark.parametrize("tokenizer_json", [{"model": {"type": "Unigram", "vocab": [["<s>", 0.0]]}}, {"model": 3}, []])
def test_an_nllb_tokenizer_json_of_another_kind_is_a_one_line_error(hf_dirs, tmp_path, tokenizer_json):
    directory = copied(hf_dirs["m2m100"], tmp_path)
    (directory / "vocab.json").unlink()
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer_json))
    assert_error(nmtkit("import", str(directory), "--out", str(tmp_path / "out"), "--src-lang", "en"), "tokenizer.json")


def test_serve_translates_with_an_imported_model_as_translate_does(imported, tmp_path):
    """The service loads an imported M2M100 model (its default target language from the import) and answers as
    the command line translates; another target language of the model is taken per request."""
    from serve_process import Server

    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n")
    expected = nmtkit("translate", "-m", str(imported["m2m100"]), "-i", str(source), "--beam", "2", "--threads",
                      "1").stdout.splitlines()
    russian = nmtkit("translate", "-m", str(imported["m2m100"]), "-i", str(source), "--beam", "2", "--threads", "1",
                    "--tgt-lang", "ru").stdout.splitlines()
    server = Server(imported["m2m100"], "--device", "cpu")
    try:
        assert len(expected) == len(russian) == len(TEXTS) and expected != russian
        assert server.post({"sentences": TEXTS, "beam": 2}) == (200, {"translations": expected})
        assert server.post({"sentences": TEXTS, "beam": 2, "tgt_lang": "ru"}) == (200, {"translations": russian})
    finally:
        server.stop()


def test_a_source_piece_missing_from_vocab_json_reads_the_unknown_embedding(tmp_path):
    """The tokenizer gives <unk> for a source.spm piece that vocab.json lacks; nmtkit keeps the piece, so the text
    segments as source.spm segments it, and gives it <unk>'s embedding: the model reads the same vectors, and the
    first step's log-probabilities are transformers'."""
    from transformers import MarianMTModel, MarianTokenizer

    directory = marian_dir(tmp_path / "hf", 2.0, drop_source_piece=True)
    result = nmtkit("import", str(directory), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0 and "1 pieces of source.spm" in json.loads(result.stdout)["notes"][0]
    tokenizer, model = MarianTokenizer.from_pretrained(directory), MarianMTModel.from_pretrained(directory).eval()
    encoded = tokenizer(TEXTS[:1], return_tensors="pt")
    assert tokenizer.unk_token_id in encoded.input_ids[0].tolist()
    loaded = restore_model(load_checkpoint(tmp_path / "out" / "model.pt"), torch.device("cpu"))
    src = torch.tensor([loaded.src_subword.encode(TEXTS[:1])[0] + [EOS]])
    assert src.size(1) == encoded.input_ids.size(1) and int(src.max()) >= loaded.tgt_subword.vocab_size
    with torch.no_grad():
        mine = torch.log_softmax(loaded.model(src, src != PAD, torch.tensor([[BOS]]))[0][0, 0], dim=-1)
        theirs = torch.log_softmax(model(**encoded, decoder_input_ids=torch.tensor([[model.config.pad_token_id]]))
                                   .logits[0, 0], dim=-1)
    vocab = json.loads((directory / "vocab.json").read_text())
    pieces = loaded.tgt_subword.processor
    columns = [index for index in range(len(pieces)) if index != BOS]
    hf_columns = [vocab[pieces.id_to_piece(index)] for index in columns]
    assert (mine[columns] - theirs[hf_columns]).abs().max() < 1e-5
