"""The CTranslate2 engine: a directory written by `nmtkit export` (`exported.py`), searched as nmtkit searches.

The translator keeps nmtkit's own subword models, batching and output format (`translator.py`); only the
search of each batch runs in CTranslate2, with options chosen so that it finds what `nmtkit.decoding.search` finds:
- beam search keeps the K best of 2K candidates per step in both; EOS candidates ranked within the top K finish.
  A sentence ends with K finished hypotheses, ranked by log P(Y|X) / lp(|Y|) with |Y| counting the EOS
  (`return_end_token`): `average` is CTranslate2's length_penalty 1, `sockeye` with beta 0 is length_penalty
  alpha, and `none` is a length penalty too small to change a score (CTranslate2 ends a search with length
  penalty 0 once its best candidate is EOS, nmtkit once it has K hypotheses). `gnmt`, `sockeye` with beta != 0,
  a word penalty and --stop-finished have no CTranslate2 counterpart and are refused.
- the length limit a * |X| + b (EOS included) is nmtkit's own (`length_limits`), per sentence: a batch is searched
  in one call up to its longest limit, and the sentences whose search came within a token of their own limit are
  searched again in groups of one limit (`_search_at_once`, `search_groups`). nmtkit ends a hypothesis that reaches its
  limit with a forced EOS, which CTranslate2 cannot do: it cuts the hypothesis one token earlier instead, and the
  EOS and its log-probability are added afterwards (`score_batch`); a beam search that reached the limit is run
  again to see every hypothesis it finished, and keeps those nmtkit's beam has room for (`finished_at_limit`,
  `nmtkit_room`).
- greedy search sums log-probabilities without length normalization, as nmtkit's. Scores that CTranslate2 computes
  otherwise (a minimum length renormalizes each step without EOS, sampling scores the temperature-scaled
  distribution) are computed again. Sampling draws from the same distribution with CTranslate2's random numbers
  (seeded by --seed), so its samples are not nmtkit's.
So greedy search gives nmtkit's tokens and scores, and beam search nmtkit's best hypothesis, except where the two
searches cannot be made alike: below the best, an n-best list can differ when more hypotheses finish in a
sentence's last step than nmtkit's beam has room for (nmtkit keeps the best of them, CTranslate2 all, and then its
K best overall); with a minimum length, the renormalized steps can rank beams otherwise; a beam that reaches the
length limit continues in nmtkit from the K best non-EOS of 2K candidates, in CTranslate2 from those within the top
K (they differ when an EOS is among the top K one step before the limit); and with --coverage-penalty, a
hypothesis cut at the limit keeps CTranslate2's score, whose coverage lacks the EOS step.
An export of a model that reads its language tag in the decoder (M2M100, NLLB; `ctranslate2_model`) is searched
with the tag as CTranslate2's target prefix, which CTranslate2 counts in |Y|: `sockeye` with beta 1 is its length
penalty alpha (`decoder_tags_length_penalty`), and the sentences whose EOS it would hide at the first step after
the prefix are searched as nmtkit searches them (`_eos_first`).
An export with a vocabulary shortlist (`nmtkit export --shortlist`, `nmtkit.export.shortlist`) is searched with it
(`use_vmap`): each step's softmax then covers the batch's candidate pieces only, so translations can differ from
the full vocabulary's and scores are log-probabilities within the shortlist (except for a hypothesis rescored at
the length limit, which `score_batch` scores over the whole vocabulary).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from itertools import groupby
from pathlib import Path

from nmtkit.config.sections import DecodeConfig
from nmtkit.decoding.hypotheses import Hypothesis, LengthPenalty, length_limits
from nmtkit.errors import NmtkitError
from nmtkit.translate.ctranslate2_model import CTranslate2Model
from nmtkit.translate.engine import Capabilities, check_tags, override_decode
from nmtkit.translate.exported import ExportedModel, load_exported

# CTranslate2 divides by |Y|^length_penalty and, with a length penalty of exactly 0, stops a sentence as soon as
# its best candidate is EOS. |Y|^1e-30 is exactly 1.0 in float arithmetic, so this ranks as `none` and stops as
# nmtkit does, with K finished hypotheses.
NO_LENGTH_PENALTY = 1e-30


def ct2_length_penalty(decode: DecodeConfig, decoder_tags: bool = False) -> float:
    """CTranslate2's length_penalty for nmtkit's beam-search ranking, or an error for one it has not. With the tag
    in the decoder (`decoder_tags`), CTranslate2 counts it in |Y|: `sockeye` with beta 1, (1 + |Y|)^alpha / 2^alpha,
    ranks as its length_penalty alpha (the scores differ by the factor 2^alpha, `CTranslate2Engine.ct2_divisor`)."""
    if decode.word_penalty:
        raise NmtkitError("CTranslate2 has no word penalty; translate with the checkpoint for --word-penalty")
    if decoder_tags:
        return decoder_tags_length_penalty(decode)
    if decode.length_penalty == "average":
        return 1.0
    if decode.length_penalty == "sockeye" and decode.beta == 0:
        return decode.alpha
    if decode.length_penalty == "none":
        return NO_LENGTH_PENALTY
    raise NmtkitError(f"CTranslate2 divides scores by |Y|^alpha only: --length-penalty {decode.length_penalty}"
                      f"{' with --beta ' + str(decode.beta) if decode.length_penalty == 'sockeye' else ''} has no "
                      "counterpart; use none, average or sockeye with --beta 0, or translate with the checkpoint")


def decoder_tags_length_penalty(decode: DecodeConfig) -> float:
    """`ct2_length_penalty` of a model that reads its target-language tag in the decoder (M2M100, NLLB)."""
    if decode.coverage_penalty:
        raise NmtkitError("an exported M2M100 or NLLB model has no --coverage-penalty (CTranslate2 counts the "
                          "attention of its language tag's step); translate with the checkpoint")
    if decode.length_penalty == "sockeye" and decode.beta == 1:
        return decode.alpha
    if decode.length_penalty == "none":
        return NO_LENGTH_PENALTY
    beta = f" with --beta {decode.beta}" if decode.length_penalty == "sockeye" else ""
    raise NmtkitError(f"CTranslate2 counts an M2M100 or NLLB model's language tag in |Y|: --length-penalty "
                      f"{decode.length_penalty}{beta} has no counterpart; use none or sockeye with --beta 1 (the "
                      "import's default), or translate with the checkpoint")


def search_options(decode: DecodeConfig, decoder_tags: bool = False) -> dict:
    """translate_batch options that search as nmtkit's settings do (see the module docstring); errors for the
    settings CTranslate2 cannot follow (`decoder_tags`: the model reads its language tag in the decoder). The length
    limits are set per group of sentences (`CTranslate2Search`)."""
    if decode.dtype != "float32":
        raise NmtkitError("an exported model computes in the precision it was exported in; --fp16/--bf16 apply to "
                          "checkpoints (export with --quantization float16 or bfloat16 instead)")
    if decode.epsilon:
        raise NmtkitError("CTranslate2 has no epsilon sampling: use --top-p with an exported model, or translate with "
                          "the checkpoint for --epsilon")
    options = {"return_scores": True, "return_end_token": True, "max_input_length": 0}
    if decode.sample:
        return {**options, "beam_size": 1, "length_penalty": 0.0, "sampling_topk": decode.top_k,
                "sampling_topp": decode.top_p, "sampling_temperature": decode.temperature}
    if decode.beam == 1:
        return {**options, "beam_size": 1, "length_penalty": 0.0}
    if 0 < decode.stop_finished < decode.beam:
        raise NmtkitError("CTranslate2 ends a sentence with beam-size hypotheses only; --stop-finished needs the "
                          "checkpoint")
    return {**options, "beam_size": decode.beam, "num_hypotheses": decode.beam,
            "length_penalty": ct2_length_penalty(decode, decoder_tags), "coverage_penalty": decode.coverage_penalty}


# CTranslate2 4.x wheels are built with CUDA 12 and load its cuBLAS by this name when they first compute on a GPU.
CUBLAS = "libcublas.so.12"


def cuda_libraries_missing() -> str | None:
    """The CUDA library CTranslate2 would fail to load at its first product on a GPU, or None when it loads."""
    import ctypes

    try:
        ctypes.CDLL(CUBLAS)
    except OSError:
        return CUBLAS
    return None


def ct2_device(name: str) -> tuple[str, int]:
    """nmtkit's --device (auto, cpu, cuda, cuda:N) as CTranslate2's device and device index. `auto` is the GPU when
    CTranslate2 sees one and can load the CUDA libraries it needs; `cuda` without them is an error."""
    import ctranslate2

    kind, _, index = name.partition(":")
    if kind == "auto":
        usable = ctranslate2.get_cuda_device_count() > 0 and cuda_libraries_missing() is None
        return ("cuda", 0) if usable else ("cpu", 0)
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise NmtkitError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N")
    if kind == "cuda" and ctranslate2.get_cuda_device_count() <= int(index or 0):
        raise NmtkitError(f"device {name} requested but CTranslate2 sees {ctranslate2.get_cuda_device_count()} CUDA "
                          "device(s); use --device cpu")
    if kind == "cuda" and (missing := cuda_libraries_missing()):
        raise NmtkitError(f"CTranslate2 {ctranslate2.__version__} needs CUDA 12's cuBLAS on a GPU and cannot load "
                          f"{missing} (pip install nvidia-cublas-cu12, or put it on LD_LIBRARY_PATH); or use "
                          "--device cpu")
    return kind, int(index or 0)


def searched_at_once(decode: DecodeConfig) -> bool:
    """Whether a batch is first searched in one call up to its longest length limit
    (`CTranslate2Engine._search_at_once`): not with a minimum length (CTranslate2 bounds it by the call's limit), a
    coverage penalty (one sentence a call, see `CTranslate2Engine.one_each`) or sampling (its random numbers depend
    on the batch anyway)."""
    return not (decode.min_len or decode.coverage_penalty or decode.sample)


def rescored(ended: bool, decode: DecodeConfig) -> bool:
    """Whether a hypothesis' log-probability is computed again: one cut at the length limit (not `ended` with EOS)
    lacks the EOS nmtkit forces there; with a minimum length CTranslate2 renormalizes each step's probabilities
    without EOS, and when sampling it scores tokens by the temperature-scaled distribution, which nmtkit does not;
    with a coverage penalty its score is not a log-probability."""
    return not ended or decode.min_len > 0 or decode.sample or decode.coverage_penalty > 0


def search_groups(limits: list[int], one_each: bool) -> list[tuple[list[int], int]]:
    """The rows that CTranslate2 searches in one call, with their length limit (EOS included, nmtkit's
    `length_limits`): the rows of one limit together, or each row alone (`CTranslate2Engine.one_each`)."""
    if one_each:
        return [([row], limit) for row, limit in enumerate(limits)]
    order = sorted(range(len(limits)), key=lambda row: limits[row])
    return [(list(rows), limit) for limit, rows in groupby(order, key=lambda row: limits[row])]


def nmtkit_room(hyps: list[Hypothesis], beam_size: int) -> list[Hypothesis]:
    """The hypotheses nmtkit's beam keeps of those CTranslate2 finished for a sentence: they finish step by step (a
    hypothesis' length is its last step), the better log-probability first within a step, until the beam holds K
    (CTranslate2 keeps every hypothesis that ends in the step that fills it)."""
    return sorted(hyps, key=lambda hyp: (len(hyp.tokens), -hyp.log_prob))[:beam_size]


CT2_FILES = ("model.bin", "config.json", "shared_vocabulary.json", "source_vocabulary.json", "target_vocabulary.json")


def load_engine(directory: Path, device: str, threads: int, inter_threads: int, decode: dict) -> CTranslate2Engine:
    """The engine of `Translator.load` for an exported directory: `decode` overrides the checkpoint's decode
    settings, and a target language the model lacks is refused before CTranslate2 loads it."""
    exported = load_exported(directory)
    settings = override_decode(exported.decode, decode)
    check_tags(settings, exported)
    for name in CT2_FILES:  # CTranslate2 would read a device (/dev/zero) or a FIFO forever
        if (directory / name).exists() and not (directory / name).is_file():
            raise NmtkitError(f"{directory} is a damaged export ({name} is not a file); export it again")
    return CTranslate2Engine(exported, settings, device, threads, inter_threads)


class CTranslate2Engine:
    """Searches batches of subword ids with CTranslate2 and returns nmtkit Hypotheses (`nmtkit.decoding.search`)."""

    name = "CTranslate2"
    # tokens per batch of a one-thread worker on int8 weights: 1,000 (as 2,000 at --inter-threads 2) against the
    # default 3,000 took 15.2 s against 15.9 s for the Acts verses (int8 export, beam 5, medians of 5 alternating
    # whole commands on an Intel Xeon family 6 model 85); float32 weights are as fast or faster in large batches
    single_thread_int8_batch = 1000

    def __init__(self, exported: ExportedModel, decode: DecodeConfig, device: str = "auto", threads: int = 0,
                 inter_threads: int = 1):
        self.loaded = exported
        self.configure(decode)
        # EOS takes a position; with the tag in the decoder, EOS takes the decoder's first (as in the checkpoint)
        self.max_source = exported.max_positions - (1 if exported.source_token is None else 2)
        self.model = CTranslate2Model(exported, ct2_device(device), threads, inter_threads)

    def configure(self, decode: DecodeConfig) -> None:
        import ctranslate2

        self.options, self.decode = search_options(decode, self.loaded.source_token is not None), decode
        if self.loaded.shortlist:
            self.options["use_vmap"] = True
        self.length_penalty = LengthPenalty(decode.length_penalty, decode.alpha, decode.beta)
        if decode.sample:
            ctranslate2.set_random_seed(decode.seed)

    def with_decode(self, decode: DecodeConfig) -> CTranslate2Engine:
        """This search with other settings, on the same loaded model."""
        variant = copy.copy(self)
        variant.configure(decode)
        return variant

    @property
    def capabilities(self) -> Capabilities:
        """No constraints or alignments. Workers: `--inter-threads` (CTranslate2 releases the GIL while it
        searches), or one when sampling, for its random numbers; a worker of one CPU thread searches int8 weights
        fastest in small batches, of at most `single_thread_int8_batch` tokens (the speed of each batch size is in
        docs/export-serve.md)."""
        single_thread_int8 = (self.model.device == "cpu" and self.model.intra_threads == 1
                              and self.loaded.quantization.startswith("int8"))
        return Capabilities(workers=1 if self.decode.sample else self.model.inter_threads,
                            batch_tokens=self.single_thread_int8_batch if single_thread_int8 else 0)

    @property
    def device(self) -> str:
        """The device it computes on, as torch names it ("cpu", "cuda:0")."""
        return "cpu" if self.model.device == "cpu" else f"cuda:{self.model.device_index}"

    @property
    def beam_search(self) -> bool:
        return self.options["beam_size"] > 1

    def search(self, sources: list[list[int]], constraints: None,
               check: Callable[[], None] | None) -> list[list[Hypothesis]]:
        """See `Engine.search` (no constraints); `check` is called once, before the batch: a CTranslate2 call cannot
        be interrupted."""
        if check is not None:
            check()
        found: list[list[Hypothesis]] = [[] for _ in sources]
        rows = self._search_at_once(sources, found) if searched_at_once(self.decode) else list(range(len(sources)))
        for group, limit in search_groups(self.limits([sources[row] for row in rows]), self.one_each):
            group_rows = [rows[index] for index in group]
            for row, hyps in zip(group_rows, self._search_group([sources[row] for row in group_rows], limit)):
                found[row] = self._best(hyps)
        return found

    def _best(self, hyps: list[Hypothesis]) -> list[Hypothesis]:
        return sorted(hyps, key=lambda hyp: hyp.score, reverse=True)[: self.decode.nbest]

    def limits(self, sources: list[list[int]]) -> list[int]:
        """Each source's output length limit, EOS included (nmtkit's `length_limits`)."""
        return length_limits([len(ids) + 1 for ids in sources], self.decode.max_len_a, self.decode.max_len_b,
                             self.max_source)

    def _search_at_once(self, sources: list[list[int]], found: list[list[Hypothesis]]) -> list[int]:
        """Search every source in one call, up to the longest of their length limits, and keep in `found` each
        sentence whose hypotheses all ended with EOS at least two tokens before its own limit: its search stopped
        before it came near that limit, so it went as it goes in a call with its own limit (with the same float
        rounding as in any batch). Returns the other rows, which are searched again with their own limit; with
        lengths far below the limits, as in translation, nearly every sentence is done in this one call instead of
        one call per distinct limit."""
        limits = self.limits(sources) if sources else [0]
        if max(limits) <= 1:
            return list(range(len(sources)))
        tokens = self.model.pieces(sources)
        redo = []
        for row, (hypotheses, scores) in enumerate(self._translate(tokens, max(limits))):
            if all(pieces[-1:] == [self.model.eos_piece] and len(pieces) <= limits[row] - 2 for pieces in hypotheses):
                hyps = [self._hypothesis(pieces, score, None) for pieces, score in zip(hypotheses, scores)]
                found[row] = self._best(nmtkit_room(hyps, self.options["beam_size"]) if self.beam_search else hyps)
            else:
                redo.append(row)
        return redo

    @property
    def one_each(self) -> bool:
        """Whether each sentence is searched alone: with a coverage penalty, CTranslate2 4.8 gives the sentences
        after the first of a batch another sentence's attention history, and counts the attention its padding
        positions get (about 1e-20: log coverage -46) in the penalty."""
        return self.beam_search and self.decode.coverage_penalty > 0

    def _search_group(self, sources: list[list[int]], limit: int) -> list[list[Hypothesis]]:
        """Sentences of one length limit. CTranslate2 stops one token short of it, where nmtkit forces the EOS: the
        hypotheses cut there get that EOS afterwards (`CTranslate2Model.score`), as do all where CTranslate2's scores
        are not nmtkit's (see `rescored`). A beam search that reached the limit is run again to see all it finished
        (`finished_at_limit`), and `nmtkit_room` keeps what nmtkit's beam has room for."""
        tokens = self.model.pieces(sources)
        results = self._translate(tokens, limit)
        if self.beam_search and limit > 1:
            reached = [row for row, (hypotheses, _) in enumerate(results)
                       if any(pieces[-1:] != [self.model.eos_piece] for pieces in hypotheses)]
            for row, result in zip(reached, self.finished_at_limit([tokens[row] for row in reached], limit)):
                results[row] = result
        todo = [(row, rank) for row, (hypotheses, _) in enumerate(results) for rank, pieces in enumerate(hypotheses)
                if rescored(pieces[-1:] == [self.model.eos_piece], self.decode)]
        log_probs = self.model.score([tokens[row] for row, _ in todo], [results[row][0][rank] for row, rank in todo])
        recomputed = dict(zip(todo, log_probs))
        found = [[self._hypothesis(pieces, score, recomputed.get((row, rank)))
                  for rank, (pieces, score) in enumerate(zip(*result))] for row, result in enumerate(results)]
        return [nmtkit_room(hyps, self.options["beam_size"]) for hyps in found] if self.beam_search else found

    def _translate(self, tokens: list[list[str]], limit: int, **options) -> list[tuple[list[list[str]], list]]:
        options, min_len = {**self.options, **options}, min(self.decode.min_len, limit - 1)
        if not (self.beam_search and self.model.decoder_tags and min_len == 0 and limit > 1):
            return self.model.translate(tokens, limit, min_len, options)
        hidden = self.model.eos_hidden(tokens, options["beam_size"], options.get("use_vmap", False))
        results: list = [None] * len(tokens)
        for flag in (False, True):
            rows = [row for row, value in enumerate(hidden) if value is flag]
            sources = [tokens[row] for row in rows]
            if rows:
                found = self._eos_first(sources, limit, options) if flag else \
                    self.model.translate(sources, limit, 0, options)
                for row, result in zip(rows, found):
                    results[row] = result
        return results

    def _eos_first(self, tokens: list[list[str]], limit: int, options: dict) -> list[tuple[list[list[str]], list]]:
        """The beam search of sentences whose EOS CTranslate2 hides at their first step (`eos_hidden`) as nmtkit's
        goes: the empty hypothesis finishes there and takes a place of the beam's, and the K best other tokens go
        on. CTranslate2 goes on from those when EOS is barred at that step (a minimum length of 1), with scores
        that lack log p(not EOS), so the finished hypotheses are scored again (`CTranslate2Model.score`) and given
        CTranslate2's meaning (divided by its `ct2_divisor`)."""
        beam = options["beam_size"]
        room = round(beam * options.get("patience", 1.0)) - 1  # finished hypotheses beside the empty one
        found = self.model.translate(tokens, limit, 1, {**options, "patience": room / beam,
                                                        "num_hypotheses": min(options["num_hypotheses"], room)})
        eos = self.model.eos_piece
        ended = [(row, rank) for row, (hypotheses, _) in enumerate(found) for rank, pieces in enumerate(hypotheses)
                 if pieces[-1:] == [eos]]
        log_probs = self.model.score([tokens[row] for row, _ in ended], [found[row][0][rank] for row, rank in ended])
        for (row, rank), log_prob in zip(ended, log_probs):
            found[row][1][rank] = log_prob / self.ct2_divisor(len(found[row][0][rank]) + 1)
        empty = self.model.score(tokens, [[] for _ in tokens])
        return [([[eos], *hypotheses], [log_prob / self.ct2_divisor(2), *scores])
                for (hypotheses, scores), log_prob in zip(found, empty)]

    def finished_at_limit(self, tokens: list[list[str]], limit: int) -> list[tuple[list[list[str]], list]]:
        """Every hypothesis the beam search of these sentences finished. Each reached the length limit, so it had
        fewer than K finished hypotheses before the last step, and CTranslate2 keeps the best K of those and the K
        it cuts there by its own scores, which lack the EOS log-probability (a cut hypothesis that repeats itself
        looks better than it is). With patience 2 (go on until 2K finished) the same search runs, as no sentence
        gets K before the last step, and all of them, fewer than 2K, are returned."""
        if not tokens:
            return []
        return self._translate(tokens, limit, patience=2.0, num_hypotheses=2 * self.options["beam_size"])

    def _hypothesis(self, pieces: list[str], score: float, log_prob: float | None) -> Hypothesis:
        """nmtkit's Hypothesis for CTranslate2's `pieces` and `score`; `log_prob` when it was computed again, and
        then a beam-search score of nmtkit's ranking (with a coverage penalty, CTranslate2's score is kept: the
        coverage of a cut hypothesis lacks the EOS step)."""
        pieces = pieces[:-1] if pieces[-1:] == [self.model.eos_piece] else pieces
        if log_prob is None and self.beam_search and self.model.decoder_tags:  # CTranslate2 counted the tag in |Y|
            log_prob = score * self.ct2_divisor(len(pieces) + 2)
            score = self.length_penalty(log_prob, len(pieces) + 1)
        elif log_prob is None:  # ended with EOS: CTranslate2's score means what nmtkit's does
            log_prob = score * self.length_penalty.divisor(len(pieces) + 1) if self.beam_search else score
        elif not self.beam_search:
            score = log_prob
        elif not self.decode.coverage_penalty:
            score = self.length_penalty(log_prob, len(pieces) + 1)
        return Hypothesis([self.model.tgt_ids[piece] for piece in pieces], score, log_prob)

    def ct2_divisor(self, length: int) -> float:
        """What CTranslate2 divided the log-probability of a hypothesis of `length` steps by: length^alpha."""
        return float(length) ** self.options["length_penalty"]

    def token_log_probs(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[float]]:
        pieces = self.model.tgt_pieces
        return self.model.token_log_probs(self.model.pieces(sources), [[pieces[index] for index in ids]
                                                                       for ids in targets])

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[list[float]]]:
        pieces = self.model.tgt_pieces
        return self.model.attention(self.model.pieces(sources), [[pieces[index] for index in ids] for ids in targets])
