"""Export an nmtkit Transformer to a CTranslate2 model directory through CTranslate2's spec API.

The weights are written into `ctranslate2.specs.TransformerSpec` (as CTranslate2's own OpenNMT-py and fairseq
converters fill it), then `validate()`, `optimize(quantization)` and `save(dir)`. The conventions that differ
between nmtkit and other toolkits, and so break their converters, are settled here, not left to defaults:
- positions: nmtkit adds sin on even and cos on odd dimensions from position 0 (`sinusoidal_table`, computed in
  float64); the table nmtkit uses (or the learned one) is written into the spec as it is, for both stacks.
- embeddings are scaled by sqrt(d_model) before the positions are added (`scale_embeddings`, CTranslate2's default).
- layer norm epsilon: torch's 1e-5 (CTranslate2 defaults to 1e-6); post-norm layers have no final stack norm.
- vocabulary: the SentencePiece pieces in nmtkit id order (pad 0 `<pad>`, unk 1 `<unk>`, bos 2 `<s>`, eos 3
  `</s>`), so CTranslate2's ids are nmtkit's; `<unk>`, `<s>` and `</s>` are named as CTranslate2's specials.
- decoder start token: `<s>` (BOS), as nmtkit's decoder starts; for a model that reads its target-language tag in
  the decoder (`language_tags: decoder`, an imported M2M100 or NLLB model) `</s>`, as its decoder starts: the
  engine then gives the tag as CTranslate2's target prefix and the source-language token in the tag's place in the
  source, as CTranslate2's own M2M100 converter and its users do (nmtkit.json's `language_tags` says so).
- source EOS: nmtkit appends EOS to every source; `add_source_eos` has CTranslate2 append `</s>` too, so anyone
  running the directory with CTranslate2 alone feeds the model the sequence it was trained on.
- output layer: nmtkit's has no bias, tied to the target embedding or not; attention for the coverage penalty is
  the last decoder layer's averaged over all heads (`alignment_heads=0`), as nmtkit's.
- imported models (`nmtkit import`): embeddings scaled or not (`scale_embeddings`), their position table as it is,
  silu as CTranslate2's swish, and Marian's fixed output bias as the projection's bias. Marian's padding token,
  which nmtkit's search never proposes (`suppress_pad`) but keeps in the softmax, gets the bias that keeps
  it out of the softmax, as CTranslate2's own OPUS-MT converter removes it: scores differ by its probability
  (none to speak of in a trained OPUS-MT model). M2M100 and NLLB: scaled embeddings, pre-norm with final stack
  norms, and the table from row `position_offset` (the table nmtkit adds starts there), as CTranslate2's converter
  writes `weights[offset:]`.

The directory also holds the SentencePiece model(s) and `nmtkit.json` (config, languages, decode defaults, the
placeholder masking of the training data, which translation applies by default), so it
alone is enough to translate (`nmtkit.translate.exported` reads it, `nmtkit.translate.ctranslate2_engine` searches
it); with `--shortlist DATA`, also a vocabulary shortlist built from the training data (`vmap.txt`,
`nmtkit.export.shortlist`), which `nmtkit translate` then uses.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from torch import Tensor, nn

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.config.sections import to_dict
from nmtkit.data.subword import BOS, EOS, PAD, UNK, Subword
from nmtkit.errors import NmtkitError
from nmtkit.models.transformer import GATED, DecoderLayer, EncoderLayer, Transformer
from nmtkit.translate.exported import (
    DECODER_TAGS_FORMAT,
    MANIFEST,
    MANIFEST_FORMAT,
    SOURCE_SUBWORD,
    TARGET_SUBWORD,
    VMAP,
)
from nmtkit.version import __version__

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16", "int16")
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which every nmtkit layer norm uses
NEVER = -1e4  # an output bias that keeps a piece out of every softmax


def numpy(tensor: Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def set_linear(spec, *layers: nn.Linear) -> None:
    """One CTranslate2 linear layer; several nmtkit layers are stacked along the output rows (fused Q/K/V)."""
    spec.weight = np.concatenate([numpy(layer.weight) for layer in layers])
    if layers[0].bias is not None:
        spec.bias = np.concatenate([numpy(layer.bias) for layer in layers])


def set_layer_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = numpy(norm.weight), numpy(norm.bias)


def set_self_attention(spec, attention, norm: nn.LayerNorm) -> None:
    set_linear(spec.linear[0], attention.query, attention.key, attention.value)
    set_linear(spec.linear[1], attention.out)
    set_layer_norm(spec.layer_norm, norm)


def set_feed_forward(spec, feed_forward, norm: nn.LayerNorm) -> None:
    if feed_forward.gated:  # CTranslate2: act(linear_0 x) * linear_0_noact x; nmtkit's inner holds both, in order
        activation, gate = (numpy(part) for part in feed_forward.inner.weight.chunk(2, dim=0))
        activation_bias, gate_bias = (numpy(part) for part in feed_forward.inner.bias.chunk(2, dim=0))
        spec.linear_0.weight, spec.linear_0.bias = activation, activation_bias
        spec.linear_0_noact.weight, spec.linear_0_noact.bias = gate, gate_bias
    else:
        set_linear(spec.linear_0, feed_forward.inner)
    set_linear(spec.linear_1, feed_forward.outer)
    set_layer_norm(spec.layer_norm, norm)


def set_encoder_layer(spec, layer: EncoderLayer) -> None:
    set_self_attention(spec.self_attention, layer.attention, layer.attention_block.norm)
    set_feed_forward(spec.ffn, layer.feed_forward, layer.feed_forward_block.norm)


def set_decoder_layer(spec, layer: DecoderLayer) -> None:
    set_self_attention(spec.self_attention, layer.self_attention, layer.blocks[0].norm)
    cross = layer.cross_attention
    set_linear(spec.attention.linear[0], cross.query)
    set_linear(spec.attention.linear[1], cross.key, cross.value)
    set_linear(spec.attention.linear[2], cross.out)
    set_layer_norm(spec.attention.layer_norm, layer.blocks[1].norm)
    set_feed_forward(spec.ffn, layer.feed_forward, layer.blocks[2].norm)


def check_exportable(model: nn.Module) -> None:
    if not isinstance(model, Transformer):
        name = getattr(getattr(model, "config", None), "name", type(model).__name__)
        raise NmtkitError(f"CTranslate2 runs Transformers only; the {name!r} model cannot be exported "
                          "(translate it with its checkpoint)")


def transformer_spec(model: Transformer):
    """The CTranslate2 TransformerSpec of an nmtkit Transformer, weights set (vocabularies not yet registered)."""
    from ctranslate2.specs import common_spec, transformer_spec

    config = model.config
    relu, gelu, swish = common_spec.Activation.RELU, common_spec.Activation.GELU, common_spec.Activation.SWISH
    activation = {"relu": relu, "gelu": gelu, "silu": swish, "reglu": relu, "geglu": gelu,
                  "swiglu": swish}[config.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers), config.heads, pre_norm=config.norm == "pre",
        activation=activation, ffn_glu=config.activation in GATED, alignment_layer=-1, alignment_heads=0)
    positions = numpy(model.positions.table)  # (max_positions, D): the exact table nmtkit adds
    spec.encoder.embeddings[0].weight = numpy(model.src_embed.weight)
    spec.encoder.position_encodings.encodings = positions
    spec.decoder.embeddings.weight = numpy(model.tgt_embed.weight)
    spec.decoder.position_encodings.encodings = positions
    spec.decoder.projection.weight = numpy(model.output.weight)
    spec.encoder.scale_embeddings = spec.decoder.scale_embeddings = config.scale_embeddings
    if config.output_bias:
        bias = model.logits_bias.detach().clone()
        if config.suppress_pad:
            bias[PAD] = NEVER
        spec.decoder.projection.bias = numpy(bias)
    if config.norm == "pre":
        set_layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        set_layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder):
        set_encoder_layer(layer_spec, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder):
        set_decoder_layer(layer_spec, layer)
    return spec


def vocabulary(subword: Subword) -> list[str]:
    """The pieces in nmtkit id order: CTranslate2 looks tokens up by name, so its ids become nmtkit's."""
    pieces = [subword.processor.id_to_piece(index) for index in range(subword.vocab_size)]
    if len(set(pieces)) != len(pieces):
        raise NmtkitError("the SentencePiece model has two pieces spelled alike; CTranslate2 looks tokens up by name")
    return pieces


def model_spec(loaded: LoadedModel):
    """The complete spec: weights, vocabularies and the special-token conventions (see the module docstring)."""
    check_exportable(loaded.model)
    spec = transformer_spec(loaded.model)
    source, target = vocabulary(loaded.src_subword), vocabulary(loaded.tgt_subword)
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = target[UNK], target[BOS], target[EOS]
    spec.config.decoder_start_token = target[EOS if decoder_tags(loaded) else BOS]
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    if (source[UNK], source[EOS]) != (target[UNK], target[EOS]):
        raise NmtkitError("the source and target SentencePiece models name <unk> or </s> differently")
    return spec


def decoder_tags(loaded: LoadedModel) -> bool:
    """Whether the model reads its target-language tag in the decoder, after EOS (an imported M2M100 or NLLB)."""
    return loaded.model.config.language_tags == "decoder"


def language_tags(loaded: LoadedModel) -> dict:
    """nmtkit.json's `language_tags` of a model that reads its tag in the decoder (none for other models, whose
    manifests are as they were; with them, the manifest's format is `DECODER_TAGS_FORMAT`): the decoder starts with
    `decoder_start` and reads the tag as CTranslate2's target prefix; the source reads `source_token` where nmtkit's
    source has the tag (`nmtkit.translate.ctranslate2_model`)."""
    if not decoder_tags(loaded):
        return {}
    if not loaded.tags:
        raise NmtkitError("this model reads its target-language tag in the decoder but has no target-language tags; "
                          "import it again")
    return {"language_tags": {"where": "decoder", "decoder_start": EOS,
                              "source_token": loaded.model.config.source_token}}


def manifest(loaded: LoadedModel, quantization: str, shortlist: dict | None = None) -> dict:
    import ctranslate2

    joint = loaded.src_subword is loaded.tgt_subword
    tags = language_tags(loaded)
    return {"format": DECODER_TAGS_FORMAT if tags else MANIFEST_FORMAT, "nmtkit_version": __version__,
            "ctranslate2_version": ctranslate2.__version__, "quantization": quantization,
            "config": to_dict(loaded.config),
            "subword": {"src": SOURCE_SUBWORD, "tgt": SOURCE_SUBWORD if joint else TARGET_SUBWORD, "joint": joint},
            "langs": {"src": loaded.langs[0], "tgt": loaded.langs[1], "tags": dict(loaded.tags)},
            "placeholders": loaded.placeholders, **({"shortlist": shortlist} if shortlist else {}),
            **tags}


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_directory(loaded: LoadedModel, out: Path, quantization: str, vmap: str | None = None,
                    shortlist: dict | None = None) -> None:
    """Write the spec, the subword model(s), the shortlist's `vmap` text if any and nmtkit.json (`shortlist`: its
    description) into a fresh sibling of `out`, then rename it: an interrupted export leaves no half-written model
    directory behind."""
    spec = model_spec(loaded)
    spec.validate()
    spec.optimize(quantization=quantization)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        spec.save(str(staging))
        info = manifest(loaded, quantization, shortlist)
        if vmap is not None:
            (staging / VMAP).write_text(vmap, encoding="utf-8")
        (staging / SOURCE_SUBWORD).write_bytes(loaded.src_subword.proto)
        if not info["subword"]["joint"]:
            (staging / TARGET_SUBWORD).write_bytes(loaded.tgt_subword.proto)
        (staging / MANIFEST).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        staging.chmod(0o777 & ~current_umask())  # mkdtemp's 0700 would keep the model from other users
        if out.exists():
            out.rmdir()  # an empty directory (a non-empty one is refused in `export_model`)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
