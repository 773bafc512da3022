"""Summarise a Bible recipe run: test BLEU (1 and 2 references), chrF, training and translation speed.

python recipes/bible/report.py --run RUN_DIR --data RAW_DIR --translate-start T0 --translate-end T1 --beam K
prints a Markdown table and writes RUN_DIR/results.json;
python recipes/bible/report.py --combine RUN_DIR [RUN_DIR ...] prints one table of several runs' results.json,
with each run's output/reference length ratio, repeated trigrams (a trigram's second and later occurrences within
an output line: how much a model loops), best dev BLEU and alignment error rate (test.align.json) beside them.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import yaml


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def collect(args: argparse.Namespace) -> dict:
    summary = load(args.run / "train.summary.json")
    one, two = load(args.run / "test.kjv.json"), load(args.run / "test.kjv+web.json")
    sentences = sum(1 for _ in open(args.data / "test.es", encoding="utf-8"))
    hyp_tokens = sum(len(line.split()) for line in open(args.run / "test.hyp", encoding="utf-8"))
    seconds = args.translate_end - args.translate_start
    model = yaml.safe_load((args.run / "config.yaml").read_text(encoding="utf-8"))["model"]["name"]
    return {"model": model, "parameters": summary["parameters"], "train_steps": summary["steps"],
            "train_epochs": summary["epochs"], "train_seconds": summary["elapsed_seconds"],
            "train_tgt_tokens_per_s": summary["tgt_tokens_per_s"], "threads": summary["threads"],
            "precision": summary["precision"], "device": summary["device"],
            "test_sentences": sentences, "beam": args.beam,
            "bleu_kjv": round(one["bleu"]["score"], 2), "bleu_kjv_web": round(two["bleu"]["score"], 2),
            "chrf_kjv": round(one["chrf"]["score"], 2), "bleu_signature": one["bleu"]["signature"],
            "translate_seconds": round(seconds, 1), "translate_sentences_per_s": round(sentences / seconds, 2),
            "translate_words_per_s": round(hyp_tokens / seconds, 1)}


def repeated_trigrams(lines: list[str]) -> int:
    """Occurrences of a word trigram beyond its first within the same line, summed over lines."""
    total = 0
    for line in lines:
        words = line.split()
        total += sum(count - 1 for count in Counter(zip(words, words[1:], words[2:])).values())
    return total


def details(run: Path) -> dict:
    """What a zoo comparison needs beyond results.json: output length, best dev score, attention AER."""
    bleu = load(run / "test.kjv.json")["bleu"]
    align = run / "test.align.json"  # empty when the model has no attention (run.sh redirects align's output)
    hyp = (run / "test.hyp").read_text(encoding="utf-8").splitlines()
    return {"length_ratio": round(bleu["sys_len"] / bleu["ref_len"], 3), "repeats": repeated_trigrams(hyp),
            "best_dev": load(run / "train.summary.json").get("best"),
            "aer": load(align)["forward"]["aer"] if align.exists() and align.stat().st_size else None}


def row(results: dict) -> str:
    return (f"| {results['model']} | {results['parameters'] / 1e6:.1f}M | {results['train_steps']} | "
            f"{results['train_epochs']} | {results['train_seconds'] / 60:.0f} min | "
            f"{results['train_tgt_tokens_per_s']:.0f} | {results['bleu_kjv']} | {results['bleu_kjv_web']} | "
            f"{results['chrf_kjv']} | {results['translate_sentences_per_s']} sent/s |")


def zoo_row(results: dict) -> str:
    aer = "—" if results["aer"] is None else f"{results['aer']:.3f}"
    return f"{row(results)} {results['length_ratio']:.3f} | {results['repeats']} | {results['best_dev']} | {aer} |"


def table(runs: list[dict], zoo: bool = False) -> str:
    header = ("| model | params | steps | epochs | train time | train tgt tok/s | test BLEU (KJV) | BLEU (KJV+WEB) "
              f"| chrF (KJV) | translate (beam {runs[0]['beam']}) |")
    rule = "|---" * 10 + "|"
    if zoo:
        header, rule = header + " length ratio | repeated trigrams | best dev | AER |", rule + "---|---|---|---|"
    rows = "\n".join((zoo_row if zoo else row)(results) for results in runs)
    return f"{header}\n{rule}\n{rows}\n\nBLEU signature: {runs[0]['bleu_signature']}"


def combine(run_dirs: list[Path]) -> str:
    done = [run for run in run_dirs if (run / "results.json").exists()]
    if not done:
        raise SystemExit("error: none of the run directories has a results.json")
    return table([{**load(run / "results.json"), **details(run)} for run in done], zoo=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--combine", type=Path, nargs="+", help="run directories to tabulate together")
    parser.add_argument("--run", type=Path)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--translate-start", type=float)
    parser.add_argument("--translate-end", type=float)
    parser.add_argument("--beam", type=int)
    args = parser.parse_args()
    if args.combine:
        print(combine(args.combine))
        return
    if None in (args.run, args.data, args.translate_start, args.translate_end, args.beam):
        parser.error("--run, --data, --translate-start, --translate-end and --beam are required without --combine")
    results = collect(args)
    (args.run / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(table([results]))


if __name__ == "__main__":
    main()
