"""A/B timing of nmtkit's training step in two checkouts, alternating on the same batches.

On a shared or throttled CPU the speed of one whole run differs from the next by 5-10% (the Bible recipe's hour has
run at 2,190-2,521 target tokens/s on one CPU model), so a change worth a few percent cannot be seen by timing each
version once. Here one worker process per checkout loads the same model, data and settings, and the two take turns:
each block of `--block` updates runs in A and then in B (then B first, then A, ...) on the same batches, while the
other worker waits, so both see the machine as it is at that minute. Each worker trains its own model from the same
seed; the batches are the first epoch's, in order.

Usage: python benchmarks/train_step_ab.py A_DIR B_DIR [--config recipes/bible/transformer.yaml]
       [--config-b OTHER.yaml] [--data data/bible/bpe8000] [--amp bf16] [--threads 2] [--blocks 16] [--block 30]
       [--warmup 20]
A_DIR and B_DIR are checkouts of nmtkit (e.g. `git worktree add /tmp/before HEAD~1`); each worker imports nmtkit from
its own checkout. To time two settings of one checkout, give it twice and B's settings with --config-b.
A config with `train.init_from` (and `init_optimizer: true`) starts that worker from a checkpoint's weights (and
optimizer state), e.g. to time the step late in training against the step from fresh weights.
Prints each version's milliseconds per update and B's speed relative to A.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import json, sys, tempfile, time
from pathlib import Path
import nmtkit
if not Path(nmtkit.__file__).resolve().is_relative_to(Path.cwd().resolve()):
    sys.exit(f"error: nmtkit came from {Path(nmtkit.__file__).parent}, not from the checkout {Path.cwd()}")
from nmtkit.config.files import load_yaml
from nmtkit.config.run import build_config
from nmtkit.training.config import completed
from nmtkit.training.loop import Trainer
args = json.loads(sys.argv[1])
config = build_config(load_yaml(args["config"]))
config.train.threads, config.train.amp, config.train.max_steps = args["threads"], args["amp"], 10**9
config = completed(config)
trainer = Trainer(config, Path(args["data"]), Path(tempfile.mkdtemp()), quiet=True)
trainer.settle_precision()
if config.train.init_from:
    trainer.checkpoints.initialize_from(config.train.init_from)
batches = trainer.batches.epoch_batches(0)
def run(lo, hi):
    start = time.perf_counter()
    for index in range(lo, hi):
        batch = trainer.setup.train_data.batch(batches[index % len(batches)])
        trainer.updater.update([batch], batch.num_tgt_tokens)
    return time.perf_counter() - start
print(json.dumps({"ready": len(batches)}), flush=True)
for line in sys.stdin:
    lo, hi = json.loads(line)
    print(json.dumps({"seconds": run(lo, hi)}), flush=True)
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkout A (the baseline)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("--config", type=Path, default=Path("recipes/bible/transformer.yaml"))
    parser.add_argument("--config-b", type=Path, default=None, help="B's config (default: --config)")
    parser.add_argument("--data", type=Path, default=Path("data/bible/bpe8000"))
    parser.add_argument("--amp", default="bf16", choices=["none", "bf16"], help="precision of both")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=16, help="alternating blocks")
    parser.add_argument("--block", type=int, default=30, help="updates per block")
    parser.add_argument("--warmup", type=int, default=20, help="untimed updates first")
    return parser.parse_args()


class Worker:
    def __init__(self, checkout: Path, settings: dict):
        self.name = f"{checkout} ({Path(settings['config']).name})"
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(settings)], cwd=checkout,
                                        env={**os.environ, "PYTHONPATH": str(checkout.resolve())},
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.read()  # {"ready": number of batches}: the model and data are loaded

    def read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            sys.exit(f"error: the worker of {self.name} stopped (its error is above)")
        return json.loads(line)

    def run(self, lo: int, hi: int) -> float:
        self.process.stdin.write(json.dumps([lo, hi]) + "\n")
        self.process.stdin.flush()
        return self.read()["seconds"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main() -> None:
    args = parse_args()
    for config in (args.config, args.config_b or args.config):
        if not config.is_file():
            sys.exit(f"error: no config file {config}")
    settings = {"config": str(args.config.resolve()), "data": str(args.data.resolve()), "amp": args.amp,
                "threads": args.threads}
    workers = [Worker(args.a, settings)]  # loaded one after the other: neither is timed while the other loads
    workers.append(Worker(args.b, {**settings, "config": str((args.config_b or args.config).resolve())}))
    for worker in workers:
        worker.run(0, args.warmup)
    seconds = [0.0, 0.0]
    for block in range(args.blocks):
        lo = args.warmup + block * args.block
        for index in (0, 1) if block % 2 == 0 else (1, 0):
            seconds[index] += workers[index].run(lo, lo + args.block)
    for worker in workers:
        worker.close()
    updates = args.blocks * args.block
    for name, total in zip("AB", seconds):
        print(f"{name} {workers['AB'.index(name)].name}: {total / updates * 1e3:.1f} ms/update")
    print(f"B/A speed: {seconds[0] / seconds[1]:.3f} ({updates} updates each, {args.blocks} alternating blocks, "
          f"amp {args.amp}, {args.threads} threads)")


if __name__ == "__main__":
    main()
