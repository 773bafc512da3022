"""The back-translation recipe's data and training files: the corpora of X -> en, and each system's config.

``corpora`` writes the corpora YAML of ``nmtkit prepare --corpora``: ``bilingual`` (the messages corpus, with its
dev and test), ``bt`` (the back-translations: machine-translated X as the source, the monolingual English as the
target) and ``bt_tagged`` (the same pairs, each source starting with the tag ``<bt>``). One prepared directory
holds all three, so the three systems share one vocabulary and differ only in what their mix draws. File names are
written relative to the YAML file. ::

    python recipes/backtranslation/systems.py corpora --code de --train train.de train.en --dev dev.de dev.en \
        --test test.de test.en --back-translated bt.de mono.en --out data/backtranslation/de/corpora.yaml

``config`` writes a training config: the base config (e.g. recipes/bible/transformer.yaml) with ``train.stages``.
Without ``--bt`` the one stage draws only ``bilingual``. With ``--bt bt`` (or ``bt_tagged``) the first stage draws
the back-translations at ``--bt-share`` of the target tokens (the rest bilingual) and, with ``--finetune`` F above
0, ends after (1 - F) x ``--updates`` updates, when a second stage continues on bilingual data alone to the end
of the time budget (``--updates``: what the bilingual-only system made in the same time, so that F is about the
share of the budget spent fine-tuning). ::

    python recipes/backtranslation/systems.py config --base recipes/bible/transformer.yaml --bt bt_tagged \
        --bt-share 0.5 --finetune 0.2 --updates 3600 --out runs/backtranslation/de/bt-tagged.yaml
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

BILINGUAL, BT, BT_TAGGED = "bilingual", "bt", "bt_tagged"
BT_TAG = "<bt>"


def corpora(yaml_dir: Path, train: list[Path], dev: list[Path], test: list[Path], back_translated: list[Path]
            ) -> list[dict]:
    """The three corpora, each [source, target] path pair relative to `yaml_dir`."""
    def relative(paths: list[Path]) -> list[str]:
        return [os.path.relpath(path, yaml_dir) for path in paths]

    bt_src, bt_tgt = relative(back_translated)
    return [{"name": BILINGUAL, "train": relative(train), "dev": relative(dev), "test": relative(test)},
            {"name": BT, "src": bt_src, "tgt": bt_tgt},
            {"name": BT_TAGGED, "src": bt_src, "tgt": bt_tgt, "tag": BT_TAG}]


def stages(bt: str | None, bt_share: float, finetune: float, updates: int) -> list[dict]:
    """The `train.stages` of a system (module doc)."""
    if bt is None:
        return [{"mix": {BILINGUAL: 1.0}}]
    mixed = {"mix": {BILINGUAL: round(1.0 - bt_share, 6), bt: bt_share}}
    if finetune <= 0:
        return [mixed]
    mixed["until"] = {"updates": max(1, round((1.0 - finetune) * updates))}
    return [mixed, {"mix": {BILINGUAL: 1.0}}]


def system_config(base: Path | None, bt: str | None, bt_share: float, finetune: float, updates: int) -> dict:
    """The base config (none: nmtkit's defaults) with the system's stages."""
    config = yaml.safe_load(base.read_text(encoding="utf-8")) if base else {}
    config = config or {}
    config.setdefault("train", {})["stages"] = stages(bt, bt_share, finetune, updates)
    return config


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with a `config` command's arguments, or None."""
    if not 0 < args.bt_share < 1:
        return f"--bt-share {args.bt_share}: give a share between 0 and 1"
    if not 0 <= args.finetune < 1:
        return f"--finetune {args.finetune}: give a fraction in [0, 1)"
    if args.bt and args.finetune > 0 and args.updates < 1:
        return "--finetune needs --updates: the updates the bilingual-only system made in the same time"
    return None


def write_yaml(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content, allow_unicode=True, sort_keys=False), encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    corpora_command = commands.add_parser("corpora", help="write the corpora YAML of prepare --corpora")
    for name in ("train", "dev", "test"):
        corpora_command.add_argument(f"--{name}", type=Path, nargs=2, required=True, metavar=("X", "EN"),
                                     help=f"the bilingual {name} split: X file, English file")
    corpora_command.add_argument("--back-translated", type=Path, nargs=2, required=True, metavar=("X", "EN"),
                                 help="the back-translations (X) and the monolingual English they translate")
    config_command = commands.add_parser("config", help="write a system's training config")
    config_command.add_argument("--base", help="the config the system starts from ('none': nmtkit's defaults)")
    config_command.add_argument("--bt", choices=(BT, BT_TAGGED), help="the back-translated corpus to mix in")
    config_command.add_argument("--bt-share", type=float, default=0.5, help="its share of the target tokens")
    config_command.add_argument("--finetune", type=float, default=0.0,
                                help="share of the updates on bilingual data alone, at the end (0: one stage)")
    config_command.add_argument("--updates", type=int, default=0, help="the bilingual-only system's updates")
    for command in (corpora_command, config_command):
        command.add_argument("--out", type=Path, required=True, help="the YAML file to write")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "corpora":
        write_yaml(args.out, corpora(args.out.parent, args.train, args.dev, args.test, args.back_translated))
        return 0
    problem = check(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    base = None if args.base in (None, "none") else Path(args.base)
    write_yaml(args.out, system_config(base, args.bt, args.bt_share, args.finetune, args.updates))
    return 0


if __name__ == "__main__":
    sys.exit(main())
