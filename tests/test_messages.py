"""recipes/messages: the .mo reader, the pairs and their counts, the split, the errors, the roundtrip check, and
run.sh with a stand-in for nmtkit.

Catalogs are written in tmp_path by `mo_bytes`, a small writer of the GNU .mo format in either byte order.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from scripts import ROOT, load_script, recipe_path
from training_runs import copy_task

extract = load_script("recipes/messages/extract.py", "messages_extract")
roundtrip = load_script("recipes/messages/roundtrip.py", "messages_roundtrip")

UTF8_HEADER = "Content-Type: text/plain; charset=UTF-8\n"
ARABIC_PLURALS = ("Plural-Forms: nplurals=6; plural=n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 "
                  ": n%100>=11 ? 4 : 5;\n")
TEXT_PAIRS = [  # what the catalog holds must come out byte for byte
    ("File \u201c%s\u201d not found!", "\u627e\u4e0d\u5230\u6587\u4ef6\u201c%s\u201d\uff01"),  # CJK, full width
    ("Cafe\u0301 menu", "Men\u0303u del cafe\u0301"),  # NFD: combining accents, not NFC
    ("Hello world", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd"),  # Hebrew
    ("Save %s", "\u200f\u062d\u0641\u0638 %s"),  # Arabic after a right-to-left mark
    ("  Open  ", "  \u958b\u304f\u3000"),  # leading/trailing spaces, an ideographic space
    ("Name:\t%s", "\u540d\u524d\uff1a\t%s"),  # a tab
    ("Done", "\u0e40\u0e2a\u0e23\u0e47\u0e08"),  # Thai
]


def mo_bytes(entries: list[tuple[str, str]], order: str = "<", encoding: str = "utf-8", revision: int = 0,
             system_dependent: int = 0) -> bytes:
    """A .mo file of (key, value) entries, keys sorted as msgfmt writes them, without a hash table."""
    entries = sorted((key.encode(encoding), value.encode(encoding)) for key, value in entries)
    count, header_size = len(entries), 28 if revision & 0xFFFF == 0 else 48
    originals, translations = header_size, header_size + 8 * count
    strings, descriptors = b"", {0: b"", 1: b""}
    start = translations + 8 * count
    for column in (0, 1):
        for entry in entries:
            descriptors[column] += struct.pack(order + "2I", len(entry[column]), start + len(strings))
            strings += entry[column] + b"\x00"
    header = struct.pack(order + "7I", 0x950412DE, revision, count, originals, translations, 0, 0)
    if header_size == 48:
        header += struct.pack(order + "5I", 0, 0, system_dependent, 0, 0)
    return header + descriptors[0] + descriptors[1] + strings


def write_catalog(locale_dir: Path, name: str, entries: list[tuple[str, str]], header: str = UTF8_HEADER,
                  **options) -> Path:
    path = locale_dir / "xx_YY" / "LC_MESSAGES" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mo_bytes([("", header), *entries], **options))
    return path


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "recipes/messages/extract.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def extract_dir(locale_dir: Path, out: Path, *options: str) -> dict:
    """Run the extractor in this process; returns stats.json."""
    assert extract.main(["--lang", "xx_YY", "--locale-dir", str(locale_dir), "--out", str(out), *options]) == 0
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def read_split(out: Path, name: str, code: str = "xx") -> list[tuple[bytes, bytes]]:
    english, translated = ((out / f"{name}.{lang}").read_bytes().split(b"\n") for lang in ("en", code))
    assert english[-1] == translated[-1] == b""  # every line ends in "\n"
    assert len(english) == len(translated)
    return list(zip(english[:-1], translated[:-1]))


def all_pairs(out: Path) -> list[tuple[bytes, bytes]]:
    return [pair for name in extract.SPLITS for pair in read_split(out, name)]


@pytest.mark.parametrize("order", ["<", ">"])
def test_pairs_come_out_byte_identical(tmp_path, order):
    write_catalog(tmp_path / "locale", "app.mo", TEXT_PAIRS, order=order)
    extract_dir(tmp_path / "locale", tmp_path / "out")
    expected = {(english.encode(), translated.encode()) for english, translated in TEXT_PAIRS}
    assert set(all_pairs(tmp_path / "out")) == expected


def test_both_byte_orders_parse_alike():
    entries = [("", UTF8_HEADER), *TEXT_PAIRS]
    little, big = (extract.parse_mo(mo_bytes(entries, order=order)) for order in "<>")
    assert little == big
    assert len(little.entries) == len(entries) and little.system_dependent == 0


def test_system_dependent_strings_are_counted(tmp_path):
    write_catalog(tmp_path / "locale", "app.mo", [("Open", "Abrir")], revision=1, system_dependent=3)
    stats = extract_dir(tmp_path / "locale", tmp_path / "out")
    assert stats["removed"]["system_dependent"] == 3 and stats["entries"] == 5


def test_context_is_dropped(tmp_path):
    entries = [("menu\x04Open", "\u6253\u5f00"), ("dialog\x04Open", "\u6253\u5f00"), ("verb\x04Close", "\u5173")]
    write_catalog(tmp_path / "locale", "app.mo", entries)
    stats = extract_dir(tmp_path / "locale", tmp_path / "out")
    assert set(all_pairs(tmp_path / "out")) == {(b"Open", "\u6253\u5f00".encode()), (b"Close", "\u5173".encode())}
    assert stats["removed"]["duplicate"] == 1


@pytest.mark.parametrize(("header", "expected"), [
    ("", [("%d file", "%d Datei"), ("%d files", "%d Dateien")]),  # GNU's default rule: forms 0 and 1
    ("Plural-Forms: nplurals=1; plural=0;\n", [("%d file", "%d Datei"), ("%d files", "%d Datei")]),
    (ARABIC_PLURALS, [("%d file", "%d Dateien"), ("%d files", "%d Dateien 2")]),  # form 0 is for n=0
])
def test_plural_forms_follow_the_catalogs_rule(tmp_path, header, expected):
    write_catalog(tmp_path / "locale", "app.mo", [("%d file\x00%d files", "%d Datei\x00%d Dateien\x00%d Dateien 2")],
                  header=UTF8_HEADER + header)
    extract_dir(tmp_path / "locale", tmp_path / "out")
    assert sorted(all_pairs(tmp_path / "out")) == [(english.encode(), xx.encode()) for english, xx in expected]


def test_a_missing_plural_form_is_counted(tmp_path):
    write_catalog(tmp_path / "locale", "app.mo", [("%d file\x00%d files", "%d Datei"), ("Open", "Offen")])
    stats = extract_dir(tmp_path / "locale", tmp_path / "out")
    assert all_pairs(tmp_path / "out") == [(b"%d file", b"%d Datei"), (b"Open", b"Offen")]
    assert stats["removed"]["plural_form_missing"] == 1


def test_multiline_messages_are_split_or_counted(tmp_path):
    entries = [("Usage: %s\n\n  -h\thelp\n", "\u7528\u6cd5\uff1a%s\n\n  -h\t\u5e2e\u52a9\n"),
               ("one\r\ntwo", "\u4e00\n\u4e8c"),
               ("first\nsecond", "\u4e00\u4e8c")]
    write_catalog(tmp_path / "locale", "app.mo", entries)
    stats = extract_dir(tmp_path / "locale", tmp_path / "out")
    expected = [("Usage: %s", "\u7528\u6cd5\uff1a%s"), ("  -h\thelp", "  -h\t\u5e2e\u52a9"),
                ("one", "\u4e00"), ("two", "\u4e8c")]
    assert sorted(all_pairs(tmp_path / "out")) == sorted((en.encode(), xx.encode()) for en, xx in expected)
    assert stats["removed"]["blank_line"] == 2 and stats["removed"]["multiline_mismatch"] == 1


def test_every_dropped_pair_is_counted_in_stats(tmp_path):
    locale_dir = tmp_path / "locale"
    write_catalog(locale_dir, "a.mo", [("Open", "Abrir"), ("Close", ""), ("OK", "OK"), ("Blank", " \u3000"),
                                       ("Quit", "Salir")])
    write_catalog(locale_dir, "b.mo", [("Open", "Abrir"), ("Open ", "Abrir"), ("Quit", "Cerrar")])
    stats = extract_dir(locale_dir, tmp_path / "out", "--code", "es")
    assert stats["removed"] == {"blank": 1, "duplicate": 1, "empty_translation": 1, "header": 2,
                                "untranslated_copy": 1}
    assert stats["entries"] == 10
    assert stats["catalogs"] == {"read": {"a.mo": "utf-8", "b.mo": "utf-8"}, "skipped": {}}
    kept = [pair for name in extract.SPLITS for pair in read_split(tmp_path / "out", name, "es")]
    assert sorted(kept) == sorted([(b"Open", b"Abrir"), (b"Quit", b"Salir"), (b"Open ", b"Abrir"),
                                   (b"Quit", b"Cerrar")])
    assert sum(stats["pairs"].values()) == len(kept)


def numbered_pairs(count: int) -> list[tuple[str, str]]:
    """`count` pairs over count // 2 English messages, some with several translations (as across catalogs)."""
    return [(f"message {index % (count // 2)}", f"traduccion {index}") for index in range(count)]


def test_split_is_exact_disjoint_ordered_and_deterministic():
    pairs = numbered_pairs(400)
    splits = extract.assign_splits(pairs, dev_size=30, test_size=40)
    assert {name: len(split) for name, split in splits.items()} == {"train": 330, "dev": 30, "test": 40}
    english = {name: {en for en, _ in split} for name, split in splits.items()}
    assert not english["train"] & english["dev"] and not english["train"] & english["test"]
    assert not english["dev"] & english["test"]
    for split in splits.values():
        positions = [pairs.index(pair) for pair in split]
        assert positions == sorted(positions)  # catalog order, not shuffled
    assert extract.assign_splits(pairs, dev_size=30, test_size=40) == splits


def test_small_corpus_gets_ten_percent_each(tmp_path):
    write_catalog(tmp_path / "locale", "app.mo", numbered_pairs(100))
    stats = extract_dir(tmp_path / "locale", tmp_path / "out", "--dev", "20", "--test", "30")
    assert stats["pairs"] == {"train": 80, "dev": 10, "test": 10}
    assert {name: len(read_split(tmp_path / "out", name)) for name in extract.SPLITS} == stats["pairs"]


def test_two_runs_write_the_same_bytes(tmp_path):
    write_catalog(tmp_path / "locale", "a.mo", numbered_pairs(60))
    write_catalog(tmp_path / "locale", "b.mo", TEXT_PAIRS)
    for out in ("one", "two"):
        extract_dir(tmp_path / "locale", tmp_path / out, "--dev", "3", "--test", "3")
    for path in (tmp_path / "one").iterdir():
        assert path.read_bytes() == (tmp_path / "two" / path.name).read_bytes()


def test_other_charsets_are_decoded_and_visual_hebrew_is_skipped(tmp_path):
    locale_dir = tmp_path / "locale"
    write_catalog(locale_dir, "euc.mo", [("Yes", "\u306f\u3044")], header="Content-Type: text/plain; charset=EUC-JP\n",
                  encoding="euc_jp")
    write_catalog(locale_dir, "visual.mo", [("No", "\u05d0\u05dc")],
                  header="Content-Type: text/plain; charset=ISO-8859-8\n", encoding="iso8859_8")
    write_catalog(locale_dir, "unknown.mo", [("No", "Non")], header="Content-Type: text/plain; charset=CHARSET\n")
    stats = extract_dir(locale_dir, tmp_path / "out")
    assert all_pairs(tmp_path / "out") == [(b"Yes", "\u306f\u3044".encode())]
    assert stats["catalogs"]["read"] == {"euc.mo": "euc_jp"}
    assert set(stats["catalogs"]["skipped"]) == {"visual.mo", "unknown.mo"}


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda data: b"\x00\x00\x00\x00" + data[4:], "bad magic number"),
    (lambda data: data[:20], "truncated string table"),
    (lambda data: data[:-10], "truncated string"),
])
def test_a_corrupted_catalog_among_good_ones_is_skipped_with_a_warning(tmp_path, damage, reason):
    locale_dir = tmp_path / "locale"
    write_catalog(locale_dir, "good.mo", [("Open", "Abrir")])
    bad = write_catalog(locale_dir, "bad.mo", [("Close", "Cerrar")])
    bad.write_bytes(damage(bad.read_bytes()))
    result = run_script("--lang", "xx_YY", "--locale-dir", locale_dir, "--out", tmp_path / "out")
    assert result.returncode == 0
    assert f"WARNING: skipping {bad}: " in result.stderr and reason in result.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert reason in stats["catalogs"]["skipped"]["bad.mo"] and list(stats["catalogs"]["read"]) == ["good.mo"]
    assert all_pairs(tmp_path / "out") == [(b"Open", b"Abrir")]


def only_a_corrupt_catalog(locale_dir: Path) -> None:
    write_catalog(locale_dir, "bad.mo", [("Open", "Abrir")]).write_bytes(b"\xde\x12\x04\x95 too short")


@pytest.mark.parametrize(("make_input", "args", "message"), [
    (lambda locale_dir: None, [], "does not exist"),
    (lambda locale_dir: locale_dir.mkdir(), [], "no catalogs for 'xx_YY'"),
    (only_a_corrupt_catalog, [], "none of the 1 catalogs"),
    (lambda locale_dir: write_catalog(locale_dir, "a.mo", [("OK", "OK")]), [], "hold no translated pairs"),
    (lambda locale_dir: write_catalog(locale_dir, "a.mo", [("Open", "Abrir")]), ["--code", "en"], "--code 'en'"),
])
def test_bad_input_is_a_one_line_error(tmp_path, make_input, args, message):
    make_input(tmp_path / "locale")
    result = run_script("--lang", "xx_YY", "--locale-dir", tmp_path / "locale", "--out", tmp_path / "out", *args)
    lines = result.stderr.splitlines()
    assert result.returncode == 1
    assert lines[-1].startswith("error: ") and message in lines[-1]
    assert all(line.startswith("WARNING: skipping") for line in lines[:-1])  # a skipped catalog says why first
    assert not (tmp_path / "out" / "stats.json").exists()


def test_code_defaults_to_the_language_before_underscore_or_at(tmp_path):
    for lang in ("ca@valencia", "zh_CN"):
        path = tmp_path / "locale" / lang / "LC_MESSAGES" / "app.mo"
        path.parent.mkdir(parents=True)
        path.write_bytes(mo_bytes([("Open", "Obrir")]))
    for lang, code in (("ca@valencia", "ca"), ("zh_CN", "zh")):
        out = tmp_path / lang
        assert extract.main(["--lang", lang, "--locale-dir", str(tmp_path / "locale"), "--out", str(out)]) == 0
        assert json.loads((out / "stats.json").read_text())["code"] == code
        assert (out / f"train.{code}").exists()


REAL_LANG = "zh_CN"
REAL_CATALOGS = 20  # Debian machines like this project's have dozens; a GPU machine's image had a few


@pytest.mark.skipif(len(list(Path(f"/usr/share/locale/{REAL_LANG}/LC_MESSAGES").glob("*.mo"))) < REAL_CATALOGS,
                    reason=f"fewer than {REAL_CATALOGS} gettext catalogs for {REAL_LANG} on this machine")
def test_real_catalogs_give_a_line_aligned_corpus(tmp_path):
    assert extract.main(["--lang", REAL_LANG, "--out", str(tmp_path)]) == 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    pairs = [pair for name in extract.SPLITS for pair in read_split(tmp_path, name, "zh")]
    assert len(pairs) == sum(stats["pairs"].values()) > 1000
    assert not any(b"\r" in line for pair in pairs for line in pair)
    assert all(line.strip() for pair in pairs for line in pair)


def test_roundtrip_reports_lines_and_changes(tmp_path, capsys):
    data_dir = copy_task(tmp_path)
    ref = tmp_path / "ref.txt"
    ref.write_text("a b c\nh g f e\n  a  b\n\u4e2d\u6587\n", encoding="utf-8")
    assert roundtrip.main(["--data", str(data_dir), "--ref", str(ref), "--ref", str(ref), "--side", "tgt",
                           "--output", str(tmp_path / "decoded.txt")]) == 0
    report = json.loads(capsys.readouterr().out)
    decoded = (tmp_path / "decoded.txt").read_text(encoding="utf-8").splitlines()
    assert len(decoded) == 8 and decoded[0] == "a b c"
    assert set(report) == {"data", "side", "lines", "changed", "changed_beyond_whitespace", "examples"}
    assert report["lines"] == 8 and report["side"] == "tgt"
    assert 0 <= report["changed_beyond_whitespace"] <= report["changed"] <= report["lines"]
    assert len(report["examples"]) == min(5, report["changed"])
    assert all(set(example) == {"file", "line", "before", "after"} for example in report["examples"])


def test_roundtrip_without_prepared_data_is_a_one_line_error(tmp_path, capsys):
    assert roundtrip.main(["--data", str(tmp_path), "--ref", str(tmp_path / "ref.txt")]) == 1
    assert capsys.readouterr().err.startswith("error: ")


# stands in for the nmtkit command in run.sh: logs each call and writes what the next step reads
FAKE_NMTKIT = """#!{python}
import os, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as calls:
    calls.write(" ".join(args) + "\\n")
out = Path(args[args.index("--out") + 1]) if "--out" in args else None
if args[0] == "prepare":
    out.mkdir(parents=True)
    (out / "manifest.json").write_text("{{}}")
elif args[0] == "train" and "--resume" not in args:
    (out / "model.pt").write_text("weights")
    (out / "last.pt").write_text("weights")
elif args[0] == "translate":
    print(Path(args[args.index("--input") + 1]).read_text(), end="")
elif args[0] == "evaluate":
    print('{{"bleu": 1.0}}')
"""


def run_recipe(tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """recipes/messages/run.sh with the real extractor on a tiny locale and stand-ins for nmtkit and roundtrip.py."""
    recipe, bin_dir = tmp_path / "recipe", tmp_path / "bin"
    recipe.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    for name in ("run.sh", "extract.py"):
        (recipe / name).write_bytes((ROOT / "recipes/messages" / name).read_bytes())
    (recipe / "roundtrip.py").write_text('print(\'{"lines": 0}\')\n')
    (bin_dir / "nmtkit").write_text(FAKE_NMTKIT.format(python=sys.executable))
    (bin_dir / "nmtkit").chmod(0o755)
    (tmp_path / "calls").unlink(missing_ok=True)
    env = {"PATH": f"{bin_dir}:" + recipe_path("/usr/bin:/bin"), "CALLS": str(tmp_path / "calls"),
           "LANG_DIR": "xx_YY", "LOCALE_DIR": str(tmp_path / "locale"), "DATA": str(tmp_path / "data"),
           "OUT": str(tmp_path / "run")}
    done = subprocess.run(["bash", str(recipe / "run.sh")], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    return done, [line.split()[0] + (" --resume" if "--resume" in line else "")
                  for line in (tmp_path / "calls").read_text().splitlines()]


def test_recipe_runs_every_step_once_and_resumes(tmp_path):
    write_catalog(tmp_path / "locale", "app.mo", numbered_pairs(40) + TEXT_PAIRS)
    done, calls = run_recipe(tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls == ["prepare", "train", "translate", "evaluate", "evaluate"]
    assert (tmp_path / "run" / "test.hyp").read_bytes() == (tmp_path / "data" / "test.en").read_bytes() != b""
    stats = (tmp_path / "data" / "stats.json").stat().st_mtime_ns
    done, calls = run_recipe(tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls == ["train --resume", "evaluate", "evaluate"]
    assert (tmp_path / "data" / "stats.json").stat().st_mtime_ns == stats
