"""Alignment error rate on the Bible test book (Acts): attention of each Transformer layer (and of each head of
the best layer) against eflomal (Östling & Tiedemann 2016), all on the Strong's-number gold of
recipes/bible/gold.py.

eflomal is trained on the training text plus the test text (word-tokenized and lowercased, as statistical
aligners are usually run), in both directions, and symmetrized with grow-diag-final-and.

    python benchmarks/align_aer.py --model runs/bible-es-en/transformer/model.pt --data data/bible/raw
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from nmtkit.align.attention import word_attentions
from nmtkit.align.command import read_words
from nmtkit.align.links import alignment_error, hard_links, read_pharaoh, source_links, symmetrize
from nmtkit.checkpoint.payload import load_checkpoint, restore_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "bible"))
from gold import tokenize  # noqa: E402


def attention_rows(model_path: Path, data: Path, gold, heads: bool) -> list[tuple[str, dict, float]]:
    loaded = restore_model(load_checkpoint(model_path), torch.device("cpu"))
    src, tgt = read_words(data / "test.words.es"), read_words(data / "test.words.en")
    layers = loaded.config.model.decoder_layers
    rows = []
    for layer in range(layers):
        rows.append(_attention_row(loaded, src, tgt, gold, layer, None))
    best = min(range(layers), key=lambda layer: rows[layer][1]["aer"])
    rows += _one_model_symmetrized(loaded, src, tgt, gold, best)
    if heads:
        rows += [_attention_row(loaded, src, tgt, gold, best, head) for head in range(loaded.config.model.heads)]
    return rows


def _one_model_symmetrized(loaded, src, tgt, gold, layer: int) -> list[tuple[str, dict, float]]:
    """Argmax per target word and argmax per source word of the same attention, symmetrized."""
    start = time.perf_counter()
    loaded.model.select_attention(layer, None)
    matrices = list(word_attentions(loaded, src, tgt, torch.device("cpu")))
    by_target, by_source = [hard_links(m) for m in matrices], [source_links(m) for m in matrices]
    seconds = time.perf_counter() - start
    rows = [(f"attention layer {layer} argmax per source word", alignment_error(by_source, gold).as_dict(), seconds)]
    for method in ("intersection", "grow-diag-final-and"):
        links = [symmetrize(t, s, method) for t, s in zip(by_target, by_source)]
        rows.append((f"attention layer {layer} both argmaxes, {method}", alignment_error(links, gold).as_dict(),
                     seconds))
    return rows


def _attention_row(loaded, src, tgt, gold, layer: int, head: int | None) -> tuple[str, dict, float]:
    start = time.perf_counter()
    loaded.model.select_attention(layer, head)
    links = [hard_links(matrix) for matrix in word_attentions(loaded, src, tgt, torch.device("cpu"))]
    name = f"attention layer {layer}" + (" mean of heads" if head is None else f" head {head}")
    return name, alignment_error(links, gold).as_dict(), time.perf_counter() - start


def eflomal_rows(data: Path, gold) -> list[tuple[str, dict, float]]:
    import eflomal

    def lines(name: str) -> list[str]:
        return [" ".join(tokenize(line)).lower() for line in (data / name).read_text(encoding="utf-8").splitlines()]

    test_src = [line.lower() for line in (data / "test.words.es").read_text(encoding="utf-8").splitlines()]
    test_tgt = [line.lower() for line in (data / "test.words.en").read_text(encoding="utf-8").splitlines()]
    src, tgt = lines("train.es") + test_src, lines("train.en") + test_tgt
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        forward_path, reverse_path = Path(tmp) / "fwd", Path(tmp) / "rev"
        eflomal.Aligner().align(src, tgt, links_filename_fwd=str(forward_path), links_filename_rev=str(reverse_path))
        forward = _links(forward_path)[-len(test_src):]
        reverse = _links(reverse_path)[-len(test_src):]
    seconds = time.perf_counter() - start
    return [(f"eflomal {name}", alignment_error(links, gold).as_dict(), seconds)
            for name, links in (("forward", forward), ("reverse", reverse),
                                *((method, [symmetrize(f, r, method) for f, r in zip(forward, reverse)])
                                  for method in ("intersection", "union", "grow-diag-final-and")))]


def _links(path: Path) -> list[set[tuple[int, int]]]:
    return [{tuple(map(int, link.split("-"))) for link in line.split()}
            for line in path.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("runs/bible-es-en/transformer/model.pt"))
    parser.add_argument("--data", type=Path, default=Path("data/bible/raw"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-heads", action="store_true", help="skip the per-head rows of the best layer")
    parser.add_argument("--no-eflomal", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gold = read_pharaoh(args.data / "test.gold")
    rows = attention_rows(args.model, args.data, gold, not args.no_heads)
    if not args.no_eflomal:
        rows += eflomal_rows(args.data, gold)
    print(f"{'aligner':56} {'precision':>9} {'recall':>7} {'AER':>7} {'seconds':>8}")
    for name, scores, seconds in rows:
        print(f"{name:56} {scores['precision']:9.3f} {scores['recall']:7.3f} {scores['aer']:7.3f} {seconds:8.1f}")


if __name__ == "__main__":
    main()
