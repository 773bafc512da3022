"""What Marian and M2M100 share: transformers' BART-style layer names, mapped onto nmtkit's Transformer, and the
settings both read from config.json.

Each Hugging Face encoder layer is self-attention (q/k/v/out projections), its layer norm, fc1, fc2 and
final_layer_norm; a decoder layer adds encoder_attn and its norm. nmtkit's layer holds the same weights under
other names (`nmtkit.models.transformer`): the norms sit in its residual blocks, pre- or post-norm as the config
says, so one mapping serves both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import Transformer

ENCODER_LAYER = {"self_attn.q_proj": "attention.query", "self_attn.k_proj": "attention.key",
                 "self_attn.v_proj": "attention.value", "self_attn.out_proj": "attention.out",
                 "self_attn_layer_norm": "attention_block.norm", "fc1": "feed_forward.inner",
                 "fc2": "feed_forward.outer", "final_layer_norm": "feed_forward_block.norm"}
DECODER_LAYER = {"self_attn.q_proj": "self_attention.query", "self_attn.k_proj": "self_attention.key",
                 "self_attn.v_proj": "self_attention.value", "self_attn.out_proj": "self_attention.out",
                 "self_attn_layer_norm": "blocks.0.norm", "encoder_attn.q_proj": "cross_attention.query",
                 "encoder_attn.k_proj": "cross_attention.key", "encoder_attn.v_proj": "cross_attention.value",
                 "encoder_attn.out_proj": "cross_attention.out", "encoder_attn_layer_norm": "blocks.1.norm",
                 "fc1": "feed_forward.inner", "fc2": "feed_forward.outer", "final_layer_norm": "blocks.2.norm"}
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}


@dataclass
class Weights:
    """A checkpoint's tensors by name; `used` records what the import took, so that what it left is known."""

    tensors: dict[str, Tensor]
    used: set[str] = field(default_factory=set)

    def take(self, *names: str) -> Tensor:
        """The first of `names` present (tied weights are saved under one of their names)."""
        for name in names:
            if name in self.tensors:
                self.used.add(name)
                return self.tensors[name]
        raise NmtkitError(f"the weights lack {names[0]}: is the checkpoint complete, and of this architecture?")


def setting(config: dict, key: str, kind: type, default=None):
    """config.json's `key`, of type `kind` (`default` when absent and a default is given)."""
    value = config.get(key, default)
    if value is None and default is None:
        raise NmtkitError(f"config.json has no {key}")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise NmtkitError(f"config.json's {key} is {value!r}, not a {getattr(kind, '__name__', 'number')}")
    return value


def common_settings(config: dict) -> dict:
    """The TransformerConfig fields both architectures read the same way; an error for what nmtkit lacks
    (different encoder and decoder widths or heads, an unknown activation)."""
    for encoder_key, decoder_key in (("encoder_attention_heads", "decoder_attention_heads"),
                                     ("encoder_ffn_dim", "decoder_ffn_dim")):
        if setting(config, encoder_key, int) != setting(config, decoder_key, int):
            raise NmtkitError(f"config.json's {encoder_key} and {decoder_key} differ; nmtkit's Transformer has one")
    activation = setting(config, "activation_function", str)
    if activation not in ACTIVATIONS:
        raise NmtkitError(f"config.json's activation_function {activation!r} is not one nmtkit has "
                          f"({', '.join(ACTIVATIONS)})")
    return {"encoder_layers": setting(config, "encoder_layers", int),
            "decoder_layers": setting(config, "decoder_layers", int), "d_model": setting(config, "d_model", int),
            "heads": setting(config, "encoder_attention_heads", int), "ffn": setting(config, "encoder_ffn_dim", int),
            "dropout": float(setting(config, "dropout", (int, float), 0.1)),
            "attention_dropout": float(setting(config, "attention_dropout", (int, float), 0.0)),
            "activation_dropout": float(setting(config, "activation_dropout", (int, float), 0.0)),
            "activation": ACTIVATIONS[activation],
            "max_positions": setting(config, "max_position_embeddings", int),
            "scale_embeddings": setting(config, "scale_embedding", bool, False)}


@torch.no_grad()
def copy_layers(model: Transformer, weights: Weights, prefix: str = "model.") -> None:
    """Every encoder and decoder layer's weights into `model`."""
    targets = dict(model.named_parameters())
    for side, stack, names in (("encoder", model.encoder, ENCODER_LAYER), ("decoder", model.decoder, DECODER_LAYER)):
        for index in range(len(stack)):
            for hf_name, name in names.items():
                for part in ("weight", "bias"):
                    copy(targets[f"{side}.{index}.{name}.{part}"],
                         weights.take(f"{prefix}{side}.layers.{index}.{hf_name}.{part}"), f"{side} layer {index}")


def check_positions(model: Transformer, weights: Weights, prefix: str = "model.") -> None:
    """Older checkpoints save the sinusoidal tables they computed (transformers recomputes them and ignores a saved
    M2M100 table, but loads a saved Marian one): an error if one differs from the table nmtkit computes."""
    table = model.positions.table
    for side in ("encoder", "decoder"):
        saved = weights.tensors.get(f"{prefix}{side}.embed_positions.weight")
        if saved is None or saved.dim() != 2 or saved.size(1) != table.size(1):
            continue
        rows = min(saved.size(0), table.size(0))
        if not torch.allclose(saved[:rows].float(), table[:rows], atol=1e-4):
            raise NmtkitError(f"the checkpoint's {side} position table is not the sinusoidal layout config.json "
                              "implies; nmtkit computes its positions and cannot take this one")


def copy(target: Tensor, value: Tensor, where: str) -> None:
    if tuple(target.shape) != tuple(value.shape):
        raise NmtkitError(f"{where}: a weight of shape {tuple(value.shape)} where config.json gives "
                          f"{tuple(target.shape)}: the weights and config.json do not match")
    target.copy_(value.float())


MAX_JSON_BYTES = 64 << 20  # config.json, vocab.json, tokenizer.json: NLLB's tokenizer.json is about 17 MB


def required(directory, name: str, why: str):
    """`directory / name`, which must be a file (`why`: what needs it, for the error)."""
    path = directory / name
    if not path.is_file():
        raise NmtkitError(f"{directory} has no {name} ({why})")
    return path


def read_json(path, kind: type = dict):
    """A JSON file of `kind`, at most MAX_JSON_BYTES: anything else is a one-line error naming it."""
    import json

    if path.stat().st_size > MAX_JSON_BYTES:
        raise NmtkitError(f"{path} is larger than {MAX_JSON_BYTES >> 20} MB; it is not a tokenizer or config file")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise NmtkitError(f"{path} is not JSON ({type(error).__name__})") from error
    if not isinstance(value, kind):
        raise NmtkitError(f"{path} is not a JSON {kind.__name__}")
    return value


def piece_ids(vocab: dict, where) -> dict[str, int]:
    """A vocabulary file's mapping, checked: pieces to non-negative ids."""
    if not all(isinstance(piece, str) and type(index) is int and index >= 0 for piece, index in vocab.items()):
        raise NmtkitError(f"{where} does not map pieces to ids")
    return vocab
