"""Where a float32 training update of the Bible recipe's Transformer goes on this CPU (issue 52), and how close the
update comes to the GEMM speed of the same CPU.

The updates are nmtkit's own (`Updater.update`, through a `Trainer` built from the recipe's config) on the first
batches of the training split's first epoch (token-budget batches of sentences of similar length), in float32
(train.amp=none). Three parts:
1. Speed: milliseconds per update and target tokens/s over `--updates` updates (after `--warmup` untimed ones),
   without the profiler; then the achieved GFLOP/s of the model, with the FLOPs of each batch from
   benchmarks/train_speed.py's formula (`train_flops_per_target_token`: 6 x each weight x each real token it meets,
   plus 12 d per attention pair; padding, norms, softmax, embeddings and the optimizer are not counted), and the
   padding share of the batches (the work done on PAD positions, which the formula does not count).
2. Where the time goes: torch.profiler (CPU) over `--profiled` further updates, each op's self time grouped into
   GEMM (addmm, mm, bmm, linear, matmul), the attention kernel (scaled_dot_product_attention: two GEMMs and a
   softmax), the optimizer (the fused AdamW step, clipping's norm, zeroing), memory-bound ops (every other aten op:
   layer norm, dropout, GELU, adds, softmax and loss over the vocabulary, copies), autograd's own bookkeeping, and
   the rest of the wall time (Python, the dispatcher and the profiler's own overhead, unaccounted for by any op).
3. The ceiling: the model's own GEMM shapes (the profiled addmm/mm calls that take the most time) and one large
   GEMM (2048 x 2048 x 2048), each timed alone in float32 with the same threads, against the FMA peak
   (--peak-gflops, or cores x FLOPs a cycle x --ghz).

`--compile` times the updates with train.compile (torch.compile of the training forward; the warm-up updates then
include its compilation, and each new batch shape may compile again). `--isa avx2` runs the benchmark again in a
process with ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2 and MKL_ENABLE_INSTRUCTIONS=AVX2 (a CPU with AVX-512
then computes as an AVX2-only one, such as AMD Zen 3, would); the output names the ISA in force either way.

Usage: python benchmarks/update_profile.py [--config recipes/bible/transformer.yaml] [--data data/bible/bpe8000]
[--threads 2] [--updates 30] [--warmup 5] [--profiled 10] [--compile] [--isa native|avx2] [--ghz 3.0]
[--peak-gflops N]
(data: `make bible-data`).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_speed import Lengths, Preset, train_flops_per_target_token  # noqa: E402

from nmtkit.config.files import load_yaml  # noqa: E402
from nmtkit.config.run import build_config  # noqa: E402
from nmtkit.data.dataset import Batch  # noqa: E402
from nmtkit.data.subword import PAD  # noqa: E402
from nmtkit.training.config import completed  # noqa: E402
from nmtkit.training.loop import Trainer  # noqa: E402

AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
FMA_FLOPS_PER_CYCLE = {"avx2": 32, "avx512": 64}  # float32 a core: two FMA units x 8 or 16 lanes x 2
GEMM_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul",
            "aten::_mkl_linear", "aten::mkldnn_linear")
OPTIMIZER_OPS = ("aten::_fused_adamw_", "aten::_fused_adam_", "aten::linalg_vector_norm", "aten::_foreach_norm",
                 "aten::zero_", "aten::stack")
LARGE_GEMM = 2048
TOP_OPS = 15


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("recipes/bible/transformer.yaml"))
    parser.add_argument("--data", type=Path, default=Path("data/bible/bpe8000"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--updates", type=int, default=30, help="timed updates, without the profiler")
    parser.add_argument("--warmup", type=int, default=5, help="untimed updates first")
    parser.add_argument("--profiled", type=int, default=10, help="updates under the profiler")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: force AVX2 kernels in ATen, oneDNN and MKL (for a CPU with AVX-512)")
    parser.add_argument("--compile", action="store_true",
                        help="train.compile: torch.compile the training forward (the warm-up updates then compile)")
    parser.add_argument("--ghz", type=float, default=None, help="core clock for the peak (default: lscpu's max)")
    parser.add_argument("--peak-gflops", type=float, default=None, help="float32 FMA peak of --threads cores")
    return parser.parse_args(argv)


def force_isa(args: argparse.Namespace) -> None:
    """Re-run this script with the AVX2 environment (it is read when torch first computes, so before any import of
    this process could have set it reliably)."""
    if args.isa == "avx2" and any(os.environ.get(key) != value for key, value in AVX2_ENV.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **AVX2_ENV})


def isa_in_force() -> str:
    forced = {key: os.environ[key] for key in AVX2_ENV if key in os.environ}
    how = ", ".join(f"{key}={value}" for key, value in forced.items()) if forced else "nothing forced"
    return f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()} ({how})"


def blas() -> str:
    """The BLAS library torch was built with (what its float32 addmm/mm call on a CPU), and whether oneDNN is in."""
    found = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    onednn = "on" if torch.backends.mkldnn.is_available() else "off"
    return f"BLAS {found.group(1) if found else 'unknown'}, oneDNN {onednn}"


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def max_ghz() -> tuple[float, str] | None:
    """The cores' highest clock (cpufreq), else the clock /proc/cpuinfo reports now (a virtual machine's only one)."""
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if path.exists():
        return int(path.read_text()) / 1e6, "cpufreq's maximum"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":", 1)[1]) / 1000, "/proc/cpuinfo's clock now"
    return None


def peak_gflops(args: argparse.Namespace) -> tuple[float | None, str]:
    """The float32 FMA peak of `--threads` cores, and how it was found."""
    if args.peak_gflops:
        return args.peak_gflops, "--peak-gflops"
    clock = (args.ghz, "--ghz") if args.ghz else max_ghz()
    if clock is None:
        return None, "unknown (no clock: give --ghz or --peak-gflops)"
    ghz, source = clock
    isa = "avx512" if "avx512" in torch.backends.cpu.get_cpu_capability().lower() else "avx2"
    per_cycle = FMA_FLOPS_PER_CYCLE[isa]
    return (args.threads * per_cycle * ghz,
            f"{args.threads} cores x {per_cycle} FLOP/cycle ({isa}) x {ghz:.2f} GHz ({source})")


def build_trainer(args: argparse.Namespace) -> Trainer:
    config = build_config(load_yaml(args.config))
    config.train.threads, config.train.amp, config.train.max_steps = args.threads, "none", 10**9
    config.train.compile = args.compile
    trainer = Trainer(completed(config), args.data, Path(tempfile.mkdtemp()), quiet=True)
    trainer.settle_precision()
    return trainer


def preset_of(model_config) -> Preset:
    return Preset(layers=model_config.encoder_layers, d_model=model_config.d_model, heads=model_config.heads,
                  ffn=model_config.ffn, norm=model_config.norm, clip_norm=0.0)


def batch_lengths(batches: list[Batch]) -> Lengths:
    """The real (non-PAD) lengths of `batches`, with EOS, as train_speed's formula takes them."""
    s = np.concatenate([batch.src_mask.sum(dim=1).numpy() for batch in batches]).astype(np.int64)
    t = np.concatenate([(batch.tgt_out != PAD).sum(dim=1).numpy() for batch in batches]).astype(np.int64)
    return Lengths(int(s.sum()), int(t.sum()), int((s * s).sum()), int((t * (t + 1) // 2).sum()), int((s * t).sum()))


def padding_share(batches: list[Batch]) -> float:
    """The share of source and target positions that are padding."""
    positions = sum(batch.src.numel() + batch.tgt_out.numel() for batch in batches)
    real = sum(int(batch.src_mask.sum()) + batch.num_tgt_tokens for batch in batches)
    return 1.0 - real / positions


def run_updates(trainer: Trainer, batches: list[Batch]) -> float:
    started = time.perf_counter()
    for batch in batches:
        trainer.updater.update([batch], batch.num_tgt_tokens)
    return time.perf_counter() - started


def category(name: str) -> str:
    if name in GEMM_OPS:
        return "GEMM (addmm, mm, bmm)"
    if "scaled_dot_product" in name or "flash_attention" in name:
        return "attention kernel (SDPA)"
    if name in OPTIMIZER_OPS or name.startswith(("aten::_foreach_", "Optimizer.")):
        return "optimizer (AdamW, clipping)"
    if name.startswith("aten::"):
        return "memory-bound ops"
    return "autograd and other framework events"


def profile_updates(trainer: Trainer, batches: list[Batch]) -> tuple[float, dict[str, float], dict[str, float], list]:
    """Wall seconds of the profiled updates, self seconds by category and by op, and the profiler's averages by
    input shape."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        seconds = run_updates(trainer, batches)
    by_category, by_op = defaultdict(float), {}
    for event in profiler.key_averages():
        by_op[event.key] = event.self_cpu_time_total / 1e6
        by_category[category(event.key)] += by_op[event.key]
    return seconds, dict(by_category), by_op, profiler.key_averages(group_by_input_shape=True)


def gemm_shapes(averages: list, fixed: set[int], tokens: int, count: int = 6) -> list[tuple[int, int, int, float]]:
    """The (m, k, n) of the addmm/mm calls that took the most self time, with their share of that time. A size
    that is not one of the model's (`fixed`: d_model, ffn, vocabulary) is a batch's token count, which varies from
    batch to batch; it is counted as `tokens` (the configured batch), so that one layer's GEMM is one shape."""
    times = defaultdict(float)
    for event in averages:
        operands = [shape for shape in event.input_shapes if len(shape) == 2]
        if event.key in ("aten::addmm", "aten::mm") and len(operands) >= 2:
            (m, k), (_, n) = operands[-2], operands[-1]
            times[tuple(size if size in fixed else tokens for size in (m, k, n))] += event.self_cpu_time_total
    total = sum(times.values()) or 1.0
    ranked = sorted(times.items(), key=lambda item: -item[1])[:count]
    return [(*shape, spent / total) for shape, spent in ranked]


def gemm_gflops(m: int, k: int, n: int, seconds: float = 0.3, calls: int = 3) -> float:
    """float32 GFLOP/s of (m x k) @ (k x n): the fastest of repeated calls, at least `calls` of them and as many as
    fit in `seconds` (a shared machine preempts some)."""
    left, right = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    torch.mm(left, right, out=out)
    best, deadline, done = float("inf"), time.perf_counter() + seconds, 0
    while done < calls or time.perf_counter() < deadline:
        started = time.perf_counter()
        torch.mm(left, right, out=out)
        best, done = min(best, time.perf_counter() - started), done + 1
    return 2 * m * k * n / best / 1e9


def model_flops(trainer: Trainer, batches: list[Batch]) -> float:
    """Training FLOPs a target token by train_speed's formula, over the real tokens of `batches`."""
    setup = trainer.setup
    return train_flops_per_target_token(preset_of(setup.config.model), setup.subwords[1].vocab_size,
                                        batch_lengths(batches))


def report_speed(trainer: Trainer, timed: list[Batch], seconds: float, peak: float | None) -> float:
    """Print the unprofiled updates' speed; returns the achieved GFLOP/s."""
    tokens = sum(batch.num_tgt_tokens for batch in timed)
    flops = model_flops(trainer, timed)
    achieved = flops * tokens / seconds / 1e9
    print(f"updates: {len(timed)} in {seconds:.2f} s, {1000 * seconds / len(timed):.1f} ms each, "
          f"{tokens / seconds:,.0f} target tokens/s ({tokens / len(timed):.0f} a batch, padding "
          f"{100 * padding_share(timed):.1f}% of the positions)")
    print(f"model FLOPs: {flops / 1e6:.1f} MFLOP a target token (benchmarks/train_speed.py's formula over these "
          f"batches' real tokens); achieved {achieved:.1f} GFLOP/s"
          + (f", {100 * achieved / peak:.0f}% of the FMA peak" if peak else ""))
    return achieved


def report_profile(seconds: float, by_category: dict[str, float], by_op: dict[str, float], updates: int) -> None:
    print(f"\nprofiled: {updates} updates in {seconds:.2f} s ({1000 * seconds / updates:.1f} ms each, the "
          "profiler's overhead included); self time by kind:")
    for name, spent in sorted(by_category.items(), key=lambda item: -item[1]):
        print(f"  {name:<40} {1000 * spent / updates:7.1f} ms  {100 * spent / seconds:5.1f}%")
    rest = seconds - sum(by_category.values())
    print(f"  {'Python, dispatch, profiler (no op)':<40} {1000 * rest / updates:7.1f} ms  {100 * rest / seconds:5.1f}%")
    print(f"the {TOP_OPS} ops with the most self time:")
    for name, spent in sorted(by_op.items(), key=lambda item: -item[1])[:TOP_OPS]:
        print(f"  {name:<40} {1000 * spent / updates:7.1f} ms  {100 * spent / seconds:5.1f}%  ({category(name)})")


def report_ceiling(trainer: Trainer, averages: list, achieved: float, peak: float | None) -> None:
    model, tokens = trainer.setup.config.model, trainer.setup.config.train.batch_tokens
    fixed = {model.d_model, model.ffn, trainer.setup.subwords[1].vocab_size}
    print(f"\nGEMM alone, float32 (the model's addmm/mm shapes m x k @ k x n, a batch's tokens as {tokens}; their "
          "share of the GEMM time):")
    for m, k, n, share in gemm_shapes(averages, fixed, tokens):
        print(f"  {m:>5} x {k:>5} @ {k:>5} x {n:>5}  {gemm_gflops(m, k, n):7.1f} GFLOP/s  ({100 * share:.0f}%)")
    large = gemm_gflops(LARGE_GEMM, LARGE_GEMM, LARGE_GEMM, seconds=1.0)
    print(f"  large {LARGE_GEMM}^3                   {large:7.1f} GFLOP/s"
          + (f"  ({100 * large / peak:.0f}% of the FMA peak)" if peak else ""))
    print(f"the update achieves {100 * achieved / large:.0f}% of the large GEMM's speed")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    force_isa(args)
    logging.basicConfig(level=logging.WARNING)
    trainer = build_trainer(args)
    order = trainer.batches.epoch_batches(0)
    needed = args.warmup + args.updates + args.profiled
    batches = [trainer.setup.train_data.batch(order[index % len(order)]) for index in range(needed)]
    warmup, timed, profiled = (batches[:args.warmup], batches[args.warmup:args.warmup + args.updates],
                               batches[args.warmup + args.updates:])
    peak, peak_source = peak_gflops(args)
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads; {isa_in_force()}; torch {torch.__version__}, "
          f"{blas()}")
    print("FMA peak (float32): " + (f"{peak:.0f} GFLOP/s = {peak_source}" if peak else peak_source))
    warmup_seconds = run_updates(trainer, warmup)
    print(f"warm-up: {args.warmup} updates in {warmup_seconds:.1f} s"
          + (" (torch.compile's compilation included)" if args.compile else ""))
    achieved = report_speed(trainer, timed, run_updates(trainer, timed), peak)
    seconds, by_category, by_op, averages = profile_updates(trainer, profiled)
    report_profile(seconds, by_category, by_op, len(profiled))
    report_ceiling(trainer, averages, achieved, peak)


if __name__ == "__main__":
    main()
