"""Tiny untrained checkpoints (seeded) and a corpus for the tests of `nmtkit score-pairs` (nmtkit/scoring/)."""

from __future__ import annotations

from pathlib import Path

import torch

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import Subword, train_subword
from nmtkit.registry import build_model

SOURCES = ["uno dos tres", "cuatro cinco", "seis siete ocho", "nueve diez", "once doce trece catorce"]
TARGETS = [line.upper() for line in SOURCES]
LANG_TAGS = ("<2en>", "<2es>")
MAX_POSITIONS = 40


def subword(kind: str = "word", control_symbols: tuple[str, ...] = (), user_symbols: tuple[str, ...] = (),
            normalization: str = "identity") -> Subword:
    lines, size = (SOURCES + TARGETS) * 3, 40 + 2 * len(user_symbols)  # the word trainer counts a symbol twice
    config = DataConfig(subword=kind, vocab_size=size, normalization=normalization)
    return train_subword(lines, config, size, control_symbols, user_symbols)


def save_model(path: Path, vocab: Subword, seed: int, model_name: str = "transformer", **payload) -> Path:
    """A tiny model of `model_name`, its weights drawn from `seed`, saved with `vocab` on both sides."""
    torch.manual_seed(seed)
    sizes = {"transformer": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32,
                             "max_positions": MAX_POSITIONS},
             "luong": {"encoder_layers": 1, "decoder_layers": 1, "embed_dim": 16, "hidden": 16}}[model_name]
    config = build_config({"model": {"name": model_name, **sizes}})
    model = build_model(config.model, vocab.vocab_size, vocab.vocab_size, True).eval()
    save_atomic(make_payload(config, model, (vocab, vocab), **payload), path)
    return path


def write_corpus(root: Path, sources: list[str] = SOURCES, targets: list[str] = TARGETS) -> tuple[Path, Path]:
    src, tgt = root / "corpus.es", root / "corpus.en"
    src.write_text("".join(line + "\n" for line in sources), encoding="utf-8")
    tgt.write_text("".join(line + "\n" for line in targets), encoding="utf-8")
    return src, tgt


def make_files(root: Path) -> dict[str, Path]:
    """The corpus, a forward and a reverse model (word vocabularies), a reverse model of another vocabulary (char),
    a multilingual forward model (language tags) and a model whose weights hold NaN."""
    root.mkdir(parents=True, exist_ok=True)
    words, chars, tagged = subword(), subword("char"), subword("word", LANG_TAGS)
    paths = dict(zip(("src", "tgt"), write_corpus(root)))
    paths["fwd"] = save_model(root / "fwd.pt", words, 0, langs=("es", "en"))
    paths["bwd"] = save_model(root / "bwd.pt", words, 1, langs=("en", "es"))
    paths["bwd_char"] = save_model(root / "bwd_char.pt", chars, 2, langs=("en", "es"))
    tags = {tag[2:-1]: tagged.processor.piece_to_id(tag) for tag in LANG_TAGS}
    paths["multi"] = save_model(root / "multi.pt", tagged, 3, tags=tags)
    payload = torch.load(paths["fwd"], weights_only=True)
    for weights in payload["model"].values():
        weights.fill_(float("nan"))
    save_atomic(payload, root / "nan.pt")
    paths["nan"] = root / "nan.pt"
    return paths
