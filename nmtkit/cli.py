"""The `nmtkit` command line: each subcommand parses options, builds a config and calls one library function.

Results go to stdout; logs and progress go to stderr. User errors are one line and a non-zero exit.
Annotations are not postponed (`from __future__ import annotations`): typer would evaluate each from a string at
every start.
"""

import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from nmtkit.cli_options import ConfigValues, CurrentStderrHandler, config_options, handle_errors, show_tracebacks
from nmtkit.config.sections import LINE_CAP_HELP, MAX_LINE_BYTES, DataConfig, DecodeConfig, TrainConfig, help_for
from nmtkit.config.values import parse_duration
from nmtkit.data.distilled_config import DistillFilterConfig
from nmtkit.data.robustness_config import RobustnessConfig
from nmtkit.errors import NmtkitError
from nmtkit.metrics.options import EvaluateConfig
from nmtkit.scoring.config import PairScoreConfig
from nmtkit.serve.config import ServeConfig
from nmtkit.version import __version__

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="nmtkit: neural machine translation from the command line.")
log = logging.getLogger("nmtkit")

Files = Annotated[Path | None, typer.Option(dir_okay=False)]
Overrides = Annotated[list[str] | None, typer.Option("--set", help="override a config key: section.key=value")]
INTER_THREADS_HELP = ("an exported model (CTranslate2): search N batches at once, each with threads/N threads and "
                      "batch_tokens/N tokens; 0: one batch a thread on a CPU, one at a time on a GPU")


@app.callback()
def main(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="only warnings and errors on stderr")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks and debug logs")] = False,
    version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False,
) -> None:
    if version:
        print(__version__)
        raise typer.Exit(0)
    show_tracebacks(debug)
    handler = CurrentStderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(message)s", "%H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO)
    log.propagate = False


def _lang(path: Path | None, default: str) -> str:
    """The language a file's suffix names (train.de, train.de.gz), or `default`."""
    suffix = Path(path.name.removesuffix(".gz")).suffix.lstrip(".") if path is not None else ""
    return suffix if suffix and suffix not in ("txt", "tsv") else default


@app.command()
@handle_errors
def prepare(
    out: Annotated[Path, typer.Option(help="data directory to write")],
    train_src: Files = None, train_tgt: Files = None, train_tsv: Files = None,
    dev_src: Files = None, dev_tgt: Files = None, dev_tsv: Files = None,
    test_src: Files = None, test_tgt: Files = None, test_tsv: Files = None,
    config: Annotated[Path | None, typer.Option(help="YAML file of data settings")] = None,
    subword: Annotated[str | None, typer.Option(help=help_for(DataConfig, "subword"))] = None,
    vocab_size: Annotated[int | None, typer.Option(help=help_for(DataConfig, "vocab_size"))] = None,
    joint: Annotated[bool | None, typer.Option("--joint/--separate", help=help_for(DataConfig, "joint"))] = None,
    src_lang: Annotated[str | None, typer.Option(help="source language code (default: file suffix)")] = None,
    tgt_lang: Annotated[str | None, typer.Option(help="target language code (default: file suffix)")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace the prepared data already in --out")] = False,
    corpora: Annotated[Path | None, typer.Option(
        help="YAML list of named corpora (name; src and tgt, or tsv; dev, test; src_lang, tgt_lang; tag) joined into "
             "this one data directory with one vocabulary; instead of --train-src/--train-tgt...",
        dir_okay=False)] = None,
    pairs: Annotated[Path | None, typer.Option(
        help="YAML list of language pairs for one multilingual model (src_lang, tgt_lang, train, dev, test files): "
             "a --corpora file in which every corpus gives its languages", dir_okay=False)] = None,
    subword_model: Annotated[Path | None, typer.Option(
        help="encode with this checkpoint's subword model(s) or this SentencePiece model instead of training new "
             "ones (data for fine-tuning that model, or for a student sharing its teacher's vocabulary); with "
             "--train-* or --corpora, whose tags the model must hold", dir_okay=False)] = None,
    overrides: Overrides = None,
) -> None:
    """Validate and clean parallel text, train SentencePiece, and write a binarized data directory."""
    from nmtkit.config.files import data_config
    from nmtkit.data.command import prepare_command
    from nmtkit.data.prepare import SplitFiles

    settings = data_config(config, overrides or [], subword=subword, vocab_size=vocab_size, joint=joint)
    splits = {files.name: files for files in (SplitFiles(train_src, train_tgt, train_tsv, "train"),
                                              SplitFiles(dev_src, dev_tgt, dev_tsv, "dev"),
                                              SplitFiles(test_src, test_tgt, test_tsv, "test"))
              if files.given}
    langs = (src_lang or _lang(train_src, "src"), tgt_lang or _lang(train_tgt, "tgt"))
    manifest = prepare_command(splits, out, settings, langs, overwrite, pairs, subword_model, corpora)
    print(json.dumps({"out": str(out), "vocab": manifest["vocab"], "filter": manifest["filter"],
                      "splits": manifest["splits"]}))


@app.command()
@handle_errors
def train(
    data: Annotated[Path, typer.Option(help="data directory written by nmtkit prepare")],
    out: Annotated[Path, typer.Option(help="run directory (config.yaml, model.pt, last.pt, logs)")],
    config: Annotated[Path | None, typer.Option(help="YAML config (model/train/decode sections)")] = None,
    model: Annotated[str | None, typer.Option(help="registered model name, e.g. transformer")] = None,
    overrides: Overrides = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out from last.pt")] = False,
    init_from: Annotated[Path | None, typer.Option(help=help_for(TrainConfig, "init_from"), dir_okay=False)] = None,
    max_steps: Annotated[int | None, typer.Option(help=help_for(TrainConfig, "max_steps"))] = None,
    max_time: Annotated[str | None, typer.Option(help=help_for(TrainConfig, "max_time"))] = None,
    device: Annotated[str | None, typer.Option(help=help_for(TrainConfig, "device"))] = None,
    threads: Annotated[int | None, typer.Option(help=help_for(TrainConfig, "threads"))] = None,
    seed: Annotated[int | None, typer.Option(help=help_for(TrainConfig, "seed"))] = None,
    update_freq: Annotated[int | None, typer.Option(help=help_for(TrainConfig, "update_freq"))] = None,
    gpus: Annotated[int, typer.Option(help="train on N GPUs of this machine: N processes under torchrun (DDP)")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Train a model; prints a JSON summary on stdout when done.

    SIGINT (Ctrl-C) or SIGTERM stops after the current update and saves last.pt (exit status 130 or 143);
    `--resume` continues exactly from there. Under torchrun (`torchrun --nproc-per-node=N -m nmtkit train ...`)
    each process trains on its share of every update's batches."""
    from nmtkit.training.command import train_command

    if gpus > 1 and "LOCAL_RANK" not in os.environ:
        from nmtkit.runtime.distributed import launch_on_gpus

        raise typer.Exit(launch_on_gpus(gpus, sys.argv[1:]))
    summary = train_command(data, out, config, model, overrides or [], resume, quiet, max_steps=max_steps,
                            max_time=parse_duration(max_time) if max_time else None, device=device,
                            threads=threads, seed=seed, update_freq=update_freq,
                            init_from=str(init_from) if init_from else None)
    if summary is not None:  # rank 0 of a torchrun job, or a single process
        print(json.dumps(summary))
        if "interrupted" in summary and "LOCAL_RANK" not in os.environ:  # under torchrun: a clean exit
            raise typer.Exit(128 + getattr(signal, summary["interrupted"]))


@app.command()
@handle_errors
@config_options("decode", DecodeConfig, skip=("dtype",), given_only=True)  # dtype: --fp16, --bf16
def translate(
    model: Annotated[list[Path], typer.Option("--model", "-m", help="checkpoint (repeat for an ensemble), or a "
                                              "directory written by nmtkit export")],
    input: Annotated[Path | None, typer.Option("--input", "-i", help="input file (default: stdin)")] = None,
    input_format: Annotated[str, typer.Option(
        help="text: one sentence a line; tsv: source<TAB>phrase<TAB>... (phrases the translation must contain); "
             'jsonl: {"text": ..., "constraints": [...], "negative": [...], "prefix": ...} a line; html: an HTML or '
             "XML fragment a line (its text translated, its markup kept)")] = "text",
    html_skip: Annotated[str, typer.Option(
        help="with --input-format html: elements kept untranslated besides script, style, code, pre and textarea "
             "(comma-separated: kbd,var)")] = "",
    *,
    decode: ConfigValues,
    greedy: Annotated[bool, typer.Option(help="greedy search (same as --beam 1)")] = False,
    scores: Annotated[bool, typer.Option(help="append ` ||| score` to each output line")] = False,
    confidence: Annotated[str, typer.Option(
        help="append ` ||| mean=... min=...`: the confidence in each translation, from the model's own token "
             "log-probabilities when teacher-forced on it, by the estimators named (comma-separated): mean "
             "(length-normalised log-probability), min (the least probable token), q10 (their 10% quantile), prob "
             "(mean token probability); docs/translate.md")] = "",
    alignment: Annotated[bool, typer.Option(help="append ` ||| i-j ...` word links from attention")] = False,
    average: Annotated[int, typer.Option(help="average the weights of the last N checkpoint_<step>.pt of the run")] = 0,
    fp16: Annotated[bool, typer.Option("--fp16", help="half precision (for GPUs)")] = False,
    bf16: Annotated[bool, typer.Option("--bf16", help="bfloat16 (GPUs; CPUs with AVX512-BF16/AMX)")] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N")] = "auto",
    threads: Annotated[int, typer.Option(help="CPU threads (0 = all cores)")] = 0,
    inter_threads: Annotated[int, typer.Option(help=INTER_THREADS_HELP)] = 0,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="write the translations to this file, chunk by chunk, with progress on stderr; "
                               "prints a JSON summary", dir_okay=False)] = None,
    resume: Annotated[bool, typer.Option(
        help="continue the --output of an interrupted run: its whole chunks of --buffer-size lines are kept, the "
             "rest translated again, so the file ends as an uninterrupted run's")] = False,
    max_line_bytes: Annotated[int, typer.Option(help=LINE_CAP_HELP, min=1)] = MAX_LINE_BYTES,
    overrides: Overrides = None,
) -> None:
    """Translate lines from stdin (or --input) to stdout (or --output), one output line per input line (K with
    --nbest K).

    Decoding settings not given here are the model's own (its config's decode section)."""
    from nmtkit.translate.command import translate_command

    if greedy:
        decode["beam"] = 1
    if fp16 or bf16:
        decode["dtype"] = "float16" if fp16 else "bfloat16"
    summary = translate_command(model, input, output, _sections({"decode": decode}, overrides)["decode"], resume,
                                device, threads, average, inter_threads, max_line_bytes, scores=scores,
                                confidence=confidence, alignment=alignment, input_format=input_format,
                                html_skip=html_skip)
    if summary is not None:
        print(json.dumps(summary))


def _sections(values: dict[str, dict], overrides: list[str] | None) -> dict[str, dict]:
    """The command line's values of each config section, with `--set section.key=value` applied; a section that
    this command has not is an error, not a setting silently ignored."""
    from nmtkit.config.files import apply_overrides

    known = list(values)
    sections = apply_overrides(values, overrides or [])
    unknown = [name for name, keys in sections.items() if name not in known or not isinstance(keys, dict)]
    if unknown:
        raise NmtkitError(f"--set {unknown[0]}...: this command sets keys of the {' and '.join(known)} section"
                          f"{'s' if len(known) > 1 else ''} only (--set {known[-1]}.key=value)")
    return sections


@app.command()
@handle_errors
@config_options("settings", DistillFilterConfig)
def filter_distilled(
    src: Annotated[Path, typer.Option(help="source side of the corpus the teacher translated", dir_okay=False)],
    hyp: Annotated[Path, typer.Option(help="the teacher's translations, written by nmtkit translate --scores",
                                      dir_okay=False)],
    out_src: Annotated[Path, typer.Option(help="kept source lines", dir_okay=False)],
    out_tgt: Annotated[Path, typer.Option(help="kept translations, without their scores", dir_okay=False)],
    report: Annotated[Path | None, typer.Option(help="also write the JSON summary here", dir_okay=False)] = None,
    *,
    settings: ConfigValues,
) -> None:
    """Drop the distilled pairs where the teacher went wrong (length-ratio outliers, the lowest scores per token);
    prints the counts as JSON."""
    from nmtkit.data.distilled import filter_distilled as run_filter

    print(json.dumps(run_filter(src, hyp, out_src, out_tgt, DistillFilterConfig(**settings), report)))


@app.command()
@handle_errors
@config_options("settings", PairScoreConfig)
def score_pairs(
    src: Annotated[Path, typer.Option(help="source lines (plain or .gz)", dir_okay=False)],
    tgt: Annotated[Path, typer.Option(help="target lines, line by line the translations of --src", dir_okay=False)],
    model: Annotated[Path, typer.Option("--model", "-m", help="source -> target checkpoint", dir_okay=False)],
    reverse_model: Annotated[Path, typer.Option(help="target -> source checkpoint", dir_okay=False)],
    output: Annotated[Path | None, typer.Option(help="write the scores here (default: stdout, unless --out-src)",
                                                dir_okay=False)] = None,
    out_src: Annotated[Path | None, typer.Option(help="write the kept pairs' sources here", dir_okay=False)] = None,
    out_tgt: Annotated[Path | None, typer.Option(help="write the kept pairs' targets here", dir_okay=False)] = None,
    out_removed: Annotated[Path | None, typer.Option(help="write the removed pairs here, a JSON object a line",
                                                     dir_okay=False)] = None,
    *,
    settings: ConfigValues,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N")] = "auto",
    threads: Annotated[int, typer.Option(help="CPU threads (0 = all cores)")] = 0,
) -> None:
    """Score sentence pairs by dual conditional cross-entropy with your forward and reverse models (a score in
    [0, 1] a line); with --out-src/--out-tgt keep the best --keep share or those above --min-score and print the
    counts as JSON."""
    from nmtkit.scoring.command import PairFiles, score_pairs_command

    files = PairFiles(src, tgt, model, reverse_model, output, out_src, out_tgt, out_removed)
    summary = score_pairs_command(files, PairScoreConfig(**settings), device, threads)
    if summary is not None:
        print(json.dumps(summary))


@app.command("best-of")
@handle_errors
def best_of(
    nbest: Annotated[Path, typer.Option(help="n-best file as translate --nbest writes it: 'i ||| hypothesis ||| score'",
                                        dir_okay=False)],
    ref: Annotated[Path, typer.Option(help="reference file, one line per source line", dir_okay=False)],
    output: Annotated[Path | None, typer.Option(help="write the best hypotheses here (default: stdout)",
                                                dir_okay=False)] = None,
    metric: Annotated[str, typer.Option(help="sentence metric against the reference: chrf, bleu, ter, ...")] = "chrf",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N")] = "auto",
    scores: Annotated[bool, typer.Option(help="write 'hypothesis ||| score' (its n-best score), as translate "
                                              "--scores does, for filter-distilled")] = False,
) -> None:
    """Keep, of each line's n-best, the hypothesis closest to its reference (distillation data from a teacher's best
    translations); with --output, print what was kept as JSON."""
    from nmtkit.scoring.best_of import best_of_command

    summary = best_of_command(nbest, ref, output, metric, device, scores)
    if output is not None:
        print(json.dumps(summary))


@app.command()
@handle_errors
def export(
    model: Annotated[Path, typer.Option("--model", "-m", help="Transformer checkpoint", dir_okay=False)],
    out: Annotated[Path, typer.Option(help="model directory to write (absent or empty)")],
    to: Annotated[str, typer.Option(help="runtime to export for: ctranslate2")] = "ctranslate2",
    quantization: Annotated[str, typer.Option(help="weights: float32, int8, int8_float32, int8_float16, "
                                                   "int8_bfloat16, float16, bfloat16 or int16")] = "float32",
    shortlist: Annotated[Path | None, typer.Option(
        help="data directory the model was trained on (nmtkit prepare): search a vocabulary shortlist built from "
             "its training split", file_okay=False)] = None,
    shortlist_size: Annotated[int, typer.Option(help="shortlist: candidate target pieces per source piece")] = 50,
    shortlist_frequent: Annotated[int, typer.Option(help="shortlist: most frequent target pieces, always "
                                                         "candidates")] = 500,
) -> None:
    """Export a Transformer checkpoint to a directory that `translate -m DIR` and `serve -m DIR` run with
    CTranslate2 (subword models included); prints a JSON summary."""
    from nmtkit.export.command import export_model

    print(json.dumps(export_model(model, out, to, quantization, shortlist, shortlist_size, shortlist_frequent)))


@app.command()
@handle_errors
@config_options("settings", ServeConfig)
@config_options("decode", DecodeConfig, only=("beam", "placeholders"), given_only=True)
def serve(
    model: Annotated[Path, typer.Option("--model", "-m", help="checkpoint, or a directory written by nmtkit export")],
    *,
    settings: ConfigValues,
    decode: ConfigValues,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N")] = "auto",
    threads: Annotated[int, typer.Option(help="CPU threads (0 = all cores)")] = 0,
    inter_threads: Annotated[int, typer.Option(help=INTER_THREADS_HELP)] = 0,
    overrides: Overrides = None,
) -> None:
    """Serve translations over HTTP: POST /translate {"sentences": [...]} -> {"translations": [...]}, GET /health.

    Concurrent requests are translated together; SIGTERM or Ctrl-C answers the requests received and exits 0.
    Decoding settings not given here are the model's own (its config's decode section)."""
    from nmtkit.config.values import from_dict
    from nmtkit.serve.command import serve_model

    sections = _sections({"serve": settings, "decode": decode}, overrides)
    serve_model(model, from_dict(ServeConfig, sections["serve"], "serve."), device, threads, inter_threads,
                **sections["decode"])


@app.command()
@handle_errors
@config_options("settings", EvaluateConfig)
def evaluate(
    hyp: Annotated[str, typer.Option(help="hypothesis file, or - for stdin; with --sets, the directory of each "
                                          "set's hypotheses, <set>.hyp")],
    ref: Annotated[list[Path] | None, typer.Option(help="reference file (repeat for several references)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object keyed by metric")] = False,
    compare: Annotated[Path | None, typer.Option(help="baseline hypotheses: paired bootstrap test against them",
                                                 dir_okay=False)] = None,
    sets: Annotated[Path | None, typer.Option(help="directory of test sets (<set>.ref, as nmtkit robustness writes "
                                                   "them): score each set, one table, clean first")] = None,
    *,
    settings: ConfigValues,
) -> None:
    """Score hypotheses on a torch device: BLEU, chrF and TER as sacrebleu, WER, CER, MER, WIL, WIP as jiwer, edit
    distance."""
    from nmtkit.metrics.command import evaluate_command

    print(evaluate_command(hyp, ref, EvaluateConfig(**settings), compare, sets, json_output))


@app.command()
@handle_errors
@config_options("settings", RobustnessConfig)
def robustness(
    src: Annotated[Path, typer.Option(help="source side of a test set", dir_okay=False)],
    ref: Annotated[Path, typer.Option(help="its reference translations", dir_okay=False)],
    out: Annotated[Path, typer.Option(help="directory to write the sets into: <set>.src, <set>.ref, sets.json")],
    *,
    settings: ConfigValues,
) -> None:
    """Write robustness test sets made from a test set (title and upper case, no final mark, typos, merged lines,
    Unicode noise) beside the clean one; prints a JSON summary."""
    from nmtkit.data.robustness import write_sets

    print(json.dumps(write_sets(src, ref, out, RobustnessConfig(**settings))))


@app.command()
@handle_errors
def align(
    model: Annotated[Path, typer.Option("--model", "-m", help="source -> target checkpoint", dir_okay=False)],
    src: Annotated[Path, typer.Option(help="source sentences, words separated by spaces", dir_okay=False)],
    tgt: Annotated[Path, typer.Option(help="target sentences, words separated by spaces", dir_okay=False)],
    reverse_model: Annotated[Path | None, typer.Option(help="target -> source checkpoint: align both directions "
                                                            "and symmetrize", dir_okay=False)] = None,
    symmetrize: Annotated[str | None, typer.Option(
        help="intersection, union or grow-diag-final-and (default with --reverse-model); without --reverse-model "
             "it combines the argmax per target word with the argmax per source word")] = None,
    layer: Annotated[int | None, typer.Option(help="Transformer decoder layer (0-based, negative from the end; "
                                                   "default: the second last)")] = None,
    head: Annotated[int | None, typer.Option(help="attention head of that layer (default: mean over heads)")] = None,
    threshold: Annotated[float | None, typer.Option(help="links with word attention >= this, not the argmax")] = None,
    format: Annotated[str, typer.Option("--format", help="pharaoh (i-j links) or soft-json (attention)")] = "pharaoh",
    gold: Annotated[Path | None, typer.Option(help="gold links (i-j sure, ipj possible): print precision, "
                                                   "recall, AER as JSON instead of the alignments")] = None,
    output: Annotated[Path | None, typer.Option(help="write the alignments here (default: stdout)")] = None,
    plot: Annotated[Path | None, typer.Option(help="directory for PNG and SVG heat-maps", file_okay=False)] = None,
    plot_count: Annotated[int, typer.Option(help="heat-maps of the first N sentence pairs")] = 10,
    terminal: Annotated[bool, typer.Option(help="print heat-maps in the terminal instead of the alignments")] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N")] = "auto",
    threads: Annotated[int, typer.Option(help="CPU threads (0 = all cores)")] = 0,
) -> None:
    """Word alignments from cross-attention: Pharaoh `i-j` lines (source word first, 0-based), AER, heat-maps."""
    from rich.console import Console

    from nmtkit.align.command import AlignOptions, run

    printed = run(AlignOptions(model=model, src=src, tgt=tgt, reverse_model=reverse_model, symmetrize=symmetrize,
                               layer=layer, head=head, threshold=threshold, format=format, gold=gold, output=output,
                               plot=plot, plot_count=plot_count, terminal=terminal, device=device, threads=threads))
    if printed.heatmaps is not None:
        Console().print(printed.heatmaps)
    sys.stdout.write(printed.text)


@app.command("import")
@handle_errors
def import_(
    directory: Annotated[Path, typer.Argument(help="a Hugging Face checkpoint directory: config.json, "
                                                   "model.safetensors or pytorch_model.bin, tokenizer files")],
    out: Annotated[Path, typer.Option(help="directory to write model.pt into", file_okay=False)],
    src_lang: Annotated[str | None, typer.Option(help="source language (M2M100/NLLB: the language token each "
                                                      "source starts with, such as eng_Latn or en)")] = None,
    tgt_lang: Annotated[str | None, typer.Option(help="target language (a multilingual model: the default "
                                                      "--tgt-lang of translate)")] = None,
) -> None:
    """Import a MarianMTModel (OPUS-MT) or M2M100ForConditionalGeneration (M2M100, NLLB-200) checkpoint as an nmtkit
    checkpoint (docs/pretrained.md); prints a JSON summary."""
    from nmtkit.pretrained.command import import_model

    print(json.dumps(import_model(directory, out, src_lang, tgt_lang)))
