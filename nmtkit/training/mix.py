"""What each update trains on. Without `train.stages`: every kept pair once an epoch in token-budget batches of a
seeded order (`BatchOrder`), multilingual data's language pairs at the shares `train.pair_temperature` gives. With
stages: batches drawn corpus by corpus at each stage's shares of target tokens, each corpus cycling through its
own shuffled passes (`MixOrder`). Either way every process computes the same batches of an update (index arrays,
cheap) and reads only its own."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np

from nmtkit.config.sections import StageConfig, TrainConfig
from nmtkit.data.corpora import check_corpus_names, corpus_ranges
from nmtkit.data.dataset import Batch, ParallelData, collate_pairs
from nmtkit.data.prepare import read_manifest
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError
from nmtkit.runtime.distributed import World
from nmtkit.training.modifiers import PairModifier
from nmtkit.training.state import Progress

log = logging.getLogger(__package__)  # "nmtkit.training": train.log names training's messages as before its split


def epoch_batches(data: ParallelData, max_tokens: int, seed: int, epoch: int, temperature: float) -> list[np.ndarray]:
    """The training batches of `epoch`, the same for the same (seed, epoch) (exact resume mid-epoch). With several
    language pairs and a `temperature` other than 1, the epoch is drawn pair by pair (`temperature_sample`), from
    the same random generator that then orders the batches."""
    rng = np.random.default_rng([seed, epoch])
    lines = data.kept
    if data.corpus is not None and temperature != 1.0:
        lines = data.kept[temperature_sample(data.corpus[data.kept], temperature, rng)]
    return data.batches_of(lines, max_tokens, rng)


def temperature_sample(line_pairs: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Positions in `line_pairs` (each line's language pair) for an epoch of as many lines, in which pair i takes a
    share proportional to n_i^(1/temperature) (Arivazhagan et al. 2019, Section 4.2): 1 keeps the data's shares,
    larger values give small pairs more (drawn again when they run out), large ones less."""
    counts = np.bincount(line_pairs)
    shares = counts.astype(np.float64) ** (1.0 / temperature)
    shares /= shares.sum()
    drawn = []
    for pair, share in enumerate(shares):
        members = np.flatnonzero(line_pairs == pair)
        size = int(round(share * len(line_pairs)))
        if len(members) and size:
            drawn.append(rng.choice(members, size=size, replace=size > len(members)))
    return np.sort(np.concatenate(drawn)) if drawn else np.arange(0)


class BatchOrder:
    """Which batches each update takes: each epoch's token-budget batches in its seeded order, from where the
    progress says, update_freq batches per process."""

    def __init__(self, train_data: ParallelData, train: TrainConfig, world: World, progress: Progress):
        self.train_data, self.train, self.world, self.progress = train_data, train, world, progress
        self._epoch: tuple[int, list] = (-1, [])

    def epoch_batches(self, epoch: int) -> list:
        if self._epoch[0] != epoch:
            train = self.train
            self._epoch = (epoch, epoch_batches(self.train_data, train.batch_tokens, train.seed, epoch,
                                                train.pair_temperature))
        return self._epoch[1]

    def next_group(self) -> list | None:
        """The batches of the next update on all processes together (update_freq per process; fewer at the end
        of an epoch), from where the progress says; None once train.max_epochs are done."""
        train, progress = self.train, self.progress
        while not (train.max_epochs and progress.epoch >= train.max_epochs):
            batches = self.epoch_batches(progress.epoch)
            if progress.batch_in_epoch < len(batches):
                start = progress.batch_in_epoch
                return batches[start : start + train.update_freq * self.world.size]
            progress.epoch, progress.batch_in_epoch = progress.epoch + 1, 0
        return None

    def advance(self, group: list) -> None:
        """The progress after the update that took `group` (`next_group`'s)."""
        self.progress.batch_in_epoch += len(group)

    def window_record(self) -> dict:
        """What the training log record adds about the batches since the last one (nothing here)."""
        return {}

    def local_batches(self, group: list) -> tuple[list[Batch], float]:
        """This process's share of an update's batches and their weight. A process left without a batch at the end
        of an epoch runs the first one with weight 0, so that it still joins DDP's gradient exchange."""
        per_process = self.train.update_freq
        mine = group[self.world.rank * per_process : (self.world.rank + 1) * per_process]
        if not mine:
            return [self.train_data.batch(group[0])], 0.0
        return [self.train_data.batch(indices) for indices in mine], 1.0


def corpus_lines(data: ParallelData, manifest: dict, names: list[str]) -> dict[str, np.ndarray]:
    """The kept training lines of each corpus named (every subword_samples copy); a name the data directory lacks,
    or a corpus without a line to train on, is a one-line error naming it."""
    check_corpus_names(manifest, names)
    ranges, kept = corpus_ranges(manifest), np.zeros(len(data.src), dtype=bool)
    kept[data.kept] = True
    lines = {}
    for name in names:
        every = np.concatenate([np.arange(part.start, part.stop) for part in ranges[name]])
        lines[name] = every[kept[every]]
        if not len(lines[name]):
            raise NmtkitError(f"corpus {name!r} has no training pair to draw from (empty, or every pair longer than "
                              "train.max_length); prepare it from non-empty files or take it out of train.stages")
    return lines


def fresh_mix_state(names: list[str]) -> dict:
    """The sampler's state at the start of a run: stage 0, each corpus at the start of its first pass."""
    return {"stage": 0, "stage_start": 0, "stage_start_time": 0.0, "passes_at_start": dict.fromkeys(names, 0.0),
            "tokens": dict.fromkeys(names, 0), "passes": dict.fromkeys(names, 0), "positions": dict.fromkeys(names, 0)}


class MixOrder(BatchOrder):
    """The batches of `train.stages`. Each batch comes from the corpus of the stage's mix furthest below its share
    of the target tokens drawn in the stage so far (deterministic: shares stay within a batch of their target);
    each corpus goes through its token-budget batches in a seeded order, pass after pass (seed, corpus, pass). The
    whole state (`Progress.mix`: stage, per-corpus pass and position, tokens drawn) is saved in last.pt, so that
    `--resume` draws the batches an uninterrupted run would have."""

    def __init__(self, train_data: ParallelData, train: TrainConfig, world: World, progress: Progress,
                 manifest: dict, subwords: tuple[Subword, Subword] | None = None):
        super().__init__(train_data, train, world, progress)
        self.modifiers = [{name: PairModifier(subwords, chances, train.seed, train_data.max_length)
                           for name, chances in stage.modifiers.items()} for stage in train.stages]
        self.names = list(dict.fromkeys(name for stage in train.stages for name in stage.mix))
        self.lines = corpus_lines(train_data, manifest, self.names)
        self.tgt_tokens = train_data.tgt.lengths() + 1  # each target with its EOS: what a batch's tgt_out holds
        self._passes: dict[str, tuple[int, list[np.ndarray]]] = {}
        self._pending: tuple[dict, list[str]] | None = None
        self.window_tokens = dict.fromkeys(self.names, 0)
        log.info("%d training stage(s) over the corpora %s", len(train.stages),
                 ", ".join(f"{name} ({len(lines)} pairs)" for name, lines in self.lines.items()))

    def current_state(self) -> dict:
        """The sampler's state in the progress (as resume restored it), fresh at the start of a run."""
        if not self.progress.mix:
            self.progress.mix = fresh_mix_state(self.names)
        return self.progress.mix

    def pass_batches(self, name: str, number: int) -> list[np.ndarray]:
        """Corpus `name`'s batches in its pass `number`, the same for the same train.seed."""
        if self._passes.get(name, (-1,))[0] != number:
            rng = np.random.default_rng([self.train.seed, self.names.index(name), number])
            batches = self.train_data.batches_of(self.lines[name], self.train.batch_tokens, rng)
            self._passes[name] = (number, batches)
        return self._passes[name][1]

    def passes_made(self, state: dict, name: str) -> float:
        """Passes over corpus `name` so far in the run, the current one counted by the fraction of its batches."""
        return state["passes"][name] + state["positions"][name] / len(self.pass_batches(name, state["passes"][name]))

    def stage_over(self, state: dict) -> bool:
        """Whether the stage's `until` is met. Its time is the training time agreed before the previous update
        (`Progress.elapsed`, saved in last.pt), the same on every process and in a resumed run."""
        until, progress = self.train.stages[state["stage"]].until, self.progress
        if until.updates and progress.step - state["stage_start"] >= until.updates:
            return True
        # a run saved before until.time existed has no stage_start_time: its stage clock starts with the run
        if until.time and progress.elapsed - state.get("stage_start_time", 0.0) >= until.time:
            return True
        return bool(until.epochs) and all(self.passes_made(state, name) - state["passes_at_start"][name] >= passes
                                          for name, passes in until.epochs.items())

    def start_stage(self, state: dict, index: int) -> None:
        state.update(stage=index, stage_start=self.progress.step, stage_start_time=self.progress.elapsed,
                     tokens=dict.fromkeys(self.names, 0),
                     passes_at_start={name: self.passes_made(state, name) for name in self.names})

    def draw(self, state: dict, stage: StageConfig) -> tuple[str, np.ndarray]:
        """The corpus furthest below its share in the stage, and its next batch; `state` moves on past it."""
        total, weight_sum = sum(state["tokens"].values()), sum(stage.mix.values())
        drawn_from = [corpus for corpus, weight in stage.mix.items() if weight > 0]
        name = max(drawn_from, key=lambda corpus: stage.mix[corpus] / weight_sum * total - state["tokens"][corpus])
        batches = self.pass_batches(name, state["passes"][name])
        batch = batches[state["positions"][name]]
        state["positions"][name] += 1
        if state["positions"][name] == len(batches):  # the corpus ran out: a new shuffled pass
            state["passes"][name], state["positions"][name] = state["passes"][name] + 1, 0
        state["tokens"][name] += int(self.tgt_tokens[batch].sum())
        return name, batch

    def next_group(self) -> list | None:
        """The batches of the next update on all processes together; None once the last stage is over."""
        state = copy.deepcopy(self.current_state())
        while self.stage_over(state):
            if state["stage"] + 1 == len(self.train.stages):
                return None
            self.start_stage(state, state["stage"] + 1)
        stage = self.train.stages[state["stage"]]
        drawn = [self.draw(state, stage) for _ in range(self.train.update_freq * self.world.size)]
        self._pending = (state, [name for name, _ in drawn])
        return [batch for _, batch in drawn]

    def advance(self, group: list) -> None:
        """Take the state that `next_group` computed for `group` (the progress moves only once the update ran, so
        that a run stopped before it saves the state before it)."""
        (state, names), self._pending = self._pending, None
        if state["stage"] != self.current_state()["stage"]:
            log.info("stage %d of %d from step %d: mix %s", state["stage"] + 1, len(self.train.stages),
                     self.progress.step, self.train.stages[state["stage"]].mix)
        self.progress.mix = state
        for name, batch in zip(names, group, strict=True):
            self.window_tokens[name] += int(self.tgt_tokens[batch].sum())

    def local_batches(self, group: list) -> tuple[list[Batch], float]:
        """This process's update_freq batches of the update (`next_group`'s), each corpus' modifiers applied (a
        batch with merged pairs is two: `PairModifier.batch`)."""
        (state, names), first = self._pending, self.world.rank * self.train.update_freq
        modifiers = self.modifiers[state["stage"]]
        mine = zip(names[first : first + self.train.update_freq], group[first : first + self.train.update_freq],
                   strict=True)
        return [batch for name, indices in mine for batch in self.collate(indices, modifiers.get(name))], 1.0

    def collate(self, indices: np.ndarray, modify: PairModifier | None) -> list[Batch]:
        if modify is None:
            return [self.train_data.batch(indices)]
        return [collate_pairs([src for src, _ in pairs], [tgt for _, tgt in pairs], lines)
                for lines, pairs in modify.batch(self.train_data, indices, self.progress.step) if pairs]

    def window_record(self) -> dict:
        """The stage (from 1) and the share of target tokens each corpus got since the last record."""
        total = max(sum(self.window_tokens.values()), 1)
        record = {"stage": self.current_state()["stage"] + 1,
                  "shares": {name: round(tokens / total, 4) for name, tokens in self.window_tokens.items()}}
        self.window_tokens = dict.fromkeys(self.names, 0)
        return record


def batch_order(train_data: ParallelData, train: TrainConfig, world: World, progress: Progress,
                data_dir: Path, subwords: tuple[Subword, Subword]) -> BatchOrder:
    """The batch order of `train`: by stages when it has any, else epoch by epoch."""
    if not train.stages:
        return BatchOrder(train_data, train, world, progress)
    return MixOrder(train_data, train, world, progress, read_manifest(data_dir), subwords)
