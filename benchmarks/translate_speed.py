"""Translation speed of nmtkit and of OpenNMT-py 3.5.1 on the same trained model and the same input, in one run.

The nmtkit checkpoint is converted once into an OpenNMT-py checkpoint (benchmarks/onmt_convert.py: same weights,
same vocabulary, same architecture), so both tools compute the same model: greedy outputs agree up to float
rounding, and the work per output token is the same. Each tool translates --input on the CPU with --threads
threads (nmtkit `--threads`; OpenNMT-py has no thread flag and takes OMP_NUM_THREADS, set for both), twice:
- beam search, beam --beam, each tool's own length normalisation (nmtkit `average`: log P / |Y|; OpenNMT-py
  `avg`: log P / (|Y| + 1), |Y| counting EOS; nmtkit's `sockeye` with alpha 1 and beta 1 ranks like the latter)
  and its own beam search: nmtkit ranks 2K candidates, keeps K live beams and stops with K finished hypotheses;
  OpenNMT-py ranks K, lets finished beams drop out and stops when its best beam ends. Beam outputs and output
  lengths therefore differ a little (the table shows how many lines are identical), and so does the work.
- greedy search (nmtkit `--greedy`, OpenNMT-py `-beam_size 1`; its `-random_sampling_topk 1` gives the same
  outputs through its GreedySearch class).
- with --reduced-precision, beam search a third time in each tool's fastest CPU precision: nmtkit `--bf16`
  (bfloat16 weights and activations; fast on CPUs with AVX512-BF16 or AMX) and OpenNMT-py `-precision int8`
  (meant as PyTorch dynamic int8 quantization, its CPU-only option; in 3.5.1 it changes nothing, as
  onmt/model_builder.py compares the option's string with torch.int8, so this is OpenNMT-py in float32 again and
  its outputs equal its float32 run's).
The same weights also run in CTranslate2, twice, each through its own converter (conversions outside the timed
commands): nmtkit's export (`nmtkit export`, float32 and int8 weights), translated by `nmtkit translate -m DIR`
with nmtkit's search settings (outputs equal nmtkit's float32 ones up to float rounding, see
nmtkit/translate/ctranslate2_engine.py), and CTranslate2's own OpenNMT-py converter (`ct2-opennmt-py-converter`,
float32 and int8 weights, run on the checkpoint above; it reads no OpenNMT-py code, and it leaves the layer norm
epsilon at CTranslate2's 1e-6 where nmtkit and this checkpoint use 1e-5), translated by benchmarks/ct2_translate.py
with CTranslate2's defaults (`translate_file`: batches of 32 sentences, length penalty 1 on |Y| without EOS, at most
256 tokens), its input and output as OpenNMT-py's.
Both use their default batching: nmtkit (the checkpoint's decode settings) sorts 2000 lines at a time by length
and cuts batches of 6000 source tokens; OpenNMT-py sorts up to 16384 lines by length and cuts batches of 30
sentences. Both use their default output length limit: nmtkit 1.5 * source length + 10 per sentence, OpenNMT-py
1.25 * longest source of the batch + 5 (at most 250); only outputs that run into a limit are affected.

OpenNMT-py reads the SentencePiece pieces nmtkit would feed its model, written as tokens with the `</s>` nmtkit
appends, and its output tokens are decoded with the same SentencePiece model. This conversion is done outside
the timed commands; nmtkit's times include its SentencePiece encoding and decoding (a negligible share).
Empty input lines are left out (nmtkit does not translate them; OpenNMT-py would translate a lone `</s>`).

- wall: the whole command (interpreter start, imports, model load, translation, output).
- translate: wall minus the wall time of the same command on the first input line alone (start, load, one line).
- tokens: whitespace-separated words of the detokenised outputs. BLEU (sacrebleu) against --ref shows that the
  outputs agree in quality as well.

Usage: python benchmarks/translate_speed.py [--model runs/bible-es-en/transformer/model.pt]
       [--input data/bible/raw/test.es] [--ref data/bible/raw/test.en] [--threads 2] [--beam 5] [--skip-onmt]
       [--skip-ctranslate2] [--reduced-precision] [--inter-threads 1] [--shortlist data/bible/bpe8000] [--repeats 1]
--repeats N times every command N times, in N rounds of all of them, and reports medians (and each round's wall
seconds): one run of a command varies by up to 10% on a shared 2-core machine.
--inter-threads N runs every CTranslate2 model (both converters' outputs alike) with N workers of threads/N threads
(CTranslate2's inter_threads and intra_threads); the PyTorch runs keep --threads threads in one process.
--shortlist DATA adds an int8 export searched over a vocabulary shortlist built from DATA's training split
(`nmtkit export --shortlist`, default sizes: 500 frequent pieces, 50 per source piece).
(build the OpenNMT-py environment first with benchmarks/setup_onmt.sh).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import torch
from onmt_convert import convert, nmtkit_to_onmt_tokens, source_line

from nmtkit.checkpoint.payload import load_checkpoint
from nmtkit.config.run import build_config
from nmtkit.data.subword import Subword
from nmtkit.export.command import export_model

log = logging.getLogger("translate_speed")

NMTKIT, ONMT = "nmtkit", "OpenNMT-py 3.5.1"
NMTKIT_CT2, NMTKIT_CT2_INT8 = "nmtkit → CTranslate2", "nmtkit → CTranslate2 int8"
NMTKIT_CT2_SHORTLIST = "nmtkit → CTranslate2 int8 + shortlist"
ONMT_CT2, ONMT_CT2_INT8 = "OpenNMT-py → CTranslate2", "OpenNMT-py → CTranslate2 int8"
CT2_TRANSLATE = Path(__file__).with_name("ct2_translate.py")
REDUCED = "bf16/int8"  # suffix of the reduced-precision search: nmtkit --bf16, OpenNMT-py -precision int8
ONMT_OWN_TIME = re.compile(r"Total translation time \(s\): ([\d.]+)")


@dataclass
class Inputs:
    """The same sentences for both tools, and what turns OpenNMT-py's output tokens back into text."""

    text: Path  # nmtkit input: the non-empty input lines, as written
    pieces: Path  # OpenNMT-py input: the same lines as SentencePiece tokens + </s>
    refs: list[str] | None
    tgt_subword: Subword
    tgt_ids: dict[str, int]  # OpenNMT-py target token -> nmtkit id


@dataclass
class Run:
    """One tool's translation of the input with one search."""

    tool: str
    search: str
    wall: float
    startup: float
    outputs: list[str]
    own_seconds: float | None = None  # OpenNMT-py's -report_time figure (model load excluded)
    walls: list[float] | None = None  # each round's wall seconds, with --repeats

    @property
    def tokens(self) -> int:
        return sum(len(line.split()) for line in self.outputs)

    @property
    def translate(self) -> float:
        """Wall seconds without startup; not positive when the input is too short to measure it."""
        return self.wall - self.startup


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("runs/bible-es-en/transformer/model.pt"),
                        help="nmtkit Transformer checkpoint")
    parser.add_argument("--input", type=Path, default=Path("data/bible/raw/test.es"), help="source text")
    parser.add_argument("--ref", type=Path, default=Path("data/bible/raw/test.en"),
                        help="reference translations for BLEU (skipped if the file does not exist)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for both tools")
    parser.add_argument("--beam", type=int, default=5, help="beam size of the beam-search runs")
    parser.add_argument("--inter-threads", type=int, default=1,
                        help="CTranslate2 runs: batches translated at once, each with threads/N threads")
    parser.add_argument("--shortlist", type=Path, default=None,
                        help="also an int8 export with the vocabulary shortlist of this data directory (the "
                             "model's training data, e.g. data/bible/bpe8000)")
    parser.add_argument("--onmt-venv", type=Path, default=Path("/work/onmt-venv"), help="OpenNMT-py 3.5.1 venv")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of every timed command (each round runs all of them in turn); medians count")
    parser.add_argument("--skip-onmt", action="store_true", help="leave out OpenNMT-py")
    parser.add_argument("--skip-ctranslate2", action="store_true", help="leave out the CTranslate2 runs")
    parser.add_argument("--reduced-precision", action="store_true",
                        help="also beam search with nmtkit --bf16 and OpenNMT-py -precision int8")
    return parser.parse_args()


def thread_env(threads: int) -> dict:
    # OpenNMT-py 3.5.1 calls torch.load without weights_only; torch >= 2.6 then refuses the checkpoint's Namespace
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


def tail(path: Path, lines: int = 8) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def read_refs(path: Path, kept: list[int], total: int) -> list[str] | None:
    if not path.is_file():
        log.warning("no reference file %s: BLEU is skipped", path)
        return None
    refs = path.read_text(encoding="utf-8").splitlines()
    if len(refs) != total:
        raise SystemExit(f"{path} has {len(refs)} lines, the input {total}")
    return [refs[index] for index in kept]


def prepare_inputs(args: argparse.Namespace, payload: dict, workdir: Path) -> Inputs:
    """Write the non-empty input lines for nmtkit, and for OpenNMT-py the pieces nmtkit feeds its model: the
    SentencePiece ids cut to max_positions - 1 as nmtkit cuts them, then the EOS it appends."""
    lines = args.input.read_text(encoding="utf-8").splitlines()
    kept = [index for index, line in enumerate(lines) if line.strip()]
    texts = [lines[index] for index in kept]  # as written: nmtkit encodes a line as it is
    src_subword = Subword(payload["subword"]["src"])
    tgt_subword = src_subword if payload["subword"]["joint"] else Subword(payload["subword"]["tgt"])
    limit = build_config(payload["config"]).model.max_positions - 1
    src_tokens = nmtkit_to_onmt_tokens(src_subword)
    pieces = [source_line(ids[:limit], src_tokens) for ids in src_subword.encode(texts)]
    text_path, pieces_path = workdir / "input.txt", workdir / "input.onmt"
    text_path.write_text("".join(line + "\n" for line in texts), encoding="utf-8")
    pieces_path.write_text("".join(line + "\n" for line in pieces), encoding="utf-8")
    tgt_ids = {token: index for index, token in nmtkit_to_onmt_tokens(tgt_subword).items()}
    return Inputs(text_path, pieces_path, read_refs(args.ref, kept, len(lines)), tgt_subword, tgt_ids)


def first_line(path: Path) -> Path:
    """A copy of `path` holding its first line only, for the startup run."""
    short = path.with_name(f"first-{path.name}")
    short.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    return short


def run_timed(command: list[str], env: dict, stdout_path: Path, log_path: Path) -> float:
    """Run `command` (stdout and stderr into files); returns its wall seconds."""
    log.info("running %s", " ".join(command))
    started = time.monotonic()
    with open(stdout_path, "w", encoding="utf-8") as out, open(log_path, "w", encoding="utf-8") as err:
        code = subprocess.run(command, env=env, stdout=out, stderr=err).returncode
    seconds = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"{command[0]} failed with exit code {code}:\n{tail(log_path)}")
    return seconds


def file_name(tool: str, search: str) -> str:
    """A file name for one run's outputs and logs."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", f"{tool} {search}").strip("-")


# ---------------------------------------------------------------- nmtkit (a checkpoint, or an exported directory)
def nmtkit_command(args: argparse.Namespace, source: Path, search: str, model: Path | None = None) -> list[str]:
    mode = ["--greedy"] if search == "greedy" else ["--beam", str(args.beam), "--length-penalty", "average"]
    mode += ["--bf16"] if search.endswith(REDUCED) else []
    workers = ["--inter-threads", str(args.inter_threads)] if model is not None else []
    return [sys.executable, "-m", "nmtkit", "-q", "translate", "--model", str(model or args.model), "--input",
            str(source), "--threads", str(args.threads), "--device", "cpu"] + workers + mode


def time_nmtkit(args: argparse.Namespace, inputs: Inputs, search: str, workdir: Path, tool: str = NMTKIT,
                model: Path | None = None) -> Run:
    name = file_name(tool, search)
    env, out, err = thread_env(args.threads), workdir / f"{name}.out", workdir / f"{name}.log"
    startup = run_timed(nmtkit_command(args, first_line(inputs.text), search, model), env, out, err)
    wall = run_timed(nmtkit_command(args, inputs.text, search, model), env, out, err)
    return Run(tool, search, wall, startup, out.read_text(encoding="utf-8").splitlines())


# ---------------------------------------------------------------- CTranslate2 from OpenNMT-py's checkpoint
def onmt_ct2_convert(onmt_model: Path, out: Path, quantization: str = "float32") -> Path:
    """CTranslate2's own converter on the OpenNMT-py checkpoint (it unpickles the checkpoint's argparse options:
    --unsafe_deserialization, for a file this script wrote), with weights in `quantization`."""
    converter = Path(sys.executable).with_name("ct2-opennmt-py-converter")
    run_timed([str(converter), "--model_path", str(onmt_model), "--output_dir", str(out), "--unsafe_deserialization",
               "--quantization", quantization], os.environ.copy(), out.with_suffix(".stdout"), out.with_suffix(".log"))
    return out


def ct2_command(args: argparse.Namespace, model: Path, source: Path, output: Path, search: str) -> list[str]:
    beam = "1" if search == "greedy" else str(args.beam)
    return [sys.executable, str(CT2_TRANSLATE), str(model), str(source), str(output), "--beam", beam,
            "--threads", str(args.threads), "--inter-threads", str(args.inter_threads)]


def time_onmt_ct2(args: argparse.Namespace, tool: str, model: Path, inputs: Inputs, search: str,
                  workdir: Path) -> Run:
    name = file_name(tool, search)
    env, output, log_path = thread_env(args.threads), workdir / f"{name}.out", workdir / f"{name}.log"
    stdout = workdir / f"{name}.stdout"
    startup = run_timed(ct2_command(args, model, first_line(inputs.pieces), output, search), env, stdout, log_path)
    wall = run_timed(ct2_command(args, model, inputs.pieces, output, search), env, stdout, log_path)
    return Run(tool, search, wall, startup, decode_onmt(output, inputs))


# ---------------------------------------------------------------- OpenNMT-py
def onmt_command(args: argparse.Namespace, model: Path, source: Path, output: Path, search: str) -> list[str]:
    beam = ["-beam_size", "1"] if search == "greedy" else ["-beam_size", str(args.beam), "-length_penalty", "avg"]
    beam += ["-precision", "int8"] if search.endswith(REDUCED) else []
    return [str(args.onmt_venv / "bin" / "onmt_translate"), "-model", str(model), "-src", str(source),
            "-output", str(output), "-report_time"] + beam


def decode_onmt(path: Path, inputs: Inputs) -> list[str]:
    """OpenNMT-py's output tokens -> nmtkit ids -> text, with the target SentencePiece model."""
    ids = [[inputs.tgt_ids[token] for token in line.split()] for line in path.read_text(encoding="utf-8").splitlines()]
    return inputs.tgt_subword.decode(ids)


def time_onmt(args: argparse.Namespace, model: Path, inputs: Inputs, search: str, workdir: Path) -> Run:
    name = file_name(ONMT, search)
    env, output = thread_env(args.threads), workdir / f"{name}.out"
    stdout, err = workdir / f"{name}.stdout", workdir / f"{name}.log"
    startup = run_timed(onmt_command(args, model, first_line(inputs.pieces), output, search), env, stdout, err)
    wall = run_timed(onmt_command(args, model, inputs.pieces, output, search), env, stdout, err)
    own = ONMT_OWN_TIME.search(err.read_text(encoding="utf-8") + stdout.read_text(encoding="utf-8"))
    return Run(ONMT, search, wall, startup, decode_onmt(output, inputs), float(own.group(1)) if own else None)


# ---------------------------------------------------------------- report
def bleu(run: Run, refs: list[str] | None) -> str:
    return f"{sacrebleu.corpus_bleu(run.outputs, [refs]).score:.2f}" if refs else "—"


def rate(count: int, seconds: float, digits: int = 1) -> str:
    return f"{count / seconds:,.{digits}f}" if seconds > 0 else "—"


def ratio(nmtkit_count: int, nmtkit_seconds: float, onmt_count: int, onmt_seconds: float) -> str:
    """nmtkit's throughput over OpenNMT-py's."""
    if min(nmtkit_seconds, onmt_seconds, onmt_count) <= 0:
        return "—"
    return f"{(nmtkit_count / nmtkit_seconds) / (onmt_count / onmt_seconds):.2f}"


def format_run(run: Run, refs: list[str] | None) -> str:
    sentences = len(run.outputs)
    return (f"| {run.search} | {run.tool} | {sentences} | {run.tokens:,} | {run.wall:.1f} | {run.startup:.1f} | "
            f"{rate(sentences, run.wall)} | {rate(run.tokens, run.wall, 0)} | {rate(sentences, run.translate)} | "
            f"{rate(run.tokens, run.translate, 0)} | {bleu(run, refs)} |")


def format_ratio(nmtkit: Run, onmt: Run) -> str:
    """nmtkit / OpenNMT-py throughput, and the share of identical output lines."""
    same = sum(left == right for left, right in zip(nmtkit.outputs, onmt.outputs)) / max(len(nmtkit.outputs), 1)
    sentences = len(nmtkit.outputs), len(onmt.outputs)
    return (f"| {nmtkit.decoding.search} | {ratio(sentences[0], nmtkit.wall, sentences[1], onmt.wall)} | "
            f"{ratio(nmtkit.tokens, nmtkit.wall, onmt.tokens, onmt.wall)} | "
            f"{ratio(sentences[0], nmtkit.translate, sentences[1], onmt.translate)} | "
            f"{ratio(nmtkit.tokens, nmtkit.translate, onmt.tokens, onmt.translate)} | {100 * same:.1f}% |")


def baseline_search(search: str) -> str:
    """The search whose nmtkit PyTorch float32 run the others are measured against: beam for the beam searches."""
    return "greedy" if search == "greedy" else search.split(",")[0]


def format_against(run: Run, baseline: Run) -> str:
    """A run's throughput over nmtkit PyTorch float32's on the same search, and its share of identical lines."""
    same = sum(left == right for left, right in zip(run.outputs, baseline.outputs)) / max(len(run.outputs), 1)
    sentences = len(run.outputs), len(baseline.outputs)
    return (f"| {run.search} | {run.tool} | {ratio(sentences[0], run.wall, sentences[1], baseline.wall)} | "
            f"{ratio(sentences[0], run.translate, sentences[1], baseline.translate)} | "
            f"{ratio(run.tokens, run.translate, baseline.tokens, baseline.translate)} | {100 * same:.1f}% |")


def print_against_nmtkit(runs: list[Run]) -> None:
    baselines = {run.search: run for run in runs if run.tool == NMTKIT}
    rows = [format_against(run, baselines[baseline_search(run.search)]) for run in runs
            if baseline_search(run.search) in baselines and run is not baselines[baseline_search(run.search)]]
    if rows:
        print("\nAgainst nmtkit PyTorch float32 on the same search (× its throughput; lines identical to its output):")
        print("| search | tool | sent/s (wall) | sent/s (translate) | tok/s (translate) | identical lines |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))


def print_report(runs: list[Run], refs: list[str] | None, args: argparse.Namespace) -> None:
    workers = (f"; CTranslate2 runs: {args.inter_threads} batches at once, {max(1, args.threads // args.inter_threads)}"
               " thread(s) each" if args.inter_threads > 1 else "")
    print(f"CPU, {args.threads} threads, beam {args.beam}; each tool's default batching and length limits{workers}.\n")
    print("| search | tool | sentences | tokens | wall s | startup s | sent/s (wall) | tok/s (wall) "
          "| sent/s (translate) | tok/s (translate) | BLEU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(format_run(run, refs))
    pairs = {(run.search, run.tool): run for run in runs}
    searches = [run.search for run in runs if run.tool == NMTKIT and (run.search, ONMT) in pairs]
    if searches:
        print("\n| search | nmtkit/OpenNMT-py sent/s (wall) | tok/s (wall) | sent/s (translate) "
              "| tok/s (translate) | identical output lines |")
        print("|---|---|---|---|---|---|")
        for search in searches:
            print(format_ratio(pairs[search, NMTKIT], pairs[search, ONMT]))
        own = ", ".join(f"{run.search} {run.own_seconds:.1f} s" for run in runs if run.own_seconds is not None)
        print(f"\nOpenNMT-py's own -report_time (model load excluded): {own}.")
    print_against_nmtkit(runs)
    if any(run.walls for run in runs):
        print(f"\nMedians of {args.repeats} rounds; each round's wall seconds:")
        for run in runs:
            print(f"- {run.search}, {run.tool}: {', '.join(f'{wall:.1f}' for wall in run.walls or [])}")
    print("\nstartup s: the same command on the first line alone; translate = wall - startup. "
          "tokens: whitespace words of the detokenised output.")


@dataclass
class Models:
    """What each tool runs, converted before any timing; None for a tool left out."""

    onmt: Path | None = None  # OpenNMT-py checkpoint, for onmt_translate
    onmt_ct2: dict[str, Path] | None = None  # its CTranslate2 conversions per tool name (float32, int8)
    exports: dict[str, Path] | None = None  # nmtkit export per tool name (float32, int8)


def convert_models(args: argparse.Namespace, payload: dict, workdir: Path) -> Models:
    models = Models()
    onmt_venv = (args.onmt_venv / "bin" / "onmt_translate").exists()
    if args.skip_onmt:
        print("OpenNMT-py skipped (--skip-onmt).")
    elif not onmt_venv:
        print(f"OpenNMT-py venv {args.onmt_venv} not found; build it with: bash benchmarks/setup_onmt.sh")
    if not args.skip_onmt or not args.skip_ctranslate2:
        torch.save(convert(payload), workdir / "onmt.pt")
        models.onmt = workdir / "onmt.pt" if onmt_venv and not args.skip_onmt else None
    if args.skip_ctranslate2:
        print("CTranslate2 skipped (--skip-ctranslate2).")
        return models
    models.onmt_ct2 = {tool: onmt_ct2_convert(workdir / "onmt.pt", workdir / file_name(tool, ""), quantization)
                       for tool, quantization in ((ONMT_CT2, "float32"), (ONMT_CT2_INT8, "int8"))}
    models.exports = {tool: Path(export_model(args.model, workdir / file_name(tool, ""), "ctranslate2",
                                              quantization)["out"])
                      for tool, quantization in ((NMTKIT_CT2, "float32"), (NMTKIT_CT2_INT8, "int8"))}
    if args.shortlist is not None:
        models.exports[NMTKIT_CT2_SHORTLIST] = Path(export_model(
            args.model, workdir / file_name(NMTKIT_CT2_SHORTLIST, ""), "ctranslate2", "int8", args.shortlist)["out"])
    return models


def time_search(args: argparse.Namespace, models: Models, inputs: Inputs, search: str, workdir: Path) -> list[Run]:
    """Every tool's run of one search (the reduced-precision search: nmtkit --bf16 and OpenNMT-py int8 only)."""
    runs = [time_onmt(args, models.onmt, inputs, search, workdir)] if models.onmt is not None else []
    runs.append(time_nmtkit(args, inputs, search, workdir))
    if search.endswith(REDUCED) or models.exports is None:
        return runs
    runs += [time_nmtkit(args, inputs, search, workdir, tool, model) for tool, model in models.exports.items()]
    return runs + [time_onmt_ct2(args, tool, model, inputs, search, workdir) for tool, model in models.onmt_ct2.items()]


def time_all(args: argparse.Namespace, payload: dict, workdir: Path) -> tuple[list[Run], list[str] | None]:
    """Every run, --repeats rounds of all of them (so that the machine's drift between minutes falls on every tool
    alike), merged into one Run per tool and search with the median wall and startup seconds."""
    inputs = prepare_inputs(args, payload, workdir)
    models = convert_models(args, payload, workdir)
    searches = [f"beam {args.beam}", "greedy"] + ([f"beam {args.beam}, {REDUCED}"] if args.reduced_precision else [])
    rounds = []
    for number in range(args.repeats):
        if args.repeats > 1:
            log.info("round %d of %d", number + 1, args.repeats)
        rounds.append([run for search in searches for run in time_search(args, models, inputs, search, workdir)])
    return [merge_rounds(list(runs)) for runs in zip(*rounds)], inputs.refs


def merge_rounds(runs: list[Run]) -> Run:
    """One tool's runs of one search in every round as one Run: median wall and startup seconds (and OpenNMT-py's
    own time), the first round's outputs."""
    if len(runs) == 1:
        return runs[0]
    own = [run.own_seconds for run in runs if run.own_seconds is not None]
    return Run(runs[0].tool, runs[0].search, statistics.median(run.wall for run in runs),
               statistics.median(run.startup for run in runs), runs[0].outputs,
               statistics.median(own) if own else None, [run.wall for run in runs])


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    payload = load_checkpoint(args.model)
    with tempfile.TemporaryDirectory(prefix="translate_speed-") as tmp:
        runs, refs = time_all(args, payload, Path(tmp))
    print_report(runs, refs, args)


if __name__ == "__main__":
    main()
