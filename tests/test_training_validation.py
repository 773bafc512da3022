"""nmtkit/training/validation.py: what a validation scores, the best model and patience, the dev set's BLEU on the
pairs training keeps, and the checkpoints kept for averaging."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_runs import copy_task, tiny_config

from nmtkit.training.loop import Trainer
from nmtkit.training.state import Progress
from nmtkit.training.validation import Validator, validation_score
from nmtkit.translate import Translator


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return copy_task(tmp_path_factory.mktemp("copy"))


@pytest.mark.parametrize("record, metric, expected", [
    ({"valid_nll": 2.5, "valid_bleu": 12.0}, "bleu", 12.0),
    ({"valid_nll": 2.5, "valid_bleu": 12.0}, "loss", -2.5),
    ({"valid_nll": 2.5}, "bleu", -2.5),  # train.valid_bleu off: the loss decides
    ({}, "bleu", 7.0),  # no dev set: the newest model (step 7) is the best
])
def test_the_validation_score_is_bleu_or_minus_the_loss_or_the_step(record, metric, expected):
    assert validation_score(record, metric, 7) == expected


def test_best_tracking_counts_validations_without_improvement():
    progress = Progress()
    validator = Validator(None, progress, None, lambda record: None)  # track_best reads the progress alone
    assert [validator.track_best(score) for score in (-3.0, -2.0, -2.0, -2.5, -1.0)] == [True, True, False, False,
                                                                                          True]
    assert progress.best == -1.0 and progress.bad_validations == 0
    validator.track_best(-4.0)
    assert progress.bad_validations == 1 and progress.best == -1.0


def test_dev_scores_translate_the_pairs_training_keeps(data_dir: Path, tmp_path: Path, monkeypatch):
    trainer = Trainer(tiny_config(max_length=5, valid_bleu=False), data_dir, tmp_path)
    decoded = []
    monkeypatch.setattr(Translator, "translate_requests", lambda self, requests: decoded.extend(
        request.text for request in requests) or [[(request.text, 0.0)] for request in requests])
    assert trainer.validator.dev_scores() == pytest.approx((100.0, 100.0))  # each source copied is its reference
    assert len(decoded) == len(trainer.setup.dev_data) and max(len(line.split()) for line in decoded) == 4


def test_validation_keeps_the_best_model_last_pt_and_the_newest_step_checkpoints(data_dir: Path, tmp_path: Path):
    trainer = Trainer(tiny_config(lr=0.0, valid_bleu=False, best_metric="loss", keep_checkpoints=2), data_dir,
                      tmp_path)
    for step in (1, 2, 3):
        trainer.progress.step = step
        assert not trainer.validator.validate()  # patience 0: never stops
    assert sorted(path.name for path in tmp_path.glob("*.pt")) == ["checkpoint_2.pt", "checkpoint_3.pt", "last.pt",
                                                                   "model.pt"]
    assert trainer.progress.bad_validations == 2  # lr 0: the same loss three times, the first one is the best
    assert trainer.validator.last_validated == 3
