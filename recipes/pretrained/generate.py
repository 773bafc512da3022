"""Translate a file with transformers' own generate (greedy, or beam search with early stopping), decoded with
the checkpoint's own tokenizer: what the imported nmtkit checkpoint's translations are compared with.

    python recipes/pretrained/generate.py --model hf --input test.en [--beam 1] [--max-new-tokens 64] > hf.hyp
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a MarianMTModel directory")
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="output tokens, EOS included")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    args = parser.parse_args()
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(args.threads)
    model = MarianMTModel.from_pretrained(args.model).eval()
    tokenizer = MarianTokenizer.from_pretrained(args.model)
    lines = args.input.read_text(encoding="utf-8").splitlines()
    for start in range(0, len(lines), args.batch):
        batch = tokenizer(lines[start:start + args.batch], return_tensors="pt", padding=True, truncation=True,
                          max_length=model.config.max_position_embeddings)  # as nmtkit truncates a source
        with torch.no_grad():
            output = model.generate(**batch, num_beams=args.beam, do_sample=False, early_stopping=True,
                                    max_new_tokens=args.max_new_tokens)
        for text in tokenizer.batch_decode(output, skip_special_tokens=True):
            sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
