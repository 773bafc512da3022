"""nmtkit/training/modifiers.py: each modifier, the registry, and pairs modified at their rates, the same for the
same (seed, update, line), their tags kept; merged pairs (consecutive ones of a batch, both sides joined alike,
within max_length) and the batches they train in. (The texts' changes themselves: tests/test_augment.py.)"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig
from nmtkit.data.augment import insert_word, title_words
from nmtkit.data.corpora import read_corpora
from nmtkit.data.dataset import ParallelData
from nmtkit.data.prepare import load_subwords, read_manifest
from nmtkit.data.prepare_corpora import prepare_corpora
from nmtkit.errors import NmtkitError
from nmtkit.runtime.distributed import World
from nmtkit.training.bpe_dropout import BpeDropout
from nmtkit.training.config import completed
from nmtkit.training.mix import MixOrder
from nmtkit.training.modifiers import (
    MODIFIERS,
    PLACEHOLDERS,
    SPLIT_GAIN,
    PairModifier,
    register_modifier,
    split_by_length,
    typos,
)
from nmtkit.training.state import Progress


@pytest.fixture(scope="module")
def tagged(tmp_path_factory) -> Path:
    """A character-model data directory of one corpus whose sources start with the tag <web>."""
    root = tmp_path_factory.mktemp("modifiers")
    rng = random.Random(2)
    lines = [" ".join("".join(rng.choices("abcdeABCDE", k=rng.randint(1, 5))) for _ in range(rng.randint(2, 6)))
             for _ in range(300)]
    for side in ("src", "tgt"):
        (root / f"web.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = {"name": "web", "src": "web.src", "tgt": "web.tgt", "tag": "<web>"}
    (root / "corpora.yaml").write_text(json.dumps([corpus]))
    prepare_corpora(read_corpora(root / "corpora.yaml"), root / "data", DataConfig(subword="char", vocab_size=30))
    return root / "data"


def modified(data_dir: Path, chances: dict[str, float], step: int = 0, lines: range = range(300)):
    data, subwords = ParallelData(data_dir, "train"), load_subwords(data_dir)
    modify = PairModifier(subwords, chances, seed=1)
    return data, subwords, [modify(data.src[line], data.tgt[line], step, line) for line in lines]


def test_casing_changes_both_sides_and_keeps_the_corpus_tag(tagged: Path):
    data, subwords, pairs = modified(tagged, {"uppercase": 1.0})
    for line, (src, tgt) in enumerate(pairs):
        assert src[0] == data.src[line][0] and subwords[0].processor.IsControl(src[0])
        assert subwords[0].decode([src])[0] == subwords[0].decode([data.src[line].tolist()])[0].upper()
        assert subwords[1].decode([tgt])[0] == subwords[1].decode([data.tgt[line].tolist()])[0].upper()
    _, _, titled = modified(tagged, {"titlecase": 1.0}, lines=range(20))
    for line, (_, tgt) in enumerate(titled):
        assert subwords[1].decode([tgt])[0] == title_words(subwords[1].decode([data.tgt[line].tolist()])[0])


@pytest.mark.parametrize("chance", [0.1, 0.5])
def test_modifiers_apply_at_their_rates_the_same_way_for_the_same_seed_update_and_line(tagged: Path, chance: float):
    data, _, pairs = modified(tagged, {"uppercase": chance})
    changed = [pair != (data.src[line].tolist(), data.tgt[line].tolist()) for line, pair in enumerate(pairs)]
    assert abs(np.mean(changed) - chance) < 0.08
    assert modified(tagged, {"uppercase": chance})[2] == pairs  # the same update again: the same pairs
    assert modified(tagged, {"uppercase": chance}, step=1)[2] != pairs  # another update: other lines


def test_typos_slip_the_source_by_a_few_characters_and_keep_the_target():
    rng, original = np.random.default_rng(0), "the quick brown fox"
    sources = []
    for _ in range(50):
        src, tgt = typos(original, "der schnelle Fuchs", rng)
        assert tgt == "der schnelle Fuchs" and abs(len(src) - len(original)) <= 3 and set(src) <= set(original)
        sources.append(src)
    assert sum(src != original for src in sources) >= 45 and len(set(sources)) >= 40


def test_a_placeholder_goes_to_the_same_place_on_both_sides():
    from nmtkit.training.modifiers import placeholder

    rng = np.random.default_rng(0)
    for _ in range(50):
        src, tgt = placeholder("uno dos tres cuatro", "one two three four", rng)
        src_words, tgt_words = src.split(" "), tgt.split(" ")
        token = next(word for word in src_words if word not in "uno dos tres cuatro".split())
        assert token in PLACEHOLDERS or token.isdigit()
        assert src_words.index(token) == tgt_words.index(token)
    assert insert_word("a b", "%s", 0.0) == "%s a b" and insert_word("a b", "%s", 1.0) == "a b %s"


def test_a_modifier_registered_twice_or_unknown_is_an_error():
    with pytest.raises(ValueError, match="registered twice"):
        register_modifier("uppercase")(lambda src, tgt, rng: (src, tgt))
    stage = {"mix": {"web": 1}, "modifiers": {"web": {"shout": 0.1}}}
    with pytest.raises(NmtkitError, match="unknown modifier 'shout'; the modifiers are bpe_dropout, inline_noise, "
                                          "merge, placeholder, remove_end_punct, titlecase, typos, uppercase$"):
        completed(build_config({"train": {"stages": [stage], "batch_tokens": 64}}))
    stage = {"mix": {"web": 1}, "modifiers": {"web": {"uppercase": 1.5}}}
    with pytest.raises(NmtkitError, match="probabilities in"):
        completed(build_config({"train": {"stages": [stage], "batch_tokens": 64}}))


@pytest.fixture(scope="module")
def bpe_corpus(tmp_path_factory) -> Path:
    """A bpe data directory (byte fallback on) of one corpus tagged <bt>, with spaces, digits, placeholders and a
    character outside the vocabulary among its lines."""
    root = tmp_path_factory.mktemp("bpe")
    rng = random.Random(3)
    words = ["".join(rng.choices("abcdefghijáéñ", k=rng.randint(1, 9))) for _ in range(400)]
    lines = [" ".join(rng.choices(words, k=rng.randint(1, 20))) for _ in range(1500)]
    lines[:4] = ["a  b   c", "x中y and %s", "{0} 12345 678", lines[4].upper()]
    for side in ("src", "tgt"):
        (root / f"bt.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "corpora.yaml").write_text(json.dumps([{"name": "bt", "src": "bt.src", "tgt": "bt.tgt", "tag": "<bt>"}]))
    prepare_corpora(read_corpora(root / "corpora.yaml"), root / "data",
                    DataConfig(subword="bpe", vocab_size=1100, min_words=0, max_ratio=0))
    return root / "data"


def test_bpe_dropout_without_dropout_is_sentencepieces_own_segmentation(bpe_corpus: Path):
    data, subwords = ParallelData(bpe_corpus, "train"), load_subwords(bpe_corpus)
    segment = BpeDropout(subwords[1])
    for line in range(len(data.tgt)):
        assert segment(data.tgt[line].tolist(), 0.0, np.random.default_rng(0)) == data.tgt[line].tolist()
        assert segment(data.src[line].tolist(), 0.0, np.random.default_rng(0)) == data.src[line].tolist()  # <bt> too


def test_bpe_dropout_samples_as_sentencepiece_does_the_same_way_for_the_same_seed_update_and_line(bpe_corpus: Path):
    data, subwords, pairs = modified(bpe_corpus, {"bpe_dropout": 0.1}, lines=range(1400))
    processor = subwords[0].processor
    for line, (src, tgt) in enumerate(pairs):
        assert src[0] == data.src[line][0] == processor.piece_to_id("<bt>")
        assert processor.decode(src) == processor.decode(data.src[line].tolist())  # the same text
        assert processor.decode(tgt) == processor.decode(data.tgt[line].tolist())
    ours = np.mean([len(tgt) for _, tgt in pairs])
    texts = [processor.decode(data.tgt[line].tolist()) for line in range(1400)]
    theirs = np.mean([len(ids) for ids in processor.encode(texts, enable_sampling=True, alpha=0.1, nbest_size=-1)])
    assert ours == pytest.approx(theirs, rel=0.08) and ours > 1.15 * np.mean(data.tgt.lengths())
    assert modified(bpe_corpus, {"bpe_dropout": 0.1}, lines=range(1400))[2] == pairs
    assert modified(bpe_corpus, {"bpe_dropout": 0.1}, step=1, lines=range(1400))[2] != pairs


def test_bpe_dropout_follows_the_text_modifiers_and_needs_a_bpe_model(bpe_corpus: Path, tagged: Path):
    data, subwords, pairs = modified(bpe_corpus, {"uppercase": 1.0, "bpe_dropout": 0.3}, lines=range(50))
    for line, (_, tgt) in enumerate(pairs):
        assert subwords[1].decode([tgt])[0] == subwords[1].decode([data.tgt[line].tolist()])[0].upper()
    with pytest.raises(NmtkitError, match="bpe_dropout modifier needs a bpe subword model"):
        modified(tagged, {"bpe_dropout": 0.1}, lines=range(1))


def test_bpe_dropout_samples_the_same_in_another_process(bpe_corpus: Path):
    """What resume needs, and what SentencePiece's own sampler does not give (its generator is not seeded alike in
    another process): the same ids for the same generator seed."""
    script = ("import sys, json, numpy as np; from pathlib import Path; from nmtkit.data.prepare import load_subwords;"
              "from nmtkit.training.bpe_dropout import BpeDropout; data = Path(sys.argv[1]);"
              "tokens, offsets = np.load(data / 'train.tgt.tok.npy'), np.load(data / 'train.tgt.off.npy');"
              "segment = BpeDropout(load_subwords(data)[1]);"
              "print(json.dumps([segment(tokens[offsets[line]:offsets[line + 1]].tolist(), 0.2,"
              " np.random.default_rng([1, line])) for line in range(100)]))")
    result = subprocess.run([sys.executable, "-c", script, str(bpe_corpus)], capture_output=True, check=True)
    data, subwords = ParallelData(bpe_corpus, "train"), load_subwords(bpe_corpus)
    segment = BpeDropout(subwords[1])
    here = [segment(data.tgt[line].tolist(), 0.2, np.random.default_rng([1, line])) for line in range(100)]
    assert json.loads(result.stdout) == here and here != [data.tgt[line].tolist() for line in range(100)]


def test_end_punctuation_and_inline_noise_are_registered_with_their_meaning(bpe_corpus: Path):
    rng = np.random.default_rng(0)
    assert MODIFIERS["remove_end_punct"]("¿Dónde?", "哪里？", rng) == ("¿Dónde", "哪里")
    assert MODIFIERS["remove_end_punct"]("Hola.", "Hello!", rng) == ("Hola.", "Hello!")
    data, subwords, pairs = modified(bpe_corpus, {"inline_noise": 1.0}, lines=range(100))
    processor = subwords[0].processor
    for line, (src, tgt) in enumerate(pairs):  # the corpus' sides are the same lines: so are the noisy ones
        original = processor.decode(data.tgt[line].tolist())
        noisy_src, noisy_tgt = processor.decode(src[1:]), processor.decode(tgt)
        assert src[0] == processor.piece_to_id("<bt>") and noisy_src == noisy_tgt != original
        assert set(noisy_tgt) - set(original) - {" "}  # another script's letters, through byte pieces and back


@pytest.fixture(scope="module")
def two_sided(tmp_path_factory) -> Path:
    """A character-model data directory of one corpus tagged <web> whose targets are their sources' words upper
    case, in reverse order: which line each merged side holds shows."""
    root = tmp_path_factory.mktemp("merge")
    rng = random.Random(4)
    sources = [" ".join("".join(rng.choices("abcde", k=rng.randint(1, 4))) for _ in range(rng.randint(1, 4)))
               for _ in range(300)]
    (root / "web.src").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (root / "web.tgt").write_text("\n".join(" ".join(line.upper().split()[::-1]) for line in sources) + "\n",
                                  encoding="utf-8")
    corpus = {"name": "web", "src": "web.src", "tgt": "web.tgt", "tag": "<web>"}
    (root / "corpora.yaml").write_text(json.dumps([corpus]))
    prepare_corpora(read_corpora(root / "corpora.yaml"), root / "data",
                    DataConfig(subword="char", vocab_size=30, max_ratio=0, dedup=False))
    return root / "data"


def merged_batch(data_dir: Path, chances: dict[str, float], step: int = 0, max_length: int | None = None):
    data, subwords = ParallelData(data_dir, "train"), load_subwords(data_dir)
    lines = np.random.default_rng(5).permutation(len(data.src))  # a batch's lines come in no order of the file's
    return data, subwords, lines, PairModifier(subwords, chances, 1, max_length).batch(data, lines, step)


def by_line(parts) -> dict[int, tuple[list[int], list[int]]]:
    """`PairModifier.batch`'s parts as line (a merged pair's first) -> the pair trained."""
    return {int(line): (list(src), list(tgt)) for lines, pairs in parts
            for line, (src, tgt) in zip(lines, pairs, strict=True)}


def groups_of(data: ParallelData, subwords, lines: np.ndarray, parts) -> list[int]:
    """The sizes of the groups that `PairModifier.batch`'s answer `parts` holds, in the batch's order, checking
    that each merged pair is its group's texts joined with a space on each side, its tag once in front."""
    def text(side: int, ids) -> str:
        return subwords[side].processor.decode([int(token) for token in ids])

    position, sizes = {int(line): at for at, line in enumerate(lines)}, {}
    for heads, pairs in parts:
        for head, (src, tgt) in zip(heads, pairs, strict=True):
            assert src[0] == data.src[head][0] == subwords[0].processor.piece_to_id("<web>")
            at = position[int(head)]
            size = next(size for size in range(1, 5)
                        if text(0, src[1:]) == " ".join(text(0, data.src[line][1:]) for line in lines[at:at + size]))
            assert text(1, tgt) == " ".join(text(1, data.tgt[line]) for line in lines[at:at + size])
            sizes[at] = size
    covered = [at + offset for at, size in sizes.items() for offset in range(size)]
    assert sorted(covered) == list(range(len(lines)))  # every pair of the batch once, alone or in one merged pair
    return [sizes[at] for at in sorted(sizes)]


def test_merge_joins_two_to_four_consecutive_pairs_of_a_batch_both_sides_alike(two_sided: Path):
    data, subwords, lines, parts = merged_batch(two_sided, {"merge": 0.3})
    sizes = groups_of(data, subwords, lines, parts)
    assert set(sizes) == {1, 2, 3, 4}
    assert np.mean([size > 1 for size in sizes]) == pytest.approx(0.3, abs=0.08)  # of the pairs that start a group
    assert by_line(merged_batch(two_sided, {"merge": 0.3})[3]) == by_line(parts)  # the same update: the same merges
    assert by_line(merged_batch(two_sided, {"merge": 0.3}, step=1)[3]) != by_line(parts)


def test_merged_pairs_stay_within_max_length_and_follow_the_other_modifiers(two_sided: Path):
    data, subwords, lines, parts = merged_batch(two_sided, {"merge": 1.0}, max_length=14)
    sizes = groups_of(data, subwords, lines, parts)
    merged = [(src, tgt) for line, (src, tgt) in by_line(parts).items() if len(tgt) > len(data.tgt[line])]
    assert max(sizes) > 1 and merged and all(max(len(src), len(tgt)) + 1 <= 14 for src, tgt in merged)
    *_, upper = merged_batch(two_sided, {"uppercase": 1.0, "merge": 1.0})
    processor = subwords[0].processor
    assert all(processor.decode(src[1:]).isupper() for _, pairs in upper for src, _ in pairs)


def test_a_batch_with_merged_pairs_trains_as_two_that_keep_its_token_budget(two_sided: Path):
    stage = {"mix": {"web": 1}, "modifiers": {"web": {"merge": 0.3}}}
    train = completed(build_config({"train": {"stages": [stage], "batch_tokens": 600, "max_length": 60}})).train
    data = ParallelData(two_sided, "train", train.max_length)
    order = MixOrder(data, train, World(), Progress(), read_manifest(two_sided), load_subwords(two_sided))
    group = order.next_group()
    batches, weight = order.local_batches(group)
    plain = data.batch(group[0])
    assert len(batches) == 2 and weight == 1.0
    assert sorted(np.concatenate([batch.indices for batch in batches])) != sorted(plain.indices)  # heads only
    assert sum(len(batch.indices) for batch in batches) < len(plain.indices)
    merged_rows = sum(len(batch.indices) for batch in batches) - len(batches[0].indices)
    eos_saved = len(plain.indices) - len(batches[0].indices) - merged_rows  # one EOS a merged pair, not one a line
    assert sum(batch.num_tgt_tokens for batch in batches) == plain.num_tgt_tokens - eos_saved
    assert sum(batch.src.numel() for batch in batches) <= 2 * plain.src.numel()  # padded apart: within the budget
    again = MixOrder(data, train, World(), Progress(), read_manifest(two_sided), load_subwords(two_sided))
    for batch, same in zip(batches, again.local_batches(again.next_group())[0], strict=True):  # what resume redoes
        assert batch.indices.tolist() == same.indices.tolist() and batch.src.equal(same.src)
        assert batch.tgt_out.equal(same.tgt_out)


def test_bpe_dropout_segments_a_merged_pair_anew_and_keeps_its_text(bpe_corpus: Path):
    data, subwords = ParallelData(bpe_corpus, "train"), load_subwords(bpe_corpus)
    lines, processor = np.arange(40, 140), subwords[0].processor
    plain = by_line(PairModifier(subwords, {"merge": 1.0}, 1).batch(data, lines, 0))
    sampled = by_line(PairModifier(subwords, {"merge": 1.0, "bpe_dropout": 0.3}, 1).batch(data, lines, 0))
    assert sampled.keys() == plain.keys() and sum(len(tgt) > len(data.tgt[line]) for line, (_, tgt) in
                                                  plain.items()) > 20  # merged
    assert {line: processor.decode(src) for line, (src, _) in sampled.items()} == \
        {line: processor.decode(src) for line, (src, _) in plain.items()}
    assert sum(len(tgt) for _, tgt in sampled.values()) > sum(len(tgt) for _, tgt in plain.values())  # shorter pieces


def test_pairs_the_modifiers_lengthen_are_padded_apart_and_stay_within_max_length(bpe_corpus: Path):
    """An upper-cased line takes several times its pieces: padded with the rest of its batch it would pad every line
    to its length (7% upper case made training 2.6 times slower); the batch is cut in two by length when that pads
    less, and a line made longer than max_length trains as it was."""
    data, subwords = ParallelData(bpe_corpus, "train"), load_subwords(bpe_corpus)
    lines = np.arange(4, 60)
    parts = PairModifier(subwords, {"uppercase": 0.3}, 1).batch(data, lines, 0)
    assert sorted(line for part_lines, _ in parts for line in part_lines) == lines.tolist() and len(parts) == 2
    widest = [max(len(src) for src, _ in pairs) + max(len(tgt) for _, tgt in pairs) for _, pairs in parts]
    assert widest[0] < widest[1]  # the shorter pairs first
    together = len(lines) * max(widest)
    assert sum(len(pairs) * width for (_, pairs), width in zip(parts, widest)) <= SPLIT_GAIN * together
    limit = max(max(len(data.src[line]), len(data.tgt[line])) for line in lines) + 1  # every line fits as it is
    every = [(line, pair) for part_lines, pairs in PairModifier(subwords, {"uppercase": 1.0}, 1, limit).batch(
        data, lines, 0) for line, pair in zip(part_lines, pairs, strict=True)]
    assert all(max(len(src), len(tgt)) + 1 <= limit for _, (src, tgt) in every)
    assert any(src == data.src[line].tolist() for line, (src, _) in every)  # upper case made it too long


@pytest.mark.parametrize("lengths", [[(3, 4)], [(3, 4), (5, 5)], [(2, 2)] * 20 + [(40, 50)], [(9, 9)] * 8])
def test_a_batch_is_cut_in_two_only_where_that_pads_less(lengths):
    pairs = [([0] * src, [0] * tgt) for src, tgt in lengths]
    parts = split_by_length(pairs)
    assert sorted(index for part in parts for index in part) == list(range(len(pairs)))
    assert len(parts) == (2 if lengths[-1] == (40, 50) else 1)
