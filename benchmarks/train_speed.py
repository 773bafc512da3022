"""Training throughput of nmtkit and of OpenNMT-py 3.5.1 on the same data and the same model, in one run.

Both tools train a Transformer (3 + 3 layers, d_model 256, 4 heads, FFN 1024, dropout 0.1, no attention
dropout, biases in every linear layer, pre-norm, sinusoidal positions, one embedding matrix shared by source,
target and output) with label smoothing 0.1 and Adam on batches of `--batch-tokens` tokens (4096, padding included),
float32, on the CPU with `--threads` threads, for `--steps` updates. Both see the training text of the nmtkit data
directory cut into the pieces of its joint SentencePiece model, with the same 8k vocabulary.

Target tokens are counted the same way on both sides: the non-padding tokens the loss is computed on, i.e. each
target sentence's pieces plus EOS (no BOS). The first log interval is warm-up and is not timed.
- "update" tok/s: nmtkit's metrics.jsonl `tgt_tokens_per_s`, the time of the update only (forward, backward,
  optimizer step). OpenNMT-py logs no such figure.
- "wall" tok/s: tokens over the wall time between two log lines, batching and logging included. OpenNMT-py's
  "tok/s" (onmt/utils/statistics.py) is this figure; for nmtkit it is the `tgt_tokens` of the metrics.jsonl
  records after the first over the difference of their `elapsed`. The ratio column compares wall tok/s, like with like.

Usage: python benchmarks/train_speed.py [--steps 60] [--threads 2] [--batch-tokens 4096] [--onmt-venv /work/onmt-venv]
[--skip-onmt]
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

log = logging.getLogger("train_speed")

ONMT_ANCHOR_TPS = 1200.0
ONMT_ANCHOR = "OpenNMT-py 3.5.1, measured on this machine by the issue author: ~1,200 target tokens/s"
MODEL = {"layers": 3, "d_model": 256, "heads": 4, "ffn": 1024, "dropout": 0.1, "label_smoothing": 0.1}
SEED = 1
# "Step 20/   60; acc: 3.1; ppl: 8000.0; xent: 9.0; lr: 0.00000; sents:  1234; bsz: 3000/3100/123; 900/950 tok/s;"
ONMT_STEP = re.compile(r"Step\s+(\d+)[^;]*;.*?bsz:\s*(\d+)/\s*(\d+)/\s*(\d+);\s*(\d+)/\s*(\d+) tok/s")
ONMT_PARAMS = re.compile(r"\* number of parameters: (\d+)")


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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/bible/bpe8000"), help="nmtkit data directory")
    parser.add_argument("--steps", type=int, default=60, help="training updates per tool")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="tokens per batch (padding included)")
    parser.add_argument("--log-every", type=int, default=10, help="updates per log interval (first = warm-up)")
    parser.add_argument("--onmt-venv", type=Path, default=Path("/work/onmt-venv"), help="OpenNMT-py 3.5.1 venv")
    parser.add_argument("--skip-onmt", action="store_true", help="time nmtkit only; compare with the anchor")
    parser.add_argument("--no-bf16", action="store_true", help="skip the nmtkit bf16 autocast row")
    return parser.parse_args()


def thread_env(threads: int) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


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
def nmtkit_command(data: Path, out: Path, args: argparse.Namespace, interval: int, amp: str) -> list[str]:
    settings = {"model.encoder_layers": MODEL["layers"], "model.decoder_layers": MODEL["layers"],
                "model.d_model": MODEL["d_model"], "model.heads": MODEL["heads"], "model.ffn": MODEL["ffn"],
                "model.dropout": MODEL["dropout"], "model.attention_dropout": 0.0,
                "model.share_embeddings": "true", "model.tie_output": "true",
                "train.label_smoothing": MODEL["label_smoothing"], "train.batch_tokens": args.batch_tokens,
                "train.amp": amp, "train.log_every": interval, "train.valid_every": 100_000_000,
                "train.valid_bleu": "false"}
    command = [sys.executable, "-m", "nmtkit", "-q", "train", "--data", str(data), "--out", str(out),
               "--max-steps", str(args.steps), "--threads", str(args.threads), "--device", "cpu",
               "--seed", str(SEED), "--quiet"]
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
               run_seconds, parameters)


def time_nmtkit(args: argparse.Namespace, interval: int, amp: str, workdir: Path) -> Row | None:
    out = workdir / f"nmtkit-{amp}"
    code, run_seconds = run_logged(nmtkit_command(args.data, out, args, interval, amp),
                                   thread_env(args.threads), workdir / f"nmtkit-{amp}.log")
    if code != 0:
        log.error("nmtkit (%s) failed with exit code %d:\n%s", amp, code, tail(workdir / f"nmtkit-{amp}.log"))
        return None
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    records = [record for record in map(json.loads, lines) if "tgt_tokens_per_s" in record]
    output = (workdir / f"nmtkit-{amp}.log").read_text(encoding="utf-8").splitlines()
    summary = json.loads(next(line for line in reversed(output) if line.startswith("{")))
    precision = "fp32" if amp == "none" else "bf16 autocast"
    return summarise_nmtkit(records, precision, run_seconds, summary["parameters"])


# ---------------------------------------------------------------- OpenNMT-py
def encode_corpus(data: Path, workdir: Path) -> dict:
    """Write train.{src,tgt} as space-separated pieces and the shared vocabulary (pieces minus specials)."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=str(data / "spm.model"))
    paths = {"src": workdir / "train.src.sp", "tgt": workdir / "train.tgt.sp", "vocab": workdir / "vocab.txt"}
    for side in ("src", "tgt"):
        lines = (data / f"train.{side}.txt").read_text(encoding="utf-8").splitlines()
        pieces = processor.encode(lines, out_type=str)
        paths[side].write_text("".join(" ".join(line) + "\n" for line in pieces), encoding="utf-8")
    # OpenNMT-py adds its own <unk> <blank> <s> </s>: 7996 pieces + 4 specials = the same 8000 entries.
    vocab = [processor.id_to_piece(index) for index in range(processor.get_piece_size())
             if not (processor.is_control(index) or processor.is_unknown(index))]
    paths["vocab"].write_text("".join(piece + "\n" for piece in vocab), encoding="utf-8")
    return paths


def onmt_config(paths: dict, workdir: Path, args: argparse.Namespace, interval: int) -> dict:
    """onmt_train options matching `nmtkit_command` (num_workers 0: no data-loading processes beside the
    `--threads` compute threads, as in nmtkit)."""
    return {
        "data": {"corpus_1": {"path_src": str(paths["src"]), "path_tgt": str(paths["tgt"])}},
        "src_vocab": str(paths["vocab"]), "share_vocab": True, "src_vocab_size": 100_000,
        "save_model": str(workdir / "onmt" / "model"), "save_checkpoint_steps": 100_000_000,
        "encoder_type": "transformer", "decoder_type": "transformer", "position_encoding": True,
        "enc_layers": MODEL["layers"], "dec_layers": MODEL["layers"], "hidden_size": MODEL["d_model"],
        "word_vec_size": MODEL["d_model"], "transformer_ff": MODEL["ffn"], "heads": MODEL["heads"],
        "dropout": [MODEL["dropout"]], "attention_dropout": [0.0], "add_qkvbias": True, "add_ffnbias": True,
        "share_embeddings": True, "share_decoder_embeddings": True, "label_smoothing": MODEL["label_smoothing"],
        "batch_type": "tokens", "batch_size": args.batch_tokens, "normalization": "tokens", "accum_count": [1],
        "optim": "adam", "adam_beta2": 0.98, "decay_method": "noam", "warmup_steps": 4000, "learning_rate": 2.0,
        "max_grad_norm": 1.0, "param_init": 0.0, "param_init_glorot": True, "model_dtype": "fp32",
        "world_size": 1, "train_steps": args.steps, "valid_steps": 100_000_000, "report_every": interval,
        "num_workers": 0, "seed": SEED,
    }


def parse_onmt_log(text: str, interval: int) -> tuple[list[tuple[int, float, float]], int | None]:
    """(step, target tokens, wall seconds) per report interval, and the parameter count."""
    intervals = []
    for match in ONMT_STEP.finditer(text):
        tokens = float(match.group(3)) * interval  # bsz is the mean per batch; one batch per update
        intervals.append((int(match.group(1)), tokens, tokens / max(float(match.group(6)), 1e-9)))
    params = ONMT_PARAMS.search(text)
    return intervals, int(params.group(1)) if params else None


def time_onmt(args: argparse.Namespace, interval: int, workdir: Path) -> Row | None:
    import yaml

    config_path, log_path = workdir / "onmt.yaml", workdir / "onmt.log"
    config = onmt_config(encode_corpus(args.data, workdir), workdir, args, interval)
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [str(args.onmt_venv / "bin" / "onmt_train"), "-config", str(config_path)]
    code, run_seconds = run_logged(command, thread_env(args.threads), log_path)
    intervals, parameters = parse_onmt_log(log_path.read_text(encoding="utf-8", errors="replace"), interval)
    if code != 0 or len(intervals) < 2:
        log.error("onmt_train failed (exit code %d, %d report lines):\n%s", code, len(intervals), tail(log_path))
        return None
    timed = intervals[1:]
    tokens, seconds = sum(item[1] for item in timed), sum(item[2] for item in timed)
    steps = timed[-1][0] - intervals[0][0]
    return Row("OpenNMT-py 3.5.1", "fp32", steps, None, tokens / seconds, seconds / steps, run_seconds,
               parameters)


# ---------------------------------------------------------------- report
def onmt_missing_message(venv: Path) -> str:
    return (f"OpenNMT-py venv {venv} not found; build it with: bash benchmarks/setup_onmt.sh {venv}\n"
            f"(python3 -m venv {venv}; pip install torch==2.13.0; pip install --no-deps OpenNMT-py==3.5.1; "
            "pip install configargparse pyyaml sacrebleu six sentencepiece spacy pyahocorasick rapidfuzz; "
            "pip install --no-deps pyonmttok; pip install --only-binary=:all: fasttext-wheel)")


def format_row(row: Row, reference: float) -> str:
    update = f"{row.update_tps:,.0f}" if row.update_tps is not None else "—"
    params = f"{row.parameters / 1e6:.2f}M" if row.parameters else "?"
    return (f"| {row.tool} | {row.precision} | {params} | {row.steps} | {update} | {row.wall_tps:,.0f} | "
            f"{row.wall_seconds_per_step:.2f} | {row.run_seconds:.0f} | {row.wall_tps / reference:.2f} |")


def print_table(rows: list[Row], reference: Row | None) -> None:
    reference_tps = reference.wall_tps if reference else ONMT_ANCHOR_TPS
    print("| tool | precision | params | steps timed | tgt tok/s (update) | tgt tok/s (wall) | wall s/step "
          "| run s | ratio vs OpenNMT-py (wall tok/s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in ([reference] if reference else []) + rows:
        print(format_row(row, reference_tps))
    if reference is None:
        print(f"\nRatio against the anchor, NOT measured in this run: {ONMT_ANCHOR}.")
    print("\ntgt tok/s: non-padding target tokens (pieces + EOS). update = forward/backward/optimizer only; "
          "wall = between two log lines, batching included; run s = whole command (startup, data, model, save).")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    if args.steps < 2:
        raise SystemExit("--steps must be at least 2 (one warm-up interval and one timed interval)")
    interval = max(1, min(args.log_every, args.steps // 2))
    reference, rows = None, []
    with tempfile.TemporaryDirectory(prefix="train_speed-") as tmp:
        workdir = Path(tmp)
        if args.skip_onmt:
            print("OpenNMT-py skipped (--skip-onmt).")
        elif not (args.onmt_venv / "bin" / "onmt_train").exists():
            print(onmt_missing_message(args.onmt_venv))
        else:
            reference = time_onmt(args, interval, workdir)
            if reference is None:
                print("OpenNMT-py 3.5.1 could not run here (see the log above): the reference was not measured.")
        for amp in ("none",) if args.no_bf16 else ("none", "bf16"):
            rows += [row for row in [time_nmtkit(args, interval, amp, workdir)] if row is not None]
    print_table(rows, reference)


if __name__ == "__main__":
    main()
