"""Training throughput of nmtkit and of OpenNMT-py 3.5.1 on the same data and the same model, in one run.

Both tools train one Transformer preset with label smoothing 0.1 and Adam, for `--steps` updates of
`--batch-tokens` tokens (padding included), as `--accumulate` batches of batch-tokens / accumulate each:
- small (default): 3 + 3 layers, d_model 256, 4 heads, FFN 1024, ReLU, pre-norm, gradient clipping at 1.0;
- base: the model of recipes/wmt/transformer-base.yaml (Vaswani et al. 2017, Transformer base): 6 + 6 layers,
  d_model 512, 8 heads, FFN 2048, ReLU, post-norm, no clipping. OpenNMT-py 3.5.1 has pre-norm layers only
  (onmt/encoders/transformer.py), so it trains the same layers with the norm before each sub-layer (and one more
  LayerNorm at the end of each stack): the same matrix products, two LayerNorms more.
Both have dropout 0.1, no attention dropout, biases in every linear layer, sinusoidal positions and one embedding
matrix shared by source, target and output. Both read the training split of the nmtkit data directory: OpenNMT-py
gets its token arrays written out as SentencePiece pieces, with the same 8k vocabulary.

Precision: `--device cpu` (with `--threads` threads): float32 for OpenNMT-py; nmtkit float32 and bf16 autocast.
`--device cuda`: nmtkit bf16 autocast; OpenNMT-py 3.5.1 has no bf16 (its `-model_dtype` takes fp32 or fp16, and
fp16 with the adam optimizer is torch.cuda.amp autocast to float16 with a GradScaler): fp16 AMP, labelled so.
OpenNMT-py uses its default 2 data-loading workers on CUDA, 0 on the CPU (`--onmt-workers`). On CUDA both run
with PyTorch's cuDNN attention off (nmtkit's own choice, nmtkit/runtime/device.py: it builds a plan for every new batch
shape; OpenNMT-py's torch<2.3 never picked it), the launcher doing it for OpenNMT-py.

Target tokens are counted the same way on both sides: the non-padding tokens the loss is computed on, i.e. each
target sentence's pieces plus EOS. The first log interval is warm-up and is not timed.
- "update" tok/s: nmtkit's metrics.jsonl `tgt_tokens_per_s`, the time of the update only (moving the batches to
  the device, forward, backward, optimizer step). OpenNMT-py logs no such figure.
- "wall" tok/s: tokens over the wall time between two log lines, batching and logging included. OpenNMT-py's
  "tok/s" (onmt/utils/statistics.py) is this figure; for nmtkit it is the `tgt_tokens` of the metrics.jsonl
  records after the first over the difference of their `elapsed`. The ratio column compares wall tok/s.
- loader share: the part of the wall time not spent updating. nmtkit: 1 - update time / wall time (collating the
  next batches in the training process, and bookkeeping). OpenNMT-py: the time its training loop waits for the
  next update's batches (`Trainer._accum_batches`, timed by the launcher after a device synchronisation, so that
  GPU work still queued is not counted; it includes copying them to the device, which nmtkit's update does) over
  the wall time.
- MFU: training FLOPs per target token (`flops_formula()`, printed) x wall tok/s / `--peak-tflops` (on CUDA by
  default 989, an H200's or H100 SXM's dense bf16 and fp16 peak).

Usage: python benchmarks/train_speed.py [--device cpu|cuda] [--preset small|base] [--steps 60] [--threads 2]
[--batch-tokens 4096] [--accumulate 1] [--onmt-venv /work/onmt-venv | --onmt-python PYTHON] [--skip-onmt]
(build the OpenNMT-py environment first with benchmarks/setup_onmt.sh).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger("train_speed")

ONMT_ANCHOR_TPS = 1200.0
ONMT_ANCHOR = "OpenNMT-py 3.5.1, measured on this machine by the issue author: ~1,200 target tokens/s"
SEED = 1
H200_PEAK_TFLOPS = 989.0  # dense bf16/fp16 tensor-core peak of an H200 (and H100 SXM)
# "Step 20/   60; acc: 3.1; ppl: 8000.0; xent: 9.0; lr: 0.00000; sents:  1234; bsz: 3000/3100/123; 900/950 tok/s;"
ONMT_STEP = re.compile(r"Step\s+(\d+)[^;]*;.*?bsz:\s*(\d+)/\s*(\d+)/\s*(\d+);\s*(\d+)/\s*(\d+) tok/s")
ONMT_PARAMS = re.compile(r"\* number of parameters: (\d+)")


@dataclass(frozen=True)
class Preset:
    """One Transformer, as both tools are told to build it."""

    layers: int
    d_model: int
    heads: int
    ffn: int
    norm: str  # nmtkit's; OpenNMT-py 3.5.1 is pre-norm only
    clip_norm: float
    dropout: float = 0.1
    label_smoothing: float = 0.1
    activation: str = "relu"


PRESETS = {"small": Preset(layers=3, d_model=256, heads=4, ffn=1024, norm="pre", clip_norm=1.0),
           "base": Preset(layers=6, d_model=512, heads=8, ffn=2048, norm="post", clip_norm=0.0)}


@dataclass
class Row:
    """One tool's timed window."""

    tool: str
    precision: str
    steps: int
    update_tps: float | None
    wall_tps: float
    wall_seconds_per_step: float
    run_seconds: float
    parameters: int | None
    loader_share: float | None = None


# ---------------------------------------------------------------- model FLOPs
@dataclass(frozen=True)
class Lengths:
    """Token counts of a corpus as the model sees them (each side's pieces plus its EOS)."""

    src: int
    tgt: int
    src_pairs: int  # sum over sentences of s * s: encoder self-attention (query, key) pairs
    tgt_pairs: int  # sum of t * (t + 1) / 2: causal decoder self-attention pairs
    cross_pairs: int  # sum of t * s: decoder cross-attention pairs


def corpus_lengths(src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> Lengths:
    s, t = src_lengths.astype(np.int64) + 1, tgt_lengths.astype(np.int64) + 1
    return Lengths(int(s.sum()), int(t.sum()), int((s * s).sum()), int((t * (t + 1) // 2).sum()),
                   int((s * t).sum()))


def matmul_weights(preset: Preset, vocab: int) -> tuple[int, int, int]:
    """Weights multiplied once per source token (encoder layers, the decoder's cross-attention keys and values of
    the encoder output), per target token (decoder layers, output projection); and their total."""
    d, f = preset.d_model, preset.ffn
    per_src = preset.layers * (4 * d * d + 2 * d * f) + preset.layers * 2 * d * d
    per_tgt = preset.layers * (4 * d * d + 2 * d * d + 2 * d * f) + d * vocab
    return per_src, per_tgt, per_src + per_tgt


def train_flops_per_target_token(preset: Preset, vocab: int, lengths: Lengths) -> float:
    """Forward = 2 FLOPs per multiply-add of every weight with every token it meets, plus 4 d per attention
    (query, key) pair (q.k and the weighted sum of v); training = 3 x forward (backward: twice the forward).
    Embedding lookups, norms, softmax and the optimizer are left out, as MFU usually does (PaLM, Appendix B)."""
    per_src, per_tgt, _ = matmul_weights(preset, vocab)
    linear = 2 * (per_src * lengths.src + per_tgt * lengths.tgt)
    pairs = preset.layers * (lengths.src_pairs + lengths.tgt_pairs + lengths.cross_pairs)
    return 3 * (linear + 4 * preset.d_model * pairs) / lengths.tgt


def flops_formula(preset: Preset, vocab: int, lengths: Lengths) -> str:
    per_src, per_tgt, _ = matmul_weights(preset, vocab)
    flops = train_flops_per_target_token(preset, vocab, lengths)
    return (f"FLOPs per target token = 3 x [2 x ({per_src:,} x S + {per_tgt:,} x T) + 4 x d x L x (sum s^2 + "
            f"sum t(t+1)/2 + sum s t)] / T = {flops / 1e6:,.1f} MFLOP (L = {preset.layers} layers a stack, d = "
            f"{preset.d_model}, vocab {vocab}; weights per source token L(4d^2 + 2d ffn) + L 2d^2, per target token "
            f"L(6d^2 + 2d ffn) + d vocab; over the training split: S = {lengths.src:,} source and T = "
            f"{lengths.tgt:,} target tokens with EOS, s and t each sentence's)")


def data_lengths(data: Path) -> Lengths:
    src, tgt = (np.diff(np.load(data / f"train.{side}.off.npy")) for side in ("src", "tgt"))
    return corpus_lengths(src, tgt)


# ---------------------------------------------------------------- running
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/bible/bpe8000"), help="nmtkit data directory")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device both tools train on")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small", help="the model (see above)")
    parser.add_argument("--steps", type=int, default=60, help="training updates per tool")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch (--device cpu)")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="tokens per update (padding included)")
    parser.add_argument("--accumulate", type=int, default=1, help="batches per update, batch-tokens/N tokens each")
    parser.add_argument("--log-every", type=int, default=10, help="updates per log interval (first = warm-up)")
    parser.add_argument("--onmt-venv", type=Path, default=Path("/work/onmt-venv"), help="OpenNMT-py 3.5.1 venv")
    parser.add_argument("--onmt-python", help="a Python that imports OpenNMT-py 3.5.1 (instead of --onmt-venv's)")
    parser.add_argument("--onmt-workers", type=int, help="OpenNMT-py's data-loading processes (default: its 2 "
                        "on CUDA, 0 on the CPU, beside the --threads compute threads as nmtkit has none)")
    parser.add_argument("--skip-onmt", action="store_true", help="time nmtkit only; compare with the anchor")
    parser.add_argument("--no-bf16", action="store_true", help="CPU: skip the nmtkit bf16 autocast row")
    parser.add_argument("--peak-tflops", type=float,
                        help=f"the device's peak, for MFU (default {H200_PEAK_TFLOPS:g} on CUDA, none on the CPU)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (one warm-up interval and one timed interval)")
    if args.accumulate < 1 or args.batch_tokens % args.accumulate:
        parser.error("--accumulate must be at least 1 and divide --batch-tokens")
    if args.onmt_workers is None:
        args.onmt_workers = 2 if args.device == "cuda" else 0
    if args.peak_tflops is None and args.device == "cuda":
        args.peak_tflops = H200_PEAK_TFLOPS
    return args


def tool_env(args: argparse.Namespace) -> dict:
    if args.device != "cpu":
        return dict(os.environ)
    return {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}


def run_logged(command: list[str], env: dict, log_path: Path) -> tuple[int, float]:
    """Run `command` with stdout and stderr into `log_path`; returns (exit code, wall seconds)."""
    log.info("running %s", " ".join(command))
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as stream:
        code = subprocess.run(command, env=env, stdout=stream, stderr=subprocess.STDOUT).returncode
    return code, time.monotonic() - started


def tail(path: Path, lines: int = 8) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


# ---------------------------------------------------------------- nmtkit
def nmtkit_command(args: argparse.Namespace, out: Path, interval: int, amp: str) -> list[str]:
    preset = PRESETS[args.preset]
    settings = {"model.encoder_layers": preset.layers, "model.decoder_layers": preset.layers,
                "model.d_model": preset.d_model, "model.heads": preset.heads, "model.ffn": preset.ffn,
                "model.dropout": preset.dropout, "model.attention_dropout": 0.0, "model.activation_dropout": -1,
                "model.activation": preset.activation, "model.norm": preset.norm, "model.positions": "sinusoidal",
                "model.share_embeddings": "true", "model.tie_output": "true",
                "train.label_smoothing": preset.label_smoothing, "train.clip_norm": preset.clip_norm,
                "train.batch_tokens": args.batch_tokens // args.accumulate, "train.update_freq": args.accumulate,
                "train.amp": amp, "train.log_every": interval, "train.valid_every": 100_000_000,
                "train.valid_bleu": "false", "train.keep_checkpoints": 0}
    command = [sys.executable, "-m", "nmtkit", "-q", "train", "--data", str(args.data), "--out", str(out),
               "--max-steps", str(args.steps), "--device", args.device, "--seed", str(SEED), "--quiet"]
    if args.device == "cpu":
        command += ["--threads", str(args.threads)]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    return command


def summarise_nmtkit(records: list[dict], precision: str, run_seconds: float, parameters: int) -> Row:
    """Each record holds its interval's target tokens, their update-only tok/s and the wall time elapsed so far."""
    first, timed = records[0], records[1:]
    tokens = sum(record["tgt_tokens"] for record in timed)
    update_seconds = sum(record["tgt_tokens"] / record["tgt_tokens_per_s"] for record in timed)
    wall_seconds = timed[-1]["elapsed"] - first["elapsed"]
    steps = timed[-1]["step"] - first["step"]
    return Row("nmtkit", precision, steps, tokens / update_seconds, tokens / wall_seconds, wall_seconds / steps,
               run_seconds, parameters, max(0.0, 1 - update_seconds / wall_seconds))


def time_nmtkit(args: argparse.Namespace, interval: int, amp: str, workdir: Path) -> Row | None:
    out, log_path = workdir / f"nmtkit-{amp}", workdir / f"nmtkit-{amp}.log"
    code, run_seconds = run_logged(nmtkit_command(args, out, interval, amp), tool_env(args), log_path)
    if code != 0:
        log.error("nmtkit (%s) failed with exit code %d:\n%s", amp, code, tail(log_path))
        return None
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    records = [record for record in map(json.loads, lines) if "tgt_tokens_per_s" in record]
    output = log_path.read_text(encoding="utf-8").splitlines()
    summary = json.loads(next(line for line in reversed(output) if line.startswith("{")))
    precision = {"none": "fp32", "bf16": "bf16 autocast", "fp16": "fp16 autocast"}[amp]
    return summarise_nmtkit(records, precision, run_seconds, summary["parameters"])


# ---------------------------------------------------------------- OpenNMT-py
# Runs onmt_train unchanged but for two things: spacy, fasttext and ahocorasick, which onmt/transforms/__init__.py
# imports with every transform module although only the clean, terminology and inlinetags transforms use them, are
# stood in for where they are not installed (at the top level: the data-loading workers, started with "spawn", run
# this file too before they unpickle OpenNMT-py's objects); and the time the training loop waits for each update's
# batches is appended to a file, one line an update.
LAUNCHER = """\
import importlib.util, sys, time, types
for name in ("spacy", "fasttext", "ahocorasick"):
    if importlib.util.find_spec(name) is None:
        sys.modules[name] = types.ModuleType(name)


def timed_batches(self, iterator):
    batches = accumulate(self, iterator)
    with open(waits_path, "w", buffering=1) as waits:
        while True:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
            started = time.perf_counter()
            item = next(batches, None)
            if item is None:
                return
            waits.write(f"{time.perf_counter() - started:.6f}\\n")
            yield item


if __name__ == "__main__":
    import torch
    import onmt.trainer
    from onmt.bin.train import main

    waits_path = sys.argv.pop(1)
    torch.backends.cuda.enable_cudnn_sdp(False)
    accumulate = onmt.trainer.Trainer._accum_batches
    onmt.trainer.Trainer._accum_batches = timed_batches
    main()
"""


def encode_corpus(data: Path, workdir: Path) -> dict:
    """Write train.{src,tgt} as the space-separated pieces of nmtkit's token arrays and the shared vocabulary
    (pieces minus specials)."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=str(data / "spm.model"))
    pieces = np.array([processor.id_to_piece(index) for index in range(processor.get_piece_size())], dtype=object)
    paths = {"src": workdir / "train.src.sp", "tgt": workdir / "train.tgt.sp", "vocab": workdir / "vocab.txt"}
    for side in ("src", "tgt"):
        tokens, offsets = np.load(data / f"train.{side}.tok.npy"), np.load(data / f"train.{side}.off.npy")
        with open(paths[side], "w", encoding="utf-8") as stream:
            for start, end in zip(offsets[:-1], offsets[1:], strict=True):
                stream.write(" ".join(pieces[tokens[start:end]]) + "\n")
    # OpenNMT-py adds its own <unk> <blank> <s> </s>: 7996 pieces + 4 specials = the same 8000 entries.
    vocab = [pieces[index] for index in range(len(pieces))
             if not (processor.is_control(index) or processor.is_unknown(index))]
    paths["vocab"].write_text("".join(piece + "\n" for piece in vocab), encoding="utf-8")
    return paths


def onmt_config(paths: dict, workdir: Path, args: argparse.Namespace, interval: int) -> dict:
    """onmt_train options matching `nmtkit_command`."""
    preset, cuda = PRESETS[args.preset], args.device == "cuda"
    return {
        "data": {"corpus_1": {"path_src": str(paths["src"]), "path_tgt": str(paths["tgt"])}},
        "src_vocab": str(paths["vocab"]), "share_vocab": True, "src_vocab_size": 100_000,
        "save_model": str(workdir / "onmt" / "model"), "save_checkpoint_steps": 100_000_000,
        "encoder_type": "transformer", "decoder_type": "transformer", "position_encoding": True,
        "enc_layers": preset.layers, "dec_layers": preset.layers, "hidden_size": preset.d_model,
        "word_vec_size": preset.d_model, "transformer_ff": preset.ffn, "heads": preset.heads,
        "pos_ffn_activation_fn": preset.activation,
        "dropout": [preset.dropout], "attention_dropout": [0.0], "add_qkvbias": True, "add_ffnbias": True,
        "share_embeddings": True, "share_decoder_embeddings": True, "label_smoothing": preset.label_smoothing,
        "batch_type": "tokens", "batch_size": args.batch_tokens // args.accumulate, "normalization": "tokens",
        "accum_count": [args.accumulate], "optim": "adam", "adam_beta2": 0.98, "decay_method": "noam",
        "warmup_steps": 4000, "learning_rate": 2.0, "max_grad_norm": preset.clip_norm, "param_init": 0.0,
        "param_init_glorot": True, "model_dtype": "fp16" if cuda else "fp32",
        "world_size": 1, "gpu_ranks": [0] if cuda else [], "train_steps": args.steps, "valid_steps": 100_000_000,
        "report_every": interval, "num_workers": args.onmt_workers, "seed": SEED,
    }


def parse_onmt_log(text: str, interval: int, accumulate: int = 1) -> tuple[list[tuple[int, float, float]], int | None]:
    """(step, target tokens, wall seconds) per report interval, and the parameter count."""
    intervals = []
    for match in ONMT_STEP.finditer(text):
        tokens = float(match.group(3)) * interval * accumulate  # bsz: the mean per batch
        intervals.append((int(match.group(1)), tokens, tokens / max(float(match.group(6)), 1e-9)))
    params = ONMT_PARAMS.search(text)
    return intervals, int(params.group(1)) if params else None


def onmt_loader_share(waits: list[float], first_step: int, last_step: int, wall_seconds: float) -> float | None:
    """The waits of updates first_step + 1 .. last_step (the n-th wait is the n-th update's) over their wall time."""
    if len(waits) < last_step:
        return None
    return sum(waits[first_step:last_step]) / wall_seconds


def onmt_python(args: argparse.Namespace) -> str | None:
    python = args.onmt_python or str(args.onmt_venv / "bin" / "python")
    return python if args.onmt_python or Path(python).exists() else None


def time_onmt(args: argparse.Namespace, interval: int, workdir: Path) -> Row | None:
    import yaml

    config_path, log_path, waits_path = workdir / "onmt.yaml", workdir / "onmt.log", workdir / "onmt.waits"
    config = onmt_config(encode_corpus(args.data, workdir), workdir, args, interval)
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    (workdir / "onmt_launch.py").write_text(LAUNCHER, encoding="utf-8")
    command = [onmt_python(args), str(workdir / "onmt_launch.py"), str(waits_path), "-config", str(config_path)]
    code, run_seconds = run_logged(command, tool_env(args), log_path)
    intervals, parameters = parse_onmt_log(log_path.read_text(encoding="utf-8", errors="replace"), interval,
                                           args.accumulate)
    if code != 0 or len(intervals) < 2:
        log.error("onmt_train failed (exit code %d, %d report lines):\n%s", code, len(intervals), tail(log_path))
        return None
    timed = intervals[1:]
    tokens, seconds = sum(item[1] for item in timed), sum(item[2] for item in timed)
    steps = timed[-1][0] - intervals[0][0]
    waits = [float(line) for line in waits_path.read_text(encoding="utf-8").split()] if waits_path.exists() else []
    precision = "fp16 AMP (no bf16 in 3.5.1)" if args.device == "cuda" else "fp32"
    return Row("OpenNMT-py 3.5.1", precision, steps, None, tokens / seconds, seconds / steps, run_seconds,
               parameters, onmt_loader_share(waits, intervals[0][0], timed[-1][0], seconds))


# ---------------------------------------------------------------- report
def onmt_missing_message(venv: Path) -> str:
    return f"OpenNMT-py venv {venv} not found; build it with: bash benchmarks/setup_onmt.sh {venv}"


def format_row(row: Row, reference: float, flops_per_token: float, peak_tflops: float | None) -> str:
    update = f"{row.update_tps:,.0f}" if row.update_tps is not None else "—"
    params = f"{row.parameters / 1e6:.2f}M" if row.parameters else "?"
    loader = f"{100 * row.loader_share:.1f}%" if row.loader_share is not None else "n/a"
    mfu = f"{100 * row.wall_tps * flops_per_token / (peak_tflops * 1e12):.1f}%" if peak_tflops else "—"
    return (f"| {row.tool} | {row.precision} | {params} | {row.steps} | {update} | {row.wall_tps:,.0f} | "
            f"{row.wall_seconds_per_step:.3f} | {loader} | {mfu} | {row.run_seconds:.0f} | "
            f"{row.wall_tps / reference:.2f} |")


def print_header(args: argparse.Namespace) -> None:
    batches = f"{args.accumulate} x {args.batch_tokens // args.accumulate:,}" if args.accumulate > 1 else "one batch"
    print(f"device {args.device}, preset {args.preset}, {args.batch_tokens:,} tokens an update ({batches})")
    print("| tool | precision | params | steps timed | tgt tok/s (update) | tgt tok/s (wall) | wall s/step "
          "| loader share | MFU | run s | ratio vs OpenNMT-py (wall tok/s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")


def print_notes(args: argparse.Namespace, reference: Row | None, flops: str) -> None:
    if reference is None and args.device == "cpu":
        print(f"\nRatio against the anchor, NOT measured in this run: {ONMT_ANCHOR}.")
    print("\ntgt tok/s: non-padding target tokens (pieces + EOS). update = moving batches to the device, forward, "
          "backward, optimizer step; wall = between two log lines, batching included; loader share = wall time "
          "not in the update (nmtkit) or waiting for the next batches (OpenNMT-py); run s = whole command.")
    if args.peak_tflops:
        print(f"MFU = FLOPs per target token x wall tok/s / {args.peak_tflops:g} TFLOP/s; {flops}")


def amp_modes(args: argparse.Namespace) -> tuple[str, ...]:
    if args.device == "cuda":
        return ("bf16",)
    return ("none",) if args.no_bf16 else ("none", "bf16")


def main(argv: list[str] | None = None) -> None:
    """Rows are printed as they are measured, so that a run cut short keeps the ones done."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    interval = max(1, min(args.log_every, args.steps // 2))
    preset, lengths = PRESETS[args.preset], data_lengths(args.data)
    vocab = json.loads((args.data / "manifest.json").read_text(encoding="utf-8"))["vocab"]["tgt"]
    flops = train_flops_per_target_token(preset, vocab, lengths)
    reference = None
    with tempfile.TemporaryDirectory(prefix="train_speed-") as tmp:
        workdir = Path(tmp)
        if args.skip_onmt:
            print("OpenNMT-py skipped (--skip-onmt).")
        elif onmt_python(args) is None:
            print(onmt_missing_message(args.onmt_venv))
        else:
            reference = time_onmt(args, interval, workdir)
            if reference is None:
                print("OpenNMT-py 3.5.1 could not run here (see the log above): the reference was not measured.")
        print_header(args)
        reference_tps = reference.wall_tps if reference else ONMT_ANCHOR_TPS
        if reference:
            print(format_row(reference, reference_tps, flops, args.peak_tflops))
        for amp in amp_modes(args):
            row = time_nmtkit(args, interval, amp, workdir)
            if row is not None:
                print(format_row(row, reference_tps, flops, args.peak_tflops))
    print_notes(args, reference, flops_formula(preset, vocab, lengths))


if __name__ == "__main__":
    main()
