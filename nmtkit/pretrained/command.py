"""`nmtkit import`: a Hugging Face checkpoint directory (config.json, safetensors or PyTorch weights, tokenizer
files) of a MarianMTModel (OPUS-MT) or an M2M100ForConditionalGeneration (M2M100, NLLB-200) as an nmtkit
checkpoint, which translate, evaluate, align, export, serve and `train --init-from` take as they take their own.

Nothing is downloaded and nothing in the directory is executed: weights are read as data (`weights.py`). Every
weight of the checkpoint must find its place (a weight nmtkit would drop, such as mBART's layernorm_embedding, is
refused), and every place its weight.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.sections import Config, DecodeConfig
from nmtkit.data.files import refuse_onto_inputs
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError
from nmtkit.pretrained.imported import Imported
from nmtkit.pretrained.layers import Weights, read_json, required
from nmtkit.pretrained.m2m100 import import_m2m100
from nmtkit.pretrained.marian import import_marian
from nmtkit.pretrained.weights import read_weights

log = logging.getLogger(__name__)

ARCHITECTURES = {"marian": "MarianMTModel (OPUS-MT)", "m2m_100": "M2M100ForConditionalGeneration (M2M100, NLLB-200)"}
TIED = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")


def import_model(directory: Path, out: Path, src_lang: str | None = None, tgt_lang: str | None = None) -> dict:
    """Write `out`/model.pt from the Hugging Face checkpoint in `directory`; returns a summary."""
    if not directory.is_dir():
        raise NmtkitError(f"{directory} is not a directory (a Hugging Face checkpoint: config.json, weights, "
                          "tokenizer files)")
    refuse_onto_inputs([("--out", out)], [("the checkpoint directory", directory)])
    target = out / "model.pt"
    if target.exists():
        raise NmtkitError(f"{target} already exists; choose another --out")
    imported = convert(directory, src_lang)
    langs = (src_lang or imported.langs[0], tgt_lang or imported.langs[1])
    if tgt_lang and imported.tags and tgt_lang not in imported.tags:
        raise NmtkitError(f"--tgt-lang {tgt_lang!r}: the model's target languages are "
                          f"{', '.join(sorted(imported.tags)[:8])}{', ...' if len(imported.tags) > 8 else ''}")
    decode = DecodeConfig(**{**imported.decode, **({"tgt_lang": tgt_lang} if tgt_lang and imported.tags else {})})
    config = Config(model=imported.model.config, decode=decode)
    src = Subword(imported.src_proto)
    subwords = (src, src if imported.joint else Subword(imported.tgt_proto))
    save_atomic(make_payload(config, imported.model, subwords, langs=langs, tags=imported.tags), target)
    for note in imported.notes:
        log.warning("%s", note)
    return {"checkpoint": str(target), "architecture": ARCHITECTURES[imported.architecture], "vocab": src.vocab_size,
            "joint": imported.joint, "languages": len(imported.tags), "notes": imported.notes}


def convert(directory: Path, src_lang: str | None) -> Imported:
    config = read_json(required(directory, "config.json", "the model's settings"))
    kind = config.get("model_type")
    if kind not in ARCHITECTURES:
        raise NmtkitError(f"{directory}/config.json: model_type {kind!r} is not one nmtkit imports "
                          f"({'; '.join(f'{name}: {what}' for name, what in ARCHITECTURES.items())})")
    generation = read_json(directory / "generation_config.json") if (directory / "generation_config.json").is_file() \
        else {}
    generation = {**config, **generation}
    weights = Weights(read_weights(directory))
    with torch.device("cpu"):
        if kind == "marian":
            imported = import_marian(directory, config, weights, generation)
        else:
            imported = import_m2m100(directory, config, weights, generation, src_lang)
    imported.architecture = kind
    check_leftovers(weights)
    imported.decode.update(search_defaults(generation, imported.model.config.language_tags == "decoder"))
    return imported


def search_defaults(generation: dict, language_token: bool) -> dict:
    """DecodeConfig fields for generation_config.json's num_beams and length_penalty. transformers divides a
    finished beam's log-probability by its length to the power length_penalty, counting EOS and, for M2M100 and
    NLLB, the forced language token: nmtkit's sockeye penalty ((beta + |Y|) / (beta + 1))^alpha ranks as it does
    with beta 1 for the language token (0 without), and the average penalty is the same for 1 without it."""
    defaults = {}
    beams, penalty = generation.get("num_beams"), generation.get("length_penalty", 1.0)
    if type(beams) is int and beams >= 1:
        defaults["beam"] = beams
    if isinstance(penalty, (int, float)) and not isinstance(penalty, bool) and (language_token or penalty != 1.0):
        defaults |= {"length_penalty": "sockeye", "alpha": float(penalty), "beta": 1.0 if language_token else 0.0}
    return defaults


def check_leftovers(weights: Weights) -> None:
    """An error for a weight the import did not take: nmtkit's model would lack what it computes. Tied copies of
    the embedding and the position tables (computed, not learned) are allowed when they are what was taken."""
    taken = next(weights.tensors[name] for name in ("model.shared.weight", "model.encoder.embed_tokens.weight")
                 if name in weights.used)
    for name, value in weights.tensors.items():
        if name in weights.used or "embed_positions" in name:
            continue
        if name in TIED and value.shape == taken.shape and torch.equal(value, taken):
            continue
        raise NmtkitError(f"the checkpoint has a weight nmtkit's model has no place for: {name} (is it a "
                          f"MarianMTModel or M2M100ForConditionalGeneration with tied embeddings?)")
