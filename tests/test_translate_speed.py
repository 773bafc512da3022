"""The pure parts of benchmarks/translate_speed.py: commands, run names, and the tables against nmtkit PyTorch.

The benchmark itself is run by hand on the recipe's model (it takes minutes); see the script's docstring."""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts import load_script

load_script("benchmarks/onmt_convert.py", "onmt_convert")
speed = load_script("benchmarks/translate_speed.py", "translate_speed")

ARGS = argparse.Namespace(model=Path("run/model.pt"), threads=2, beam=5, inter_threads=1)


def run(tool: str, search: str, wall: float, outputs: list[str]):
    return speed.Run(tool, search, wall, 1.0, outputs)


def test_nmtkit_commands_for_a_checkpoint_and_an_export():
    beam = speed.nmtkit_command(ARGS, Path("in.txt"), "beam 5")
    assert beam[beam.index("--model") + 1] == "run/model.pt" and beam[-4:] == ["--beam", "5", "--length-penalty",
                                                                               "average"]
    exported = speed.nmtkit_command(ARGS, Path("in.txt"), "greedy", Path("ct2-int8"))
    assert exported[exported.index("--model") + 1] == "ct2-int8" and exported[-1] == "--greedy"
    assert speed.nmtkit_command(ARGS, Path("in.txt"), f"beam 5, {speed.REDUCED}")[-1] == "--bf16"
    workers = argparse.Namespace(**{**vars(ARGS), "inter_threads": 2})
    assert "--inter-threads" not in speed.nmtkit_command(workers, Path("in.txt"), "greedy")  # PyTorch: --threads
    exported = speed.nmtkit_command(workers, Path("in.txt"), "greedy", Path("ct2-int8"))
    assert exported[exported.index("--inter-threads") + 1] == "2"


def test_ctranslate2_command_and_run_names():
    command = speed.ct2_command(ARGS, Path("onmt-ct2"), Path("in.onmt"), Path("out"), "greedy")
    assert command[1].endswith("benchmarks/ct2_translate.py") and command[-6:] == ["--beam", "1", "--threads", "2",
                                                                                    "--inter-threads", "1"]
    assert speed.file_name(speed.NMTKIT_CT2_INT8, "beam 5, bf16/int8") == "nmtkit-CTranslate2-int8-beam-5-bf16-int8"
    assert speed.file_name(speed.ONMT_CT2, "") == "OpenNMT-py-CTranslate2"


def test_every_run_is_measured_against_nmtkit_pytorch_on_its_search(capsys):
    runs = [run(speed.NMTKIT, "beam 5", 10.0, ["a", "b"]), run(speed.NMTKIT_CT2, "beam 5", 5.0, ["a", "b"]),
            run(speed.NMTKIT_CT2_INT8, "beam 5", 4.0, ["a", "c"]), run(speed.NMTKIT, "beam 5, bf16/int8", 8.0,
                                                                        ["a", "b"])]
    assert speed.baseline_search("beam 5, bf16/int8") == "beam 5" and speed.baseline_search("greedy") == "greedy"
    speed.print_against_nmtkit(runs)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| beam")]
    assert rows == ["| beam 5 | nmtkit → CTranslate2 | 2.00 | 2.25 | 2.25 | 100.0% |",
                    "| beam 5 | nmtkit → CTranslate2 int8 | 2.50 | 3.00 | 3.00 | 50.0% |",
                    "| beam 5, bf16/int8 | nmtkit | 1.25 | 1.29 | 1.29 | 100.0% |"]


def test_skipped_tools_convert_nothing(tmp_path, capsys):
    args = argparse.Namespace(**vars(ARGS), onmt_venv=tmp_path / "none", skip_onmt=True, skip_ctranslate2=True)
    assert speed.convert_models(args, {}, tmp_path) == speed.Models()
    assert "skipped (--skip-onmt)" in capsys.readouterr().out and not list(tmp_path.iterdir())


def test_rounds_merge_into_medians():
    rounds = [speed.Run(speed.ONMT, "beam 5", wall, startup, ["a"], own)
              for wall, startup, own in ((12.0, 1.0, 9.0), (10.0, 3.0, 7.0), (11.0, 2.0, 8.0))]
    merged = speed.merge_rounds(rounds)
    assert (merged.wall, merged.startup, merged.own_seconds, merged.walls) == (11.0, 2.0, 8.0, [12.0, 10.0, 11.0])
    assert speed.merge_rounds(rounds[:1]) is rounds[0]  # one round: as it ran
