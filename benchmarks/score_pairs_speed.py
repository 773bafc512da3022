"""Speed of `nmtkit score-pairs` (dual conditional cross-entropy): pairs scored a second on this machine.

Two checkpoints of a model config (default: the Bible recipe's 3+3-layer d256 Transformer), with weights drawn at
random (the work per pair does not depend on the weights) and the subword model of a prepared data directory
(`spm.model`, joint), score that directory's dev split (or --pairs of its train split) through the command's library
call. Printed: the time to load both models, and the scoring's wall and process CPU seconds, pairs and target tokens
a second, per --threads setting and --batch-tokens setting.

    python benchmarks/score_pairs_speed.py --data DATA_DIR [--config recipes/bible/transformer.yaml] \
        [--threads 2] [--batch-tokens 4000] [--pairs 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.files import load_yaml
from nmtkit.config.run import build_config
from nmtkit.data.corpus import read_lines
from nmtkit.data.subword import Subword
from nmtkit.registry import build_model
from nmtkit.scoring.command import PairFiles, score_pairs_command
from nmtkit.scoring.config import PairScoreConfig


def make_checkpoints(config_path: Path, vocab: Subword, root: Path) -> tuple[Path, Path]:
    config = build_config({"model": load_yaml(config_path)["model"]})
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = build_model(config.model, vocab.vocab_size, vocab.vocab_size, True).eval()
        paths.append(root / f"model{seed}.pt")
        save_atomic(make_payload(config, model, (vocab, vocab)), paths[-1])
    return paths[0], paths[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="data directory written by nmtkit prepare")
    parser.add_argument("--config", type=Path, default=Path("recipes/bible/transformer.yaml"))
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--batch-tokens", type=int, nargs="+", default=[4000])
    parser.add_argument("--pairs", type=int, default=0, help="score this many train pairs instead of dev")
    args = parser.parse_args()
    vocab = Subword((args.data / "spm.model").read_bytes())
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        forward, reverse = make_checkpoints(args.config, vocab, root)
        split = "train" if args.pairs else "dev"
        src, tgt = args.data / f"{split}.src.txt", args.data / f"{split}.tgt.txt"
        if args.pairs:
            for side, path in (("src", src), ("tgt", tgt)):
                lines = read_lines(path)[: args.pairs]
                (root / side).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            src, tgt = root / "src", root / "tgt"
        tokens = sum(len(ids) + 1 for ids in vocab.encode(read_lines(tgt)))
        for threads in args.threads:
            for batch_tokens in args.batch_tokens:
                files = PairFiles(src, tgt, forward, reverse, output=root / "scores")
                wall, cpu = time.perf_counter(), time.process_time()
                summary = score_pairs_command(files, PairScoreConfig(batch_tokens=batch_tokens), "cpu", threads)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                print(json.dumps({"threads": threads, "batch_tokens": batch_tokens, "pairs": summary["read"],
                                  "target_tokens": tokens, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                                  "pairs_per_s": round(summary["read"] / wall, 1),
                                  "load_average": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
