"""Translate a file of tokens with a CTranslate2 model directory and CTranslate2's defaults (`translate_file`).

For benchmarks/translate_speed.py: the model converted from OpenNMT-py by `ct2-opennmt-py-converter`, run as a
CTranslate2 user would run it, with batches of 32 sentences, length penalty 1 and at most 256 output tokens.

Usage: python benchmarks/ct2_translate.py MODEL_DIR INPUT OUTPUT [--beam 5] [--threads 2] [--inter-threads 1]
"""

from __future__ import annotations

import argparse

import ctranslate2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="CTranslate2 model directory")
    parser.add_argument("input", help="source tokens, one sentence per line")
    parser.add_argument("output", help="output tokens, one sentence per line")
    parser.add_argument("--beam", type=int, default=5, help="beam size (1: greedy)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    parser.add_argument("--inter-threads", type=int, default=1,
                        help="batches translated at once (CTranslate2 workers), each with threads/N threads")
    args = parser.parse_args()
    translator = ctranslate2.Translator(args.model, device="cpu", inter_threads=args.inter_threads,
                                        intra_threads=max(1, args.threads // args.inter_threads))
    translator.translate_file(args.input, args.output, beam_size=args.beam)


if __name__ == "__main__":
    main()
