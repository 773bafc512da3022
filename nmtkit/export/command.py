"""The export command's one library call: a checkpoint to a CTranslate2 directory (`nmtkit.export.ctranslate2`),
with the vocabulary shortlist of its training data if asked (`nmtkit.export.shortlist`)."""

from __future__ import annotations

from pathlib import Path

from nmtkit.checkpoint.payload import load_checkpoint, restore_model
from nmtkit.errors import NmtkitError
from nmtkit.export.ctranslate2 import QUANTIZATIONS, check_exportable, write_directory
from nmtkit.export.shortlist import shortlist_from_data
from nmtkit.translate.exported import VMAP


def export_model(checkpoint: Path, out: Path, to: str = "ctranslate2", quantization: str = "float32",
                 shortlist: Path | None = None, shortlist_size: int = 50, shortlist_frequent: int = 500) -> dict:
    """Export checkpoint `checkpoint` (a Transformer) to the CTranslate2 directory `out`; returns a summary. With
    `shortlist` (a data directory prepared with the model's subword models), the directory also gets the
    vocabulary shortlist of its training split: `shortlist_frequent` pieces always, `shortlist_size` per source
    piece (`nmtkit.export.shortlist`)."""
    import torch

    if to != "ctranslate2":
        raise NmtkitError(f"unknown export target {to!r}; nmtkit exports to ctranslate2")
    if quantization not in QUANTIZATIONS:
        raise NmtkitError(f"unknown quantization {quantization!r}; use one of {', '.join(QUANTIZATIONS)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NmtkitError(f"{out} already exists and is not an empty directory; remove it or choose another --out")
    loaded = restore_model(load_checkpoint(checkpoint), torch.device("cpu"))
    check_exportable(loaded.model)
    vmap, described = None, None
    if shortlist is not None:
        built = shortlist_from_data(shortlist, loaded.src_subword, loaded.tgt_subword, shortlist_size,
                                    shortlist_frequent)
        vmap = built.vmap(loaded.src_subword, loaded.tgt_subword)
        described = {"file": VMAP, "data": str(shortlist), "pairs": built.pairs, "per_piece": shortlist_size,
                     "frequent": len(built.frequent)}
    write_directory(loaded, out, quantization, vmap, described)
    size = sum(path.stat().st_size for path in out.iterdir())
    return {"out": str(out), "quantization": quantization, "bytes": size,
            **({"shortlist": described} if described else {})}
