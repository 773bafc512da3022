"""Tests for nmtkit/decoding/placeholder_guard.py and the guarded searches: the rule's parts on hand-made states;
models of fixed probabilities that would drop, duplicate or misnest symbols; guarded beam search against exhaustive
search over short outputs; user constraints, negative constraints and prefixes alongside; and the PyTorch engine on a
tiny model whose vocabulary holds the reserved symbols (and one whose vocabulary does not)."""

from __future__ import annotations

import functools
import itertools
import random

import pytest
import torch
from scripts import load_script
from test_constraints import meets
from test_search import PENALTIES, FixedDecoder

from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.config.run import build_config
from nmtkit.config.sections import DataConfig, DecodeConfig
from nmtkit.data.dataset import encode_sources
from nmtkit.data.subword import BOS, EOS, Subword, train_subword
from nmtkit.decoding.constraints import Constraints, constrained_limits
from nmtkit.decoding.placeholder_guard import ReservedIds
from nmtkit.decoding.search import Sampler, beam_search, greedy_search
from nmtkit.models.base import EncoderDecoder
from nmtkit.registry import build_model
from nmtkit.symbols.placeholder_check import check
from nmtkit.symbols.placeholders import reserved_symbols
from nmtkit.translate import Translator
from nmtkit.translate.torch_engine import TorchEngine

# tokens 0, 1, 2 are words in these tables, 3 is EOS, 4..8 the reserved symbols
PH1, T1, C1, T2, C2 = 4, 5, 6, 7, 8
VOCAB = 9
NAMES = {PH1: "｟ph1｠", T1: "｟t1｠", C1: "｟/t1｠", T2: "｟t2｠", C2: "｟/t2｠"}
RESERVED = ReservedIds(src=(PH1, T1, C1, T2, C2), tgt=torch.tensor([PH1, T1, C1, T2, C2]),
                       partner=torch.tensor([0, 2, 1, 4, 3]), closing=torch.tensor([False, False, True, False, True]))
WORDS = [0, 1, 2]


def text(tokens: list[int]) -> str:
    return " ".join(NAMES.get(token, "w") for token in tokens)


def keeps(source: list[int], output: list[int]) -> bool:
    """What `placeholder_check.check` (the check after decoding, written apart from the guard) says of the output."""
    return check(text(source), text(output)).ok


def hostile_decoder(seed: int, steps: int) -> FixedDecoder:
    """Random probabilities that favour the reserved symbols at every step and EOS: unguarded, it drops, repeats
    and misnests them."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(steps, VOCAB, VOCAB, generator=generator) * 2
    logits[:, :, list(NAMES)] += 1.5
    logits[:, :, EOS] += 1.0
    return FixedDecoder(torch.softmax(logits, dim=-1))


def setup(sources: list[list[int]], limit: int, constraints=None):
    """The batch, the guard and the length limits (raised where the symbols need room) of `sources`."""
    src, src_mask = encode_sources(sources)
    guard = RESERVED.guard(sources, torch.device("cpu"))
    limits = constrained_limits(torch.tensor([limit] * len(sources)), guard.constraints(constraints), 64)
    return src, src_mask, guard, limits


# --- the rule's parts ---


def test_restrict_bans_absent_written_and_not_innermost_closings():
    guard = RESERVED.guard([[PH1, T1, C1, T2, C2], [T1, 0]], torch.device("cpu"))
    order = torch.tensor([[-1, 0, -1, 1, -1],  # sentence 0 after t1 t2: t2 is the innermost tag open
                          [0, 1, 2, -1, -1],  # sentence 0 after ph1 t1 /t1: /t2 cannot come before t2
                          [-1, -1, -1, -1, -1]])  # sentence 1: its unpaired t1 is a placeholder of its own
    scores = torch.zeros(3, VOCAB)
    guard.restrict(scores, torch.tensor([0, 0, 1]), order, torch.tensor([9, 9, 9]))
    allowed = [{token for token in range(VOCAB) if scores[row, token] > float("-inf")} for row in range(3)]
    assert allowed[0] == {0, 1, 2, PH1, C2}  # EOS waits; t1, t2 written; /t1 is not innermost
    assert allowed[1] == {0, 1, 2, T2}
    assert allowed[2] == {0, 1, 2, T1}  # /t1, t2, /t2, ph1 are absent from sentence 1


def test_restrict_forces_the_symbols_when_only_enough_tokens_are_left():
    guard = RESERVED.guard([[T1, C1, PH1]], torch.device("cpu"))
    order = torch.tensor([[-1, 0, -1, -1, -1]])  # t1 open; /t1 and ph1 missing
    for steps_left, allowed in [(3, {0, 1, 2, PH1, C1}), (2, {PH1, C1}), (0, set(range(VOCAB)))]:
        scores = torch.zeros(1, VOCAB)
        guard.restrict(scores, torch.tensor([0]), order, torch.tensor([steps_left]))
        assert {token for token in range(VOCAB) if scores[0, token] > float("-inf")} == allowed, steps_left


def test_advance_records_the_order_of_the_symbols():
    guard = RESERVED.guard([[T1, C1, PH1]], torch.device("cpu"))
    order = guard.initial_state(1)
    for token in [0, T1, 1, PH1, C1]:
        order = guard.advance(order, torch.tensor([token]))
    assert order.tolist() == [[1, 0, 2, -1, -1]]


def test_kept_says_what_the_check_after_decoding_says():
    """`kept` (the guard's test of a hypothesis searched without it) against `placeholder_check.check` on random outputs
    over words, EOS-free, and every reserved symbol, for sources with placeholders, nested and unpaired tags."""
    rng = random.Random(0)
    sources = [[0, PH1, 1], [T1, 0, C1, PH1], [T1, T2, 0, C2, C1], [PH1], [0, 1], [T1, 2], [T2, C2, T1, C1]]
    guard = RESERVED.guard(sources, torch.device("cpu"))
    verdicts = set()
    for _ in range(3000):
        row = rng.randrange(len(sources))
        symbols = [token for token in sources[row] if token in NAMES]
        output = rng.sample(symbols, len(symbols)) + rng.choices([0, 1, PH1, T1, C1, T2, C2], k=rng.randint(0, 2))
        output = rng.sample(output, len(output)) if rng.random() < 0.5 else output[: rng.randint(0, len(output))]
        verdict = guard.kept(row, output)
        assert verdict == keeps(sources[row], output), (sources[row], output)
        verdicts.add(verdict)
    assert verdicts == {True, False}


def word_model(lines: list[str], with_symbols: bool) -> Subword:
    """A vocabulary of the lines, with the reserved symbols as one piece each or without them."""
    symbols = reserved_symbols() if with_symbols else []
    return train_subword(lines, DataConfig(subword="bpe", vocab_size=150), 150, user_symbols=symbols)


def test_reserved_ids_of_a_vocabulary_pair_the_tags():
    lines = ["uno dos ｟ph1｠ tres", "cuatro ｟t1｠ cinco ｟/t1｠"] * 20
    subword = word_model(lines, True)
    reserved = ReservedIds.of(subword, subword)
    pieces = [subword.processor.id_to_piece(token) for token in reserved.tgt.tolist()]
    assert sorted(pieces) == sorted(reserved_symbols())
    for index, piece in enumerate(pieces):
        partner = pieces[int(reserved.partner[index])]
        assert partner == (piece if "ph" in piece else piece.replace("/", "") if "/" in piece
                           else piece.replace("t", "/t"))
        assert bool(reserved.closing[index]) == ("/" in piece)
    plain = word_model(lines, False)
    assert ReservedIds.of(plain, plain) is None


# --- models that would break the symbols ---

SOURCES = [[0, PH1, 1], [T1, 0, C1, PH1], [T1, T2, 0, C2, C1], [PH1], [0, 1], [T1, 2], [T2, C2, T1, C1]]


def searches(model, src, src_mask, limits, guard):
    yield "greedy", [[hyp] for hyp in greedy_search(model, src, src_mask, limits, guard=guard)]
    sampler = Sampler(temperature=1.5, generator=torch.Generator().manual_seed(0))
    yield "sampling", [[hyp] for hyp in greedy_search(model, src, src_mask, limits, sampler, guard=guard)]
    for beam_size in (1, 2, 5):
        yield f"beam {beam_size}", beam_search(model, src, src_mask, limits, beam_size, guard=guard)


@pytest.mark.parametrize("seed", range(4))
def test_every_search_keeps_the_symbols_of_a_hostile_model(seed):
    """A line that is only a placeholder, nested tag pairs, a line without symbols, an unpaired tag: every
    hypothesis of every search keeps exactly its source's symbols; unguarded, the same searches do not."""
    model = hostile_decoder(seed, 12)
    src, src_mask, guard, limits = setup(SOURCES, 3)
    broken = 0
    for name, found in searches(model, src, src_mask, limits, guard):
        for source, hyps in zip(SOURCES, found):
            assert hyps and all(keeps(source, hyp.tokens) and hyp.constraints_met for hyp in hyps), (name, source)
    for _, found in searches(model, src, src_mask, limits, None):
        broken += sum(not keeps(source, hyp.tokens) for source, hyps in zip(SOURCES, found) for hyp in hyps)
    assert broken > 0  # the guard had something to do


def test_a_line_that_is_only_a_placeholder_keeps_it_within_a_limit_of_one_token():
    model = hostile_decoder(0, 4)  # max_len_a 0, b 1: only EOS would fit; the constraints make room for ph1
    src, src_mask, guard, limits = setup([[PH1]], 1)
    assert limits.tolist() == [2]
    for _, found in searches(model, src, src_mask, limits, guard):
        assert [hyp.tokens for hyp in found[0]][0] == [PH1]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_guarded_batch_is_searched_as_each_line_alone(beam_size):
    model = hostile_decoder(1, 12)
    src, src_mask, guard, limits = setup(SOURCES, 4)
    batched = beam_search(model, src, src_mask, limits, beam_size, guard=guard)
    for index, source in enumerate(SOURCES):
        one_src, one_mask, one_guard, one_limits = setup([source], 4)
        assert one_limits.tolist() == limits[index:index + 1].tolist()
        alone = beam_search(model, one_src, one_mask, one_limits, beam_size, guard=one_guard)
        assert [hyp.tokens for hyp in batched[index]] == [hyp.tokens for hyp in alone[0]]


# --- against exhaustive search ---

CASES = {
    "placeholder": ([PH1], None),
    "pair": ([T1, C1], None),
    "pair and placeholder": ([PH1, T1, C1], None),
    "nested pairs": ([T1, T2, C2, C1], None),
    "unpaired tag": ([T1], None),
    "no symbol": ([0], None),
    "with constraints": ([PH1, T1, C1], Constraints(positive=((0,),), negative=((1,),))),
    "with a prefix": ([PH1], Constraints(positive=((2,),), forced=(0,))),
}


@functools.cache
def allowed_outputs(case: str, limit: int) -> list[list[int]]:
    """Every output of fewer than `limit` tokens (EOS excluded) that keeps the case's symbols and meets its
    constraints; only the source's symbols and the words can be in one, so only those are tried."""
    source, constraints = CASES[case]
    tokens = WORDS + sorted(set(source) & set(NAMES))
    outputs = (list(seq) for length in range(limit) for seq in itertools.product(tokens, repeat=length))
    return [output for output in outputs
            if keeps(source, output) and meets(output, constraints or Constraints())]


@pytest.mark.parametrize("length_penalty", PENALTIES[:3], ids=lambda penalty: penalty.kind)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_wide_guarded_beam_finds_the_exhaustive_optimum(seed, case, length_penalty):
    source, constraints = CASES[case]
    limit = 6  # outputs of at most 5 tokens, then EOS
    model = hostile_decoder(seed, limit)
    allowed = allowed_outputs(case, limit)
    best_score, best_tokens = max((length_penalty(model.path_log_prob(seq), len(seq) + 1), seq) for seq in allowed)
    src, src_mask = encode_sources([source])
    guard = RESERVED.guard([source], torch.device("cpu"))
    # as wide as the outputs allowed: no live hypothesis is ever pruned
    [hyps] = beam_search(model, src, src_mask, torch.tensor([limit]), len(allowed), length_penalty,
                         constraints=None if constraints is None else [constraints], guard=guard)
    assert hyps[0].tokens == best_tokens
    assert hyps[0].score == pytest.approx(best_score, abs=1e-5)
    assert all(keeps(source, hyp.tokens) and meets(hyp.tokens, constraints or Constraints()) for hyp in hyps)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_user_constraints_that_contradict_the_symbols_give_way_to_them(beam_size):
    """A negative constraint on a symbol of the source cannot be met with it: the line is searched again with the
    guard alone, and says its constraints are not met."""
    model = hostile_decoder(2, 10)
    lines = [Constraints(negative=((PH1,),)), Constraints(positive=((0, 1),), forced=(2,))]
    sources = [[PH1, 0], [T1, C1]]
    src, src_mask, guard, limits = setup(sources, 5, lines)
    found = beam_search(model, src, src_mask, limits, beam_size, constraints=lines, guard=guard)
    assert all(keeps(sources[0], hyp.tokens) and not hyp.constraints_met for hyp in found[0])
    assert all(keeps(sources[1], hyp.tokens) and meets(hyp.tokens, lines[1]) and hyp.constraints_met
               for hyp in found[1])


# --- the PyTorch engine ---

TEXT_WORDS = "uno dos tres cuatro cinco seis siete ocho nueve diez".split()


def tiny_model(with_symbols: bool) -> LoadedModel:
    rng = random.Random(0)
    lines = [" ".join(rng.choices(TEXT_WORDS, k=rng.randint(1, 8))) for _ in range(80)]
    subword = word_model(lines, with_symbols)
    config = build_config({"model": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "heads": 2,
                                     "ffn": 32, "max_positions": 40}})
    torch.manual_seed(0)
    model = build_model(config.model, subword.vocab_size, subword.vocab_size, True).eval()
    if with_symbols:  # a random model that likes the reserved symbols, so that the guard has work to do
        output = torch.nn.Linear(16, subword.vocab_size)
        with torch.no_grad():
            output.weight.copy_(model.output.weight)
            output.bias.zero_()
            output.bias[[subword.processor.piece_to_id(symbol) for symbol in reserved_symbols()]] = 3.0
        model.output = output
    return LoadedModel(config, model, subword, subword)


LINES = ["uno ｟ph1｠ dos", "｟t1｠ tres ｟t2｠ cuatro ｟/t2｠ ｟/t1｠ ｟ph1｠", "｟ph2｠", "cinco seis",
         "｟t1｠ siete ｟/t1｠"]


@pytest.mark.parametrize("options", [{"beam": 1}, {"beam": 4, "nbest": 2}, {"sample": True, "beam": 1}],
                         ids=["greedy", "beam", "sampling"])
def test_the_engine_guards_masked_sources(options):
    engine = TorchEngine(tiny_model(True), DecodeConfig(max_len_a=1.0, max_len_b=2, **options), torch.device("cpu"))
    assert engine.capabilities.guards_placeholders
    translator = Translator(engine)
    for line, hyps in zip(LINES, translator.translate_nbest(LINES)):
        assert all(check(line, text).ok for text, _ in hyps), (line, hyps)
    unguarded = translator.with_decode(guard_placeholders=False).translate(LINES)
    assert any(not check(line, text).ok for line, text in zip(LINES, unguarded))


class CopyingModel(EncoderDecoder):
    """Writes its source back, leaving out the ids of `drops`: sure of each token (log-probability 8 above the
    rest), whatever the beam."""

    def __init__(self, drops: set[int], vocab: int):
        super().__init__()
        self.drops, self.vocab = drops, vocab

    def encode(self, src, src_mask):
        kept = [[token for token, real in zip(row.tolist(), mask.tolist()) if real and token not in self.drops]
                for row, mask in zip(src, src_mask)]
        width = max(map(len, kept)) + 1
        return {"target": torch.tensor([row + [EOS] * (width - len(row)) for row in kept]), "src_mask": src_mask}

    def init_state(self, memory):
        return {"step": torch.zeros(memory["target"].size(0), dtype=torch.long)}

    def step(self, prev, state, memory):
        step = state["step"].clamp(max=memory["target"].size(1) - 1)
        wanted = memory["target"].gather(1, step.unsqueeze(1))
        scores = torch.zeros(prev.size(0), self.vocab).scatter_(1, wanted, 8.0)
        return torch.log_softmax(scores, dim=-1), {"step": state["step"] + 1}, None


def test_the_guard_changes_no_beam_search_line_whose_symbols_the_model_keeps_by_itself():
    """Beam search under the guard writes exactly what it writes without it on every line whose symbols the model
    keeps by itself; the lines where it drops one (here ｟/t1｠) get them all."""
    loaded = tiny_model(True)
    closing = loaded.tgt_subword.processor.piece_to_id("｟/t1｠")
    loaded = LoadedModel(loaded.config, CopyingModel({closing}, loaded.tgt_subword.vocab_size), loaded.src_subword,
                         loaded.tgt_subword)
    translator = Translator(TorchEngine(loaded, DecodeConfig(beam=4, max_len_b=3), torch.device("cpu")))
    lines = [*LINES, "uno ｟ph1｠", "｟ph1｠ dos ｟ph2｠ tres", "ocho ｟t2｠ nueve ｟/t2｠"]
    guarded = translator.translate_nbest(lines)
    free = translator.with_decode(guard_placeholders=False).translate_nbest(lines)
    for line, with_guard, without in zip(lines, guarded, free):
        assert all(check(line, text).ok for text, _ in with_guard), (line, with_guard)
        if "｟/t1｠" in line:
            assert not check(line, without[0][0]).ok
        else:
            assert with_guard == without and without[0][0] == line, (line, with_guard, without)


def test_the_guard_leaves_the_free_best_where_a_search_by_banks_would_lose_it():
    """With beam 2 and one symbol, a search that gives each bank (symbol written or not) its own beam keeps
    `｟ph1｠ uno` and `uno dos` after two steps and ends with `｟ph1｠ uno dos`; the free search keeps the two best,
    `｟ph1｠ uno` and `uno ｟ph1｠`, and finds the better `uno ｟ph1｠ dos`, which keeps the symbol: the guarded engine
    returns it."""
    loaded = tiny_model(True)
    piece = loaded.tgt_subword.processor.piece_to_id
    vocab, (uno, dos, ph1) = loaded.tgt_subword.vocab_size, (piece("▁uno"), piece("▁dos"), piece("｟ph1｠"))
    probs = torch.full((4, vocab, vocab), 0.01 / (vocab - 1))
    probs[:, :, EOS] = 0.99

    def row(step: int, prev: int, **named: float) -> None:
        ids = {"uno": uno, "dos": dos, "ph1": ph1, "eos": EOS}
        probs[step, prev] = (1 - sum(named.values())) / (vocab - len(named))
        for name, value in named.items():
            probs[step, prev, ids[name]] = value

    row(0, BOS, uno=0.5, ph1=0.45)
    row(1, uno, ph1=0.5, dos=0.4)
    row(1, ph1, uno=0.6)
    row(2, ph1, dos=0.95)  # uno ｟ph1｠ -> dos
    row(2, uno, dos=0.5)  # ｟ph1｠ uno -> dos
    row(2, dos, ph1=0.1)
    loaded = LoadedModel(loaded.config, FixedDecoder(probs), loaded.src_subword, loaded.tgt_subword)
    translator = Translator(TorchEngine(loaded, DecodeConfig(beam=2, max_len_b=4), torch.device("cpu")))
    best = loaded.tgt_subword.decode([[uno, ph1, dos]])
    assert translator.with_decode(guard_placeholders=False).translate(["uno ｟ph1｠ dos"]) == best
    assert translator.translate(["uno ｟ph1｠ dos"]) == best


def test_a_model_without_reserved_symbols_translates_as_without_the_guard():
    engine = TorchEngine(tiny_model(False), DecodeConfig(beam=3, max_len_b=4), torch.device("cpu"))
    assert engine.reserved is None
    translator = Translator(engine)
    lines = ["uno dos tres", "cuatro cinco seis siete", "ocho"]
    assert translator.translate(lines) == translator.with_decode(guard_placeholders=False).translate(lines)


def test_the_cost_experiment_lays_out_the_symbols_as_a_vocabulary_does():
    cost = load_script("benchmarks/experiments/guard_cost.py", "guard_cost")
    subword = word_model(["uno ｟ph1｠ dos"] * 20, True)
    fake, real = cost.reserved_ids(), ReservedIds.of(subword, subword)
    assert torch.equal(fake.partner, real.partner) and torch.equal(fake.closing, real.closing)
    sources = cost.sources(40, 0.5)
    guard = fake.guard(sources, torch.device("cpu"))
    assert 0 < int(guard.present.any(dim=1).sum()) < 40 and bool(guard.paired_close.any())
