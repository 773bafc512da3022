"""Build a small OPUS-MT-style MarianMTModel in Hugging Face format, offline, as a stand-in for a downloaded one.

What `Helsinki-NLP/opus-mt-*` directories hold, made here with transformers' and SentencePiece's own code: two
SentencePiece unigram models (source.spm, target.spm) trained on the training text, one vocab.json over both
("</s>" 0, "<unk>" 1, their pieces, "<pad>" last, as OPUS-MT's converter lays it out), a MarianConfig (post-norm,
swish, scaled embeddings, pad as the decoder's start, bad_words_ids banning pad) with random weights, and, with
--steps N, N updates of teacher-forced training in plain PyTorch (AdamW, inverse square-root schedule) so that
the model translates something before nmtkit fine-tunes it. Everything is written with save_pretrained.

    python recipes/pretrained/build_hf.py --train-src train.en --train-tgt train.es --out hf [--steps 300]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import time
from pathlib import Path

import sentencepiece as spm
import torch


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   minloglevel=2, num_threads=2)
    return model.getvalue()


def write_tokenizer(out: Path, sources: list[str], targets: list[str], vocab_size: int) -> dict[str, int]:
    """source.spm, target.spm and vocab.json; returns the vocabulary."""
    pieces = ["</s>", "<unk>"]
    for name, lines in (("source.spm", sources), ("target.spm", targets)):
        proto = train_spm(lines, vocab_size)
        (out / name).write_bytes(proto)
        processor = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [processor.id_to_piece(index) for index in range(3, len(processor))]
    vocab = {piece: index for index, piece in enumerate(dict.fromkeys([*pieces, "<pad>"]))}
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return vocab


def build_model(vocab: dict[str, int], args):
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    pad = vocab["<pad>"]
    config = MarianConfig(vocab_size=len(vocab), d_model=args.d_model, encoder_layers=args.layers,
                          decoder_layers=args.layers, encoder_attention_heads=args.heads,
                          decoder_attention_heads=args.heads, encoder_ffn_dim=4 * args.d_model,
                          decoder_ffn_dim=4 * args.d_model, activation_function="swish", scale_embedding=True,
                          max_position_embeddings=256, pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
                          forced_eos_token_id=0, dropout=0.1)
    torch.manual_seed(args.seed)
    model = MarianMTModel(config)
    model.generation_config = GenerationConfig(bad_words_ids=[[pad]], pad_token_id=pad, eos_token_id=0,
                                               decoder_start_token_id=pad, forced_eos_token_id=0, num_beams=4,
                                               max_length=256)
    return model


def pretrain(model, tokenizer, pairs: list[tuple[str, str]], steps: int, batch: int, seed: int) -> float:
    """`steps` updates on batches of `batch` pairs drawn with `seed`; returns the last 20 updates' mean loss."""
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, (warmup / (step + 1)) ** 0.5))
    model.train()
    losses = []
    for _ in range(steps):
        chosen = rng.sample(pairs, batch)
        encoded = tokenizer([source for source, _ in chosen], text_target=[target for _, target in chosen],
                            return_tensors="pt", padding=True, truncation=True, max_length=64)
        encoded["labels"][encoded["labels"] == tokenizer.pad_token_id] = -100
        loss = model(**encoded).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    return sum(losses[-20:]) / max(1, len(losses[-20:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-src", type=Path, required=True)
    parser.add_argument("--train-tgt", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--vocab", type=int, default=4000, help="pieces of each SentencePiece model")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300, help="updates of teacher-forced training (0: random)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    from transformers import MarianTokenizer

    sources = args.train_src.read_text(encoding="utf-8").splitlines()
    targets = args.train_tgt.read_text(encoding="utf-8").splitlines()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    vocab = write_tokenizer(args.out, sources, targets, args.vocab)
    tokenizer = MarianTokenizer(str(args.out / "source.spm"), str(args.out / "target.spm"),
                                str(args.out / "vocab.json"))
    model = build_model(vocab, args)
    start = time.perf_counter()
    loss = pretrain(model, tokenizer, list(zip(sources, targets)), args.steps, args.batch, args.seed) \
        if args.steps else None
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(json.dumps({"out": str(args.out), "vocab": len(vocab), "parameters": model.num_parameters(),
                      "steps": args.steps, "loss": loss, "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
