"""Terminology constraints on real data: Acts (the Bible recipe's test book), terms from the Strong's-number gold.

For every verse, each Spanish word that looks like a proper name (capitalized, not the verse's first word nor the
first after . ? ! : ¿ ¡ or an opening quote, where sentences and quoted speech start) and has a sure gold link
(recipes/bible/gold.py) to a capitalized English word makes that English word a constraint of the verse ("Pablo"
-> "Paul", "Jerusalén" -> "Jerusalem", "Dios" -> "God"). The script writes them as `nmtkit translate
--input-format jsonl` input (--out/constraints.jsonl), translates the test set with one model, in one process,
without and then with the constraints (beam --beam both times, the checkpoint's other decode settings), and prints:
- the share of constraint terms present in the output (as whole words, case-sensitive), without and with;
- lines whose constraints could not be met (translated without them, with a warning);
- BLEU and chrF (sacrebleu, against test.en) without and with;
- sentences per second of both searches (each the fastest of --repeats runs, taken in turns), and their ratio.

Usage: python benchmarks/experiments/constraints_eval.py -m runs/bible-es-en/transformer/model.pt
       [--data data/bible/raw] [--beam 5] [--threads 2] [--repeats 1] [--limit N] [--out runs/constraints-eval] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import sacrebleu
import torch

from nmtkit.decoding.inputs import Request
from nmtkit.runtime.device import set_threads

SENTENCE_STARTS_AFTER = {".", "?", "!", ":", "¿", "¡", "«", "“", '"'}  # quoted speech starts capitalized
log = logging.getLogger("constraints_eval")


def is_capitalized(word: str) -> bool:
    return word[:1].isupper()


def verse_terms(src_words: list[str], tgt_words: list[str], gold: str) -> list[str]:
    """The English words that the verse's name-like Spanish words are surely linked to, in order, once each."""
    terms: list[str] = []
    for link in gold.split():
        if "-" not in link:  # possible links (ipj) are left out
            continue
        source, target = map(int, link.split("-"))
        starts = source == 0 or src_words[source - 1] in SENTENCE_STARTS_AFTER
        name_like = not starts and is_capitalized(src_words[source])
        if name_like and is_capitalized(tgt_words[target]) and tgt_words[target] not in terms:
            terms.append(tgt_words[target])
    return terms


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def build_requests(data: Path, limit: int = 0) -> tuple[list[Request], list[str]]:
    """(one request per test verse, its terms as constraints; the references)."""
    sources, references = read(data / "test.es"), read(data / "test.en")
    src_words, tgt_words = read(data / "test.words.es"), read(data / "test.words.en")
    gold = read(data / "test.gold")
    count = limit or len(sources)
    requests = [Request(sources[index], tuple(verse_terms(src_words[index].split(), tgt_words[index].split(),
                                                          gold[index])))
                for index in range(count)]
    return requests, references[:count]


def write_jsonl(requests: list[Request], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": request.text, "constraints": list(request.constraints)},
                                       ensure_ascii=False) + "\n" for request in requests), encoding="utf-8")


def present(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None


def term_share(requests: list[Request], outputs: list[str]) -> float:
    pairs = [(term, output) for request, output in zip(requests, outputs) for term in request.constraints]
    return 100.0 * sum(present(term, output) for term, output in pairs) / max(1, len(pairs))


class WarningCounter(logging.Handler):
    """Counts the lines whose constraints could not be met (nmtkit.translate warns once per such line)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.unmet = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.unmet += "constraints cannot all be met" in record.getMessage()


@dataclass
class Run:
    outputs: list[str]
    seconds: float


def timed(translator, requests: list[Request]) -> Run:
    start = time.perf_counter()
    outputs = [hyps[0][0] for hyps in translator.translate_requests(requests)]
    return Run(outputs, time.perf_counter() - start)


def compare(translator, requests: list[Request], repeats: int) -> tuple[Run, Run]:
    """Plain and constrained search of the same lines, in turns; each keeps its fastest run."""
    plain_requests = [replace(request, constraints=()) for request in requests]
    plain = constrained = None
    for _ in range(repeats):
        run = timed(translator, plain_requests)
        plain = run if plain is None or run.seconds < plain.seconds else plain
        run = timed(translator, requests)
        constrained = run if constrained is None or run.seconds < constrained.seconds else constrained
    return plain, constrained


def report(requests: list[Request], references: list[str], plain: Run, constrained: Run, unmet: int) -> dict:
    lines = len(requests)
    scores = {}
    for name, run in (("plain", plain), ("constrained", constrained)):
        scores[name] = {"term_share": term_share(requests, run.outputs),
                        "bleu": sacrebleu.corpus_bleu(run.outputs, [references]).score,
                        "chrf": sacrebleu.corpus_chrf(run.outputs, [references]).score,
                        "seconds": run.seconds, "sentences_per_s": lines / run.seconds}
    return {"lines": lines, "lines_with_terms": sum(bool(request.constraints) for request in requests),
            "terms": sum(len(request.constraints) for request in requests), "unmet_lines": unmet, **scores,
            "time_ratio": constrained.seconds / plain.seconds}


def render(result: dict) -> str:
    rows = [f"{result['lines']} lines, {result['lines_with_terms']} with terms, {result['terms']} terms; "
            f"{result['unmet_lines']} lines whose constraints could not be met",
            "search       terms present   BLEU    chrF    sentences/s",
            *(f"{name:<12} {result[name]['term_share']:>12.1f}%  {result[name]['bleu']:>6.2f}  "
              f"{result[name]['chrf']:>6.2f}  {result[name]['sentences_per_s']:>10.2f}"
              for name in ("plain", "constrained")),
            f"constrained / plain time: {result['time_ratio']:.2f}x"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    from nmtkit.config.sections import DecodeConfig
    from nmtkit.decoding.ensemble import load_models
    from nmtkit.translate import Translator
    from nmtkit.translate.torch_engine import TorchEngine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True, type=Path, help="checkpoint (Spanish -> English)")
    parser.add_argument("--data", type=Path, default=Path("data/bible/raw"),
                        help="test.es, test.en, test.words.es, test.words.en and test.gold (recipes/bible/gold.py)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="time each search this many times, keep the fastest")
    parser.add_argument("--limit", type=int, default=0, help="the first N verses only (0 = all)")
    parser.add_argument("--out", type=Path, default=Path("runs/constraints-eval"),
                        help="writes constraints.jsonl, plain.en and constrained.en here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    set_threads(args.threads)
    requests, references = build_requests(args.data, args.limit)
    write_jsonl(requests, args.out / "constraints.jsonl")
    loaded = load_models([args.model], torch.device("cpu"))
    decode = DecodeConfig(**{**vars(loaded.config.decode), "beam": args.beam, "nbest": 1})
    counter = WarningCounter()
    logging.getLogger("nmtkit").addHandler(counter)
    plain, constrained = compare(Translator(TorchEngine(loaded, decode, torch.device("cpu"))), requests, args.repeats)
    unmet = counter.unmet // args.repeats
    for name, run in (("plain", plain), ("constrained", constrained)):
        (args.out / f"{name}.en").write_text("".join(line + "\n" for line in run.outputs), encoding="utf-8")
    result = report(requests, references, plain, constrained, unmet)
    print(json.dumps(result) if args.json else render(result))
    return result


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(message)s")
    main()
