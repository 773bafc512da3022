"""`nmtkit prepare`: parallel text -> data directory (clean text, subword model(s), binarized splits)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from nmtkit.config import DataConfig
from nmtkit.data.corpus import filter_pairs, normalize, read_parallel, read_tsv
from nmtkit.data.dataset import TokenArray
from nmtkit.data.subword import Subword, train_subword
from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")


@dataclass
class SplitFiles:
    """Where one split comes from: two line-aligned files or one TSV file."""

    src: Path | None = None
    tgt: Path | None = None
    tsv: Path | None = None

    def read(self) -> tuple[list[str], list[str]]:
        if self.tsv is not None:
            return read_tsv(self.tsv)
        return read_parallel(self.src, self.tgt)


def load_subwords(data_dir: Path) -> tuple[Subword, Subword]:
    """The (source, target) subword models of a data directory; the same object twice when joint."""
    joint = data_dir / "spm.model"
    if joint.exists():
        model = Subword(joint.read_bytes())
        return model, model
    return Subword((data_dir / "spm.src.model").read_bytes()), Subword((data_dir / "spm.tgt.model").read_bytes())


def _train_subwords(src: list[str], tgt: list[str], config: DataConfig, out: Path) -> tuple[Subword, Subword]:
    if config.joint:
        model = train_subword(src + tgt, config, config.vocab_size)
        (out / "spm.model").write_bytes(model.proto)
        return model, model
    src_model = train_subword(src, config, config.vocab_size)
    tgt_model = train_subword(tgt, config, config.vocab_size)
    (out / "spm.src.model").write_bytes(src_model.proto)
    (out / "spm.tgt.model").write_bytes(tgt_model.proto)
    return src_model, tgt_model


def _write_split(name: str, src: list[str], tgt: list[str], models: tuple[Subword, Subword], out: Path) -> dict:
    (out / f"{name}.src.txt").write_text("".join(line + "\n" for line in src), encoding="utf-8")
    (out / f"{name}.tgt.txt").write_text("".join(line + "\n" for line in tgt), encoding="utf-8")
    src_ids, tgt_ids = TokenArray.from_lists(models[0].encode(src)), TokenArray.from_lists(models[1].encode(tgt))
    src_ids.save(out / f"{name}.src")
    tgt_ids.save(out / f"{name}.tgt")
    return {"sentences": len(src), "src_tokens": int(src_ids.lengths().sum()),
            "tgt_tokens": int(tgt_ids.lengths().sum())}


def prepare_data(splits: dict[str, SplitFiles], out: Path, config: DataConfig,
                 langs: tuple[str, str] = ("src", "tgt")) -> dict:
    """Validate, clean and binarize `splits` (train required) into `out`; returns the manifest."""
    if "train" not in splits:
        raise NmtkitError("prepare needs training data (--train-src/--train-tgt or --train-tsv)")
    texts = {name: files.read() for name, files in splits.items()}
    train_src, train_tgt, stats = filter_pairs(*texts["train"], config)
    log.info("train: kept %d of %d pairs (%s removed)", stats.kept, stats.read, dict(stats.removed) or "none")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise NmtkitError(f"cannot create output directory {out}: {error.strerror}") from error
    models = _train_subwords(train_src, train_tgt, config, out)
    manifest = {"format": 1, "src_lang": langs[0], "tgt_lang": langs[1], "data": asdict(config),
                "vocab": {"src": models[0].vocab_size, "tgt": models[1].vocab_size},
                "filter": stats.as_dict(), "splits": {}}
    for name in SPLITS:
        if name not in texts:
            continue
        src, tgt = (train_src, train_tgt) if name == "train" else [list(map(normalize, side)) for side in texts[name]]
        manifest["splits"][name] = _write_split(name, src, tgt, models, out)
        log.info("%s: %s", name, manifest["splits"][name])
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_manifest(data_dir: Path) -> dict:
    path = data_dir / "manifest.json"
    if not path.exists():
        raise NmtkitError(f"{data_dir} is not an nmtkit data directory (no manifest.json); run nmtkit prepare")
    return json.loads(path.read_text(encoding="utf-8"))
