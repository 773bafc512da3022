"""The training config of recipes/wmt/run.sh's FINETUNE=F: the recipe's config with two `train.stages`.

    python recipes/wmt/stages.py --base recipes/wmt/transformer-base.yaml --data data/wmt14/bpe32000 \
        --finetune 0.1 --out runs/wmt14-en-de/transformer-base-finetune0.1/stages.yaml [--max-time 12h]

The first stage draws the three corpora at their shares of the data directory's target tokens, the shares that
training without stages gives them (every pair once an epoch), until (1 - F) of the budget is spent: of the base
config's `train.max_steps` and, with `--max-time`, of that time too, whichever comes first, as the budget itself
ends. The second stage trains on News Commentary alone to the end of the budget: the news corpus, the domain of
newstest. A budget set elsewhere (`--set train.max_steps=...` in TRAIN_ARGS) is not seen here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from nmtkit.config.values import parse_duration
from nmtkit.data.corpora import corpus_ranges
from nmtkit.data.dataset import TokenArray
from nmtkit.data.prepare import read_manifest
from nmtkit.errors import NmtkitError

NEWS = "news-commentary"


def target_tokens(data_dir: Path) -> dict[str, int]:
    """Each corpus' training target tokens, each line with its EOS, as a training mix counts them."""
    lengths = TokenArray.load(data_dir / "train.tgt").lengths() + 1
    return {name: int(sum(lengths[part.start : part.stop].sum() for part in parts))
            for name, parts in corpus_ranges(read_manifest(data_dir)).items()}


def stages(tokens: dict[str, int], finetune: float, max_steps: int, max_time: float) -> list[dict]:
    """The mix of every corpus by its tokens until (1 - finetune) of the budget, then News Commentary alone."""
    if NEWS not in tokens:
        raise NmtkitError(f"the data directory has no corpus {NEWS!r} (its corpora: {', '.join(tokens) or 'none'}); "
                          "prepare it with --corpora from the corpora.yaml of recipes/wmt/data.py")
    if not max_steps and not max_time:
        raise NmtkitError("FINETUNE needs a budget to take a share of: train.max_steps in the config, or MAX_TIME")
    until = {"updates": max(1, round((1 - finetune) * max_steps))} if max_steps else {}
    until |= {"time": round((1 - finetune) * max_time, 1)} if max_time else {}
    return [{"until": until, "mix": tokens}, {"mix": {NEWS: 1.0}}]


def staged_config(base: Path, data_dir: Path, finetune: float, max_time: float) -> dict:
    config = yaml.safe_load(base.read_text(encoding="utf-8")) or {}
    train = config.setdefault("train", {})
    train["stages"] = stages(target_tokens(data_dir), finetune, train.get("max_steps", 0), max_time)
    return config


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise NmtkitError(f"FINETUNE={text}: give the share of the budget spent on {NEWS} alone, in (0, 1), e.g. 0.1")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the recipe's config (a YAML file)")
    parser.add_argument("--data", type=Path, required=True, help="the data directory prepared with --corpora")
    parser.add_argument("--finetune", required=True,
                        help="the share of the budget spent on News Commentary alone, at the end; in (0, 1)")
    parser.add_argument("--max-time", default="", help="the run's --max-time, if it has one (e.g. 12h)")
    parser.add_argument("--out", type=Path, required=True, help="the config file to write")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        finetune = share(args.finetune)
        max_time = parse_duration(args.max_time) if args.max_time else 0.0
        config = staged_config(args.base, args.data, finetune, max_time)
    except NmtkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
