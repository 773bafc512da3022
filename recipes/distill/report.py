"""The distillation recipe's table: every model timed and scored in one run, on the same input and threads.

python recipes/distill/report.py --src test.es --ref test.en --row "LABEL=PATH" [--row ...] [--threads 2]
    [--lines N] [--filter filter.json] [--out DIR] [--lang en] [--test-name "Acts, KJV reference"]
PATH is a checkpoint, several checkpoints separated by spaces (an ensemble), or a directory written by nmtkit
export. Each model translates --src (its first N lines with --lines N) twice, beam 5 and greedy, with
`nmtkit translate --threads T`; sentences/s = lines / (the command's wall time - the wall time of the same command
on the first line alone), so interpreter start and model load are left out, as in benchmarks/translate_speed.py.
BLEU and chrF (nmtkit evaluate --lang LANG: sacrebleu's defaults, the language's tokenizer) are against --ref.
Size: the bytes on disk of the checkpoint or of the export directory (subword models included). Prints a Markdown
table (the CPU named) and writes DIR/results.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

SEARCHES = {"beam 5": ["--beam", "5"], "greedy": ["--greedy"]}


def size_mb(paths: list[Path]) -> float:
    files = [item for path in paths for item in ([path] if path.is_file() else path.rglob("*")) if item.is_file()]
    return sum(item.stat().st_size for item in files) / 1e6


def timed(command: list[str], output: Path | None = None) -> float:
    """Wall seconds of `command`, its stdout written to `output` (or dropped)."""
    start = time.perf_counter()
    with open(output or "/dev/null", "w", encoding="utf-8") as handle:
        subprocess.run(command, stdout=handle, check=True)
    return time.perf_counter() - start


def scores(hyp: Path, ref: Path, lang: str) -> dict:
    found = json.loads(subprocess.run(["nmtkit", "evaluate", "--hyp", str(hyp), "--ref", str(ref), "--lang", lang,
                                       "--json"], capture_output=True, text=True, check=True).stdout)
    return {"bleu": round(found["bleu"]["score"], 2), "chrf": round(found["chrf"]["score"], 2)}


def measure(paths: list[Path], src: Path, ref: Path, threads: int, work: Path, lang: str = "en") -> dict:
    """Size, and per search: sentences/s, BLEU and chrF."""
    models = [arg for path in paths for arg in ("-m", str(path))]
    first = work / "first.src"
    first.write_text(src.read_text(encoding="utf-8").splitlines(keepends=True)[0], encoding="utf-8")
    lines = sum(1 for _ in open(src, encoding="utf-8"))
    result = {"size_mb": round(size_mb(paths), 1)}
    for name, search in SEARCHES.items():
        command = ["nmtkit", "--quiet", "translate", *models, *search, "--threads", str(threads), "--input"]
        hyp = work / f"{name.replace(' ', '')}.hyp"
        seconds = timed([*command, str(src)], hyp) - timed([*command, str(first)])
        result[name] = {"sentences_per_s": round(lines / max(seconds, 1e-3), 1), **scores(hyp, ref, lang)}
    return result


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def table(rows: dict[str, dict], threads: int, lines: int, filtered: dict | None,
          test_name: str = "Acts, KJV reference") -> str:
    head = ["| model | MB on disk | BLEU beam 5 | chrF beam 5 | BLEU greedy | sentences/s beam 5 | "
            "sentences/s greedy |", "|---|---|---|---|---|---|---|"]
    body = [f"| {label} | {row['size_mb']} | {row['beam 5']['bleu']} | {row['beam 5']['chrf']} | "
            f"{row['greedy']['bleu']} | {row['beam 5']['sentences_per_s']} | {row['greedy']['sentences_per_s']} |"
            for label, row in rows.items()]
    notes = [f"\n{lines} test sentences ({test_name}), {threads} threads, {cpu_name()}."]
    if filtered:
        notes.append(f"Distilled pairs: {filtered['kept']} of {filtered['read']} kept (removed: "
                     + ", ".join(f"{count} {reason}" for reason, count in filtered["removed"].items()) + ").")
    return "\n".join(head + body + notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    parser.add_argument("--row", action="append", required=True, help="LABEL=PATH (repeat)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lines", type=int, default=0, help="the first N test lines (0: all)")
    parser.add_argument("--filter", type=Path, help="filter-distilled's JSON report, summarised under the table")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--lang", default="en", help="the target language: its BLEU tokenizer (nmtkit evaluate)")
    parser.add_argument("--test-name", default="Acts, KJV reference", help="what the test set is, under the table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        src, ref = args.src, args.ref
        if args.lines:
            src, ref = work / "test.src", work / "test.ref"
            for source, target in ((args.src, src), (args.ref, ref)):
                kept = source.read_text(encoding="utf-8").splitlines(keepends=True)[: args.lines]
                target.write_text("".join(kept), encoding="utf-8")
        rows = {label: measure([Path(path) for path in paths.split()], src, ref, args.threads, work,
                                 args.lang)
                for label, _, paths in (row.partition("=") for row in args.row)}
        lines = sum(1 for _ in open(src, encoding="utf-8"))
    filtered = json.loads(args.filter.read_text(encoding="utf-8")) if args.filter else None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"threads": args.threads, "cpu": cpu_name(), "lines": lines,
                                                       "models": rows}, indent=2) + "\n", encoding="utf-8")
    print(table(rows, args.threads, lines, filtered, args.test_name), end="")


if __name__ == "__main__":
    main()
