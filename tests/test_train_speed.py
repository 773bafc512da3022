"""benchmarks/train_speed.py's pure parts: the FLOPs count against PyTorch's own counter on a tiny nmtkit model, the
presets against the recipe, both tools' options, OpenNMT-py's log and the loader share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from scripts import ROOT, load_script
from torch.utils.flop_counter import FlopCounterMode

from nmtkit.config.sections import DataConfig
from nmtkit.data.dataset import TokenArray
from nmtkit.data.subword import train_subword
from nmtkit.models.transformer import TransformerConfig
from nmtkit.registry import build_model

speed = load_script("benchmarks/train_speed.py", "train_speed")

TINY = speed.Preset(layers=2, d_model=16, heads=2, ffn=24, norm="post", clip_norm=0.0)
VOCAB = 20


def tiny_model():
    torch.manual_seed(0)
    config = TransformerConfig(encoder_layers=TINY.layers, decoder_layers=TINY.layers, d_model=TINY.d_model,
                               heads=TINY.heads, ffn=TINY.ffn, norm=TINY.norm)
    return build_model(config, VOCAB, VOCAB, True)


def test_matmul_weights_are_the_models_matrices():
    """Every 2-D parameter of the model is a weight of a product (the shared embedding once: as the output layer)."""
    matrices = sum(parameter.numel() for parameter in tiny_model().parameters() if parameter.dim() == 2)
    assert speed.matmul_weights(TINY, VOCAB)[2] == matrices


def test_training_flops_equal_pytorchs_count_of_forward_and_backward():
    """Sentences of one length (no padding); PyTorch's counter counts the causal self-attention's whole square, so
    the decoder's pairs are given as t * t here, where the benchmark counts t (t + 1) / 2."""
    batch, src_len, tgt_len = 3, 5, 7
    src = torch.randint(4, VOCAB, (batch, src_len))
    with FlopCounterMode(display=False) as counter:
        logits = tiny_model()(src, torch.ones_like(src, dtype=torch.bool), torch.randint(4, VOCAB, (batch, tgt_len)))[0]
        logits.float().sum().backward()
    lengths = speed.Lengths(batch * src_len, batch * tgt_len, batch * src_len**2, batch * tgt_len**2,
                            batch * src_len * tgt_len)
    per_token = speed.train_flops_per_target_token(TINY, VOCAB, lengths)
    assert per_token * batch * tgt_len == pytest.approx(counter.get_total_flops(), rel=1e-9)


def test_corpus_lengths_count_eos_and_attention_pairs():
    lengths = speed.corpus_lengths(np.array([2, 0]), np.array([3, 1]))  # pieces; + EOS: (3, 1) and (4, 2)
    assert lengths == speed.Lengths(src=4, tgt=6, src_pairs=9 + 1, tgt_pairs=10 + 3, cross_pairs=12 + 2)
    longer = speed.corpus_lengths(np.array([5, 3]), np.array([7, 3]))
    assert (speed.train_flops_per_target_token(TINY, VOCAB, longer)
            > speed.train_flops_per_target_token(TINY, VOCAB, lengths))
    assert "FLOPs per target token" in speed.flops_formula(TINY, VOCAB, lengths)


def test_base_preset_is_the_wmt_recipes_model():
    recipe = yaml.safe_load((ROOT / "recipes/wmt/transformer-base.yaml").read_text(encoding="utf-8"))
    model, train, base = recipe["model"], recipe["train"], speed.PRESETS["base"]
    assert (model["encoder_layers"], model["decoder_layers"]) == (base.layers, base.layers)
    assert (model["d_model"], model["heads"], model["ffn"]) == (base.d_model, base.heads, base.ffn)
    assert (model["norm"], model["activation"], model["dropout"]) == (base.norm, base.activation, base.dropout)
    assert model["attention_dropout"] == 0.0 and model["share_embeddings"] and model["tie_output"]
    assert (train["label_smoothing"], train["clip_norm"]) == (base.label_smoothing, base.clip_norm)


def test_both_tools_get_the_same_batches_and_model(tmp_path):
    args = speed.parse_args(["--device", "cuda", "--preset", "base", "--batch-tokens", "25000", "--accumulate", "4"])
    command = speed.nmtkit_command(args, tmp_path, 10, "bf16")
    settings = dict(command[index + 1].split("=", 1) for index, word in enumerate(command) if word == "--set")
    assert settings["train.batch_tokens"] == "6250" and settings["train.update_freq"] == "4"
    assert settings["model.norm"] == "post" and settings["model.d_model"] == "512" and "--threads" not in command
    config = speed.onmt_config({"src": "s", "tgt": "t", "vocab": "v"}, tmp_path, args, 10)
    assert (config["batch_size"], config["accum_count"], config["hidden_size"]) == (6250, [4], 512)
    assert (config["model_dtype"], config["gpu_ranks"], config["max_grad_norm"]) == ("fp16", [0], 0.0)
    assert args.peak_tflops == speed.H200_PEAK_TFLOPS
    assert speed.parse_args([]).peak_tflops is None
    with pytest.raises(SystemExit):
        speed.parse_args(["--batch-tokens", "25000", "--accumulate", "3"])


ONMT_LOG = """[2026-11-28 10:00:00,000 INFO] * number of parameters: 44140544
[2026-11-28 10:00:01,000 INFO] Step 10/   30; acc: 3.1; ppl: 8000.0; xent: 9.0; lr: 0.00001; sents:    400; \
bsz: 1500/1600/10; 9000/8000 tok/s;      2 sec;
[2026-11-28 10:00:03,000 INFO] Step 20/   30; acc: 3.3; ppl: 7000.0; xent: 8.9; lr: 0.00002; sents:    400; \
bsz: 1500/1600/10; 12000/16000 tok/s;      4 sec;
[2026-11-28 10:00:05,000 INFO] Step 30/   30; acc: 3.5; ppl: 6000.0; xent: 8.8; lr: 0.00003; sents:    400; \
bsz: 1500/1600/10; 12000/16000 tok/s;      6 sec;
"""


def test_onmt_log_gives_tokens_and_seconds_per_interval():
    intervals, parameters = speed.parse_onmt_log(ONMT_LOG, interval=10, accumulate=4)
    assert parameters == 44140544
    assert [step for step, _, _ in intervals] == [10, 20, 30]
    step, tokens, seconds = intervals[1]
    assert tokens == 1600 * 10 * 4 and seconds == pytest.approx(tokens / 16000)


def test_onmt_loader_share_takes_the_timed_updates_waits():
    waits = [5.0] * 10 + [0.1] * 20  # the first interval's waits (startup) are not timed
    assert speed.onmt_loader_share(waits, 10, 30, wall_seconds=8.0) == pytest.approx(2.0 / 8.0)
    assert speed.onmt_loader_share(waits[:25], 10, 30, wall_seconds=8.0) is None


def test_nmtkit_loader_share_is_the_wall_time_outside_updates():
    records = [{"step": 10, "tgt_tokens": 1000, "tgt_tokens_per_s": 500.0, "elapsed": 5.0},
               {"step": 20, "tgt_tokens": 4000, "tgt_tokens_per_s": 1000.0, "elapsed": 10.0},
               {"step": 30, "tgt_tokens": 4000, "tgt_tokens_per_s": 1000.0, "elapsed": 15.0}]
    row = speed.summarise_nmtkit(records, "bf16 autocast", 20.0, 1000)
    assert row.wall_tps == pytest.approx(800.0) and row.update_tps == pytest.approx(1000.0)
    assert row.loader_share == pytest.approx(0.2) and row.steps == 20


def test_onmt_corpus_is_nmtkits_token_arrays_as_pieces(tmp_path):
    lines = ["the cat sees a dog", "a big red fish", "the bird eats"]
    subword = train_subword(lines * 5, DataConfig(subword="word", vocab_size=16), 16)
    (tmp_path / "spm.model").write_bytes(subword.proto)
    ids = subword.encode(lines)
    for side in ("src", "tgt"):
        TokenArray.from_lists(ids).save(tmp_path / f"train.{side}")
    paths = speed.encode_corpus(tmp_path, tmp_path)
    written = Path(paths["tgt"]).read_text(encoding="utf-8").splitlines()
    assert [line.split() for line in written] == [subword.pieces(line) for line in lines]
    vocab = Path(paths["vocab"]).read_text(encoding="utf-8").split()
    assert len(vocab) == subword.vocab_size - 4 and "<unk>" not in vocab  # OpenNMT-py adds its 4 specials
