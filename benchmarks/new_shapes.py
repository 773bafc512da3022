"""What a batch of a new shape costs: training steps on batches of shapes not seen before, then the same shapes again.

An NMT batcher rarely repeats a (batch, length) shape within an epoch, so a kernel library that prepares something
per shape (cuDNN's fused attention builds an execution plan: about 300 ms a shape in bf16 on an NVIDIA H200, against
15 ms a step) slows the whole first epoch. For each precision this times forward, backward and an AdamW step of the
recipe's model (or --config's) on --batches random batches of about --tokens target tokens, each of a new shape,
then on the same shapes again, and prints the median and the largest time of each pass.

  python benchmarks/new_shapes.py --device cuda                  as nmtkit trains (cuDNN attention off on CUDA)
  python benchmarks/new_shapes.py --device cuda --allow-cudnn    PyTorch's default choice of attention kernels
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nmtkit.config.files import load_yaml  # noqa: E402
from nmtkit.config.run import build_config  # noqa: E402
from nmtkit.registry import build_model  # noqa: E402
from nmtkit.runtime.device import native_bf16, pick_device  # noqa: E402
from nmtkit.runtime.precision import time_call  # noqa: E402
from nmtkit.training.objectives import label_smoothed_nll  # noqa: E402

VOCAB = 8000


def random_shapes(count: int, tokens: int, seed: int) -> list[tuple[int, int, int]]:
    """(sentences, source length, target length) of `count` batches of about `tokens` target tokens."""
    generator = torch.Generator().manual_seed(seed)
    shapes = []
    for _ in range(count):
        length = int(torch.randint(8, 140, (1,), generator=generator))
        source = length + int(torch.randint(-5, 6, (1,), generator=generator))
        shapes.append((max(1, tokens // length), source, length))
    return shapes


def time_steps(model, optimizer, shapes, dtype: torch.dtype | None, device: torch.device) -> list[float]:
    """Milliseconds of one training step on a random batch of each shape."""

    def step(src: torch.Tensor, tgt: torch.Tensor) -> None:
        with torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            logits = model(src, src != 0, tgt[:, :-1])[0]
        label_smoothed_nll(logits, tgt[:, 1:], 0.1)[0].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    times = []
    for sentences, source, target in shapes:
        src = torch.randint(4, VOCAB, (sentences, source), device=device)
        tgt = torch.randint(4, VOCAB, (sentences, target + 1), device=device)
        times.append(time_call(lambda src=src, tgt=tgt: step(src, tgt), device) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "recipes/bible/transformer.yaml"))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--tokens", type=int, default=4096, help="target tokens a batch")
    parser.add_argument("--allow-cudnn", action="store_true", help="let PyTorch pick cuDNN's fused attention")
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    if args.allow_cudnn:
        torch.backends.cuda.enable_cudnn_sdp(True)
    torch.manual_seed(0)
    model = build_model(build_config(load_yaml(args.config)).model, VOCAB, VOCAB, True).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)  # as the trainer
    cudnn = "allowed" if torch.backends.cuda.cudnn_sdp_enabled() else "off"
    print(f"device {device}" + (f", cuDNN attention {cudnn}" if device.type == "cuda" else ""))
    for seed, dtype in enumerate([None, torch.bfloat16] if native_bf16(device) else [None]):
        time_steps(model, optimizer, [(8, 20, 20)], dtype, device)  # the kernels' first load
        shapes = random_shapes(args.batches, args.tokens, seed)
        new, again = (time_steps(model, optimizer, shapes, dtype, device) for _ in range(2))
        print(f"{'bf16' if dtype else 'float32'}: {len(shapes)} new shapes: median {statistics.median(new):.1f} ms, "
              f"max {max(new):.1f}; the same shapes again: median {statistics.median(again):.1f} ms, "
              f"max {max(again):.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
