"""benchmarks/experiments/constraints_eval.py on a tiny untrained model and three made-up verses: properties only
(every term is met with constraints, the files are written, the report adds up)."""

from __future__ import annotations

import torch
from scripts import load_script

from nmtkit.checkpoint.payload import make_payload, save_atomic
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.subword import train_subword
from nmtkit.registry import build_model

evaluation = load_script("benchmarks/experiments/constraints_eval.py", "constraints_eval")

ES = ["Y Pablo fue a Jerusalén .", "Entonces dijo Pedro , Dios es bueno .", "Y fueron a la casa ."]
EN = ["And Paul went to Jerusalem .", "Then Peter said , God is good .", "And they went to the house ."]
GOLD = ["0-0 1-1 2-2 3-3 4-4 5-5", "0-0 1-2 2p1 3-3 4-4 5-5 6-6 7-7", "0-0 1-2 2-3 4-5 5-6"]


def test_terms_come_from_sure_links_of_name_like_words():
    assert evaluation.verse_terms(ES[0].split(), EN[0].split(), GOLD[0]) == ["Paul", "Jerusalem"]
    assert evaluation.verse_terms(ES[1].split(), EN[1].split(), GOLD[1]) == ["God"]  # Pedro-Peter is only possible
    for start in (".", ":", "¿"):  # a sentence or quoted speech starts there
        assert evaluation.verse_terms(f"Y {start} Pablo".split(), f"And {start} Paul".split(), "0-0 2-2") == []
    assert evaluation.present("Paul", "Paul's way") and not evaluation.present("Paul", "Pauline")


def test_the_evaluation_runs_end_to_end_on_a_tiny_model(tmp_path, capsys):
    data = tmp_path / "raw"
    data.mkdir()
    for name, lines in (("test.es", ES), ("test.en", EN), ("test.words.es", ES), ("test.words.en", EN),
                        ("test.gold", GOLD)):
        (data / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    subword = train_subword(ES + EN, DataConfig(subword="word", vocab_size=40), 40)
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2, "ffn": 32,
                                     "max_positions": 64}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    save_atomic(make_payload(config, model, (subword, subword)), tmp_path / "model.pt")

    result = evaluation.main(["-m", str(tmp_path / "model.pt"), "--data", str(data), "--out", str(tmp_path / "out"),
                              "--threads", "1", "--repeats", "2", "--json"])
    assert (result["lines"], result["lines_with_terms"], result["terms"], result["unmet_lines"]) == (3, 2, 3, 0)
    assert result["constrained"]["term_share"] == 100.0
    assert result["plain"]["term_share"] <= 100.0 and result["time_ratio"] > 0
    assert set(result["plain"]) == {"term_share", "bleu", "chrf", "seconds", "sentences_per_s"}
    assert '"constrained"' in capsys.readouterr().out
    assert (tmp_path / "out" / "constraints.jsonl").read_text().count("\n") == 3
    outputs = (tmp_path / "out" / "constrained.en").read_text().splitlines()
    assert "Paul" in outputs[0].split() and "God" in outputs[1].split()
    assert "terms present" in evaluation.render(result)
