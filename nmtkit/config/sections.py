"""Typed configuration: dataclasses with defaults and help text, YAML files, dotted overrides.

Unknown keys and values of the wrong type are errors: a typo never silently falls back to a default.
Each model registers its own config dataclass (see `nmtkit.registry`); `Config.model` holds an instance of it,
which `nmtkit.config.run.build_config` chooses by the model's name. Reading and checking the values of a section
(`from_dict`, `check_numbers`) is `nmtkit.config.values`. This module imports no other part of nmtkit but those
two.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from nmtkit.config.values import Seconds
from nmtkit.errors import NmtkitError


def option(default: Any, help: str, low: float | None = None, high: float | None = None) -> Any:
    """A dataclass field with a default, its help text and, for a number, the range `from_dict` accepts (inclusive;
    None: unbounded) in one place."""
    metadata = {"help": help, "range": (low, high)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


MAX_LINE_BYTES = 1 << 20  # the default longest line a reader takes (data.max_line_bytes, translate, filter-distilled)
LINE_CAP_HELP = ("the longest line read, in bytes (its newline not counted): a longer one is an error naming the "
                 "file and line, found while at most this many bytes of it are held")


@dataclass
class DataConfig:
    """How `nmtkit prepare` cleans the corpus and learns subwords."""

    subword: Literal["bpe", "unigram", "char", "word"] = option(
        "bpe", "SentencePiece model type: bpe, unigram, char or word")
    vocab_size: int = option(8000, "subword vocabulary size (per side when not joint)", 1, 2**31 - 1)
    joint: bool = option(True, "one subword model and vocabulary shared by source and target")
    normalization: Literal["identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"] = option(
        "identity", "SentencePiece normalization rule. identity: decoded text is byte-identical to the text trained "
        "on and translated into (spaces included); the NFKC rules rewrite full-width punctuation, ligatures, "
        "superscripts and decomposed accents, and collapse runs of spaces, in the output too")
    byte_fallback: bool = option(
        True, "characters outside the vocabulary become UTF-8 byte pieces instead of the unknown piece (used when "
        "vocab_size is at least 1024: the 256 byte pieces take at most a quarter of the vocabulary)")
    character_coverage: float = option(1.0, "SentencePiece character coverage", 0.98, 1.0)
    max_sentences: int = option(1_000_000, "sentences sampled to train SentencePiece (0 = all)", 0)
    min_words: int = option(1, "drop training pairs with fewer words on either side (a character of a script "
                               "written without spaces, such as Chinese, Japanese or Thai, counts as a word)")
    max_words: int = option(250, "drop training pairs with more words on either side (counted as for min_words)")
    max_ratio: float = option(3.0, "drop training pairs whose length ratio (words, counted as for min_words) differs "
                                   "from the corpus median ratio by more than this factor (0 = off)")
    dedup: bool = option(True, "drop duplicate training pairs")
    near_dedup: bool = option(False, "drop training pairs equal to an earlier one once case, whitespace, punctuation, "
                                     "digits and symbols are left out (the first is kept)")
    langid: bool = option(True, "drop training pairs with a side that language identification (fastText lid.176, "
                                "offline) finds in another language than --src-lang/--tgt-lang (or a corpus' "
                                "languages); a side it cannot judge is kept and counted as unjudged; off when no "
                                "language is given")
    langid_min_letters: int = option(10, "language identification: sides with fewer letters are not judged (kept, "
                                         "counted as unjudged)", 0)
    langid_threshold: float = option(0.5, "language identification: a side is in another language only when the "
                                          "model's likeliest language has at least this probability", 0.0, 1.0)
    langid_floor: float = option(0.01, "language identification: a side is in its language when the model gives "
                                       "that language (or an accepted one) at least this probability", 0.0, 1.0)
    langid_accept: dict[str, list[str]] = option(
        {}, "languages language identification may also find for a language, e.g. {zh: [ja], hi: [mr, ne]} (close "
            "languages and scripts the model confuses)")
    script_share: float = option(0.1, "drop training pairs with a side whose words are less than this share in the "
                                      "scripts of its language (nmtkit/data/scripts.py; words counted as for "
                                      "min_words; 0 = off; off when no language is given)", 0.0, 1.0)
    scripts: dict[str, list[str]] = option({}, "scripts of languages the built-in table lacks or to write otherwise, "
                                               "e.g. {sr: [Latin], ain: [Katakana]}")
    numbers: bool = option(False, "drop training pairs whose sides hold different numbers (as multisets of digit "
                                  "strings: 1,000 1.000 1 000 and ١٠٠٠ are one number)")
    links: bool = option(True, "drop training pairs whose sides hold different URLs, e-mail addresses or file paths")
    copies: float = option(0.0, "drop training pairs whose sides share at least this share of their words (letters "
                                "only, case-folded; shared / all): untranslated copies (0 = off; 1 = the same "
                                "words)", 0.0, 1.0)
    copy_min_words: int = option(3, "copies: only pairs with at least this many words on each side", 1)
    max_repeat: int = option(20, "drop training pairs with a word repeated more than this many times in a row "
                                 "(0 = off)", 0)
    max_word_chars: int = option(100, "drop training pairs with a word longer than this many characters (words "
                                      "counted as for min_words: a character of Chinese, Thai... is one; 0 = off)", 0)
    symbols_only: bool = option(False, "drop training pairs with a side of no letter (only digits, punctuation, "
                                       "symbols)")
    removed_file: str = option("", "write every training pair a filter removed to this file as reason<TAB>source"
                                   "<TAB>target ('' = none)")
    seed: int = option(1, "random seed for subword sampling")
    subword_samples: int = option(
        1, "copies of the training corpus written: the first with the plain segmentation that translation uses, "
           "each further one sampled anew (BPE-dropout for bpe, sampling from the unigram model's segmentations); "
           "an epoch of training then passes over every copy")
    subword_alpha: float = option(0.1, "subword sampling: BPE-dropout probability (bpe) or smoothing (unigram)")
    placeholders: str = option(
        "none", "mask placeholders and markup (printf directives, format fields, tags, entities...) in the training "
        "pairs to reserved symbols that the vocabulary holds as single pieces: none, auto (every built-in family) or "
        "a pattern file (see docs/prepare.md); a placeholder only one side of a pair has stays text")
    max_line_bytes: int = option(MAX_LINE_BYTES, LINE_CAP_HELP, 1)

    def __post_init__(self):
        if self.subword_samples < 1:
            raise NmtkitError("data.subword_samples must be at least 1 (1: the training corpus once, unsampled)")
        if self.subword_samples > 1 and not (0 < self.subword_alpha < 1 and self.subword in ("bpe", "unigram")):
            raise NmtkitError("data.subword_samples > 1 samples segmentations: it needs a bpe or unigram subword "
                              "model and 0 < data.subword_alpha < 1")


# The settings of `nmtkit.data.clean`: what a corpus of a corpora file may set for itself (`clean:`).
FILTER_KEYS = ("min_words", "max_words", "max_ratio", "dedup", "near_dedup", "langid", "langid_min_letters",
               "langid_threshold", "langid_floor", "langid_accept", "script_share", "scripts", "numbers", "links",
               "copies", "copy_min_words", "max_repeat", "max_word_chars", "symbols_only")


@dataclass
class StageUntil:
    """When a training stage ends: at the first of its conditions met; a stage without any lasts to the end of the
    run (only the last stage may)."""

    updates: int = option(0, "end the stage after this many updates in it (0 = no such condition)", low=0)
    epochs: dict[str, float] = option({}, "end the stage once each corpus named has made this many passes (may be "
                                          "fractional) over its training lines in the stage, e.g. {clean: 2}")
    time: Seconds = option(0.0, "end the stage after this much training time in it, in seconds or written 90s, 45m "
                                "or 1.5h, as train.max_time counts it (0 = no such condition)", low=0)


@dataclass
class StageConfig:
    """One stage of training: the corpora its batches come from, each with its share of the target tokens, and
    when it ends."""

    mix: dict[str, float] = option({}, "each corpus' weight: its share of the stage's target tokens once the weights "
                                       "are normalised to sum to 1, e.g. {clean: 0.6, crawled: 0.4}")
    until: StageUntil = field(default_factory=StageUntil, metadata={"help": "when the stage ends"})
    modifiers: dict[str, dict[str, float]] = option(
        {}, "on-the-fly modifiers of each corpus' pairs and the probability of each for a pair, e.g. {crawled: "
            "{uppercase: 0.02, typos: 0.1}} (uppercase, titlecase, typos, placeholder, remove_end_punct, "
            "inline_noise: nmtkit.training.modifiers); merge: P starts a pair of 2-4 consecutive pairs of a batch; "
            "bpe_dropout: P segments every pair anew, each BPE merge skipped with probability P")

    def __post_init__(self):
        if not self.mix:
            raise NmtkitError("a training stage needs a mix: the corpora it draws from and their weights, e.g. "
                              "mix: {clean: 1}")
        if not (min(self.mix.values()) >= 0 and sum(self.mix.values()) > 0):
            raise NmtkitError(f"stage mix {self.mix}: a weight is a number >= 0, and one at least is above 0")
        for name, passes in self.until.epochs.items():
            if not (passes > 0 and self.mix.get(name)):
                raise NmtkitError(f"stage until.epochs {name}: {passes}: give passes above 0 of a corpus the stage's "
                                  "mix draws from (else the stage would never end)")
        for name, chances in self.modifiers.items():
            if not (self.mix.get(name) and all(0 <= chance <= 1 for chance in chances.values())):
                raise NmtkitError(f"stage modifiers {name}: {chances}: give probabilities in [0, 1] to a corpus the "
                                  "stage's mix draws from")


@dataclass
class TrainConfig:
    """The training loop: optimisation, schedule, budgets, validation and checkpoints."""

    max_steps: int = option(0, "stop after this many updates (0 = no limit)")
    max_time: Seconds = option(0.0, "stop after this much training time, in seconds or written 90s, 45m or 1.5h "
                                    "(0 = no limit)")
    max_epochs: int = option(0, "stop after this many epochs (0 = no limit)")
    batch_tokens: int = option(0, "token budget per batch (source or target, padding included); 0 = by device: "
                                  "512 on a CPU, 4096 on a GPU")
    update_freq: int = option(1, "accumulate gradients over this many batches per update (per process)", low=1)
    lr: float = option(-1.0, "peak learning rate, reached at the end of warmup; -1 = by device: 1e-3 on a CPU, "
                             "7e-4 on a GPU")
    warmup: int = option(-1, "linear warmup steps, then the lr_schedule's decay; -1 = by device: 500 on a CPU, "
                             "4000 on a GPU, and at most warmup_share of max_steps")
    warmup_share: float = option(
        0.1, "the linear schedule's warmup ends, at the latest, once this share of the budget (max_steps or max_time, "
        "whichever is further) is spent, so that a short run still spends most of its updates after it; 0 = after "
        "train.warmup updates only", low=0.0, high=1.0)
    lr_schedule: Literal["auto", "inverse_sqrt", "linear", "wsd"] = option(
        "auto", "after the warmup, inverse_sqrt: lr * sqrt(warmup / step); linear: lr decays linearly to 0 at the end "
        "of the budget (the fraction of max_steps or max_time spent, whichever is further); wsd (warmup-stable-decay): "
        "lr stays at its peak, then decays linearly to 0 over the last train.cooldown of the budget; auto = by "
        "device: linear on a CPU when the run has a budget, inverse_sqrt otherwise")
    cooldown: float = option(0.2, "with lr_schedule wsd: the share of the budget at its end over which lr decays to 0",
                             low=0.0, high=1.0)
    adam_beta1: float = option(0.9, "Adam beta1")
    adam_beta2: float = option(0.98, "Adam beta2")
    adam_eps: float = option(1e-9, "Adam epsilon")
    weight_decay: float = option(0.1, "AdamW weight decay, on every weight (0.1: the Bible recipe's, "
                                      "recipes/bible/README.md)")
    label_smoothing: float = option(0.1, "label smoothing epsilon")
    ema: float = option(
        0.0, "keep an exponential moving average of the weights with this decay (e.g. 0.999; ramped up over the first "
        "updates): validation, model.pt and the kept checkpoints hold the average, last.pt both (0 = off)",
        low=0.0, high=0.999999)
    dropout_from: float = option(
        0.0, "late dropout (Liu et al. 2023): the model's dropout is off until this fraction of the budget "
        "(max_steps or max_time, whichever is further) is spent, then on at the model's rates; 0 = from the start")
    scheduled_sampling: float = option(
        0.0, "probability of feeding the model's own sampled prediction instead of the reference token "
        "(Bengio et al. 2015); 0 = teacher forcing")
    sampling_ramp: int = option(0, "raise the scheduled-sampling probability linearly from 0 over N updates")
    clip_norm: float = option(1.0, "clip the gradient norm to this value (0 = off)")
    valid_every: int = option(1000, "validate every N updates (and at the end)", low=1)
    valid_bleu: bool = option(True, "compute greedy BLEU on the dev set at each validation")
    valid_max_sentences: int = option(0, "decode at most N dev sentences for BLEU (0 = all)")
    best_metric: Literal["bleu", "loss"] = option("bleu", "metric that selects model.pt and drives patience")
    patience: int = option(0, "stop after N validations without improvement (0 = off)")
    keep_checkpoints: int = option(0, "also keep checkpoint_<step>.pt of the last N validations (for --average)")
    seed: int = option(1, "random seed")
    threads: int = option(0, "CPU threads for torch (0 = all cores)")
    device: str = option("auto", "auto, cpu, cuda or cuda:N")
    amp: Literal["none", "bf16", "fp16", "auto"] = option(
        "auto", "bf16 autocast; fp16 autocast with a dynamic gradient scaler; auto = whichever of float32 and bf16 "
        "autocast runs a training step of this model faster here, measured before training (bf16 only when at "
        "least 5% faster; a device without bf16 kernels is float32 without measuring)")
    compile: bool = option(False, "torch.compile the training forward pass (slow to start; pays on long GPU runs)")
    activation_checkpointing: bool = option(
        False, "recompute each layer's activations in the backward pass instead of keeping them (less memory, "
        "about a third more compute; Transformer and ConvS2S)")
    pair_temperature: float = option(1.0, "multilingual data: sample language pair i in proportion to its size^(1/T) "
                                          "(1 = as the data comes; 5 gives small pairs much more)")
    max_length: int = option(1024, "leave out training and dev pairs with a side of more positions than this "
                             "(subwords plus EOS) or than the model's position embeddings cover")
    max_nonfinite: int = option(10, "abort after this many updates in a row with a non-finite loss or gradient "
                                    "(each one is skipped)")
    stages: list[StageConfig] = option(
        [], "training stages, each a mix of the data directory's named corpora (prepare --corpora) and the "
        "condition that ends it (docs/train.md); none: every kept pair once an epoch, as the data comes")
    log_every: int = option(100, "log training statistics every N updates", low=1)
    init_from: str = option("", "fine-tune: start from this checkpoint's weights (same vocabularies and architecture; "
                                "a fresh optimizer and schedule unless init_optimizer)")
    init_optimizer: bool = option(False, "with init_from: also continue its optimizer state and learning-rate schedule "
                                         "(needs a checkpoint with training state, e.g. last.pt)")
    init_layers: str = option("", "with init_from: a model of other depths (a student) starts from its layers: spread "
                                  "(evenly spaced, first and last kept) or 'encoder:0,1,2 decoder:2'")
    init_width: str = option("", "with init_from: a narrower Transformer (a student) starts from its weights: prune "
                                 "(keeps channels, whole heads and the strongest feed-forward neurons)")


@dataclass
class DecodeConfig:
    """Search settings used by `translate` and by validation."""

    beam: int = option(5, "beam size (1 = greedy)", 1, 1024)
    max_len_a: float = option(1.5, "maximum output length is a * source length + b", 0, 1000)
    max_len_b: int = option(10, "maximum output length is a * source length + b", -1_000_000, 1_000_000)
    length_penalty: Literal["none", "average", "gnmt", "sockeye"] = option(
        "average", "divide beam scores by none: 1, average: |Y|, gnmt: ((5+|Y|)/6)^alpha, "
                   "sockeye: ((beta+|Y|)/(beta+1))^alpha")
    alpha: float = option(1.0, "length penalty exponent for gnmt and sockeye (GNMT used 0.6-0.7)", 0, 10)
    beta: float = option(0.0, "sockeye length penalty offset", 0, 1_000_000)
    word_penalty: float = option(0.0, "subtracted from a hypothesis' score per token (negative: longer outputs)",
                                 -1000, 1000)
    coverage_penalty: float = option(0.0, "weight beta of GNMT's coverage penalty (Wu et al. 2016, Eq. 14; 0 = off)",
                                     0, 1000)
    min_len: int = option(0, "no EOS before this many output tokens", 0, 1_000_000)
    stop_finished: int = option(0, "beam search ends a sentence once this many hypotheses finished (0 = beam size)",
                                0, 1024)
    nbest: int = option(1, "hypotheses output per input line (at most the beam size), as `i ||| hypothesis ||| score` "
                            "lines when more than 1", 1, 1024)
    sample: bool = option(False, "sample each token instead of searching (uses temperature, top_k, top_p)")
    temperature: float = option(1.0, "sampling temperature", 1e-6, 1000)
    top_k: int = option(0, "sample among the k most probable tokens (0 = all)")
    top_p: float = option(1.0, "sample within the smallest set of tokens whose probability reaches p")
    epsilon: float = option(0.0, "epsilon sampling (Hewitt et al. 2022): sample only among the tokens of probability "
                                 "at least epsilon (0 = off; 0.02 for MBR candidates, Freitag et al. 2023)", 0, 0.999)
    seed: int = option(1, "random seed for sampling")
    mbr: int = option(0, "minimum Bayes risk decoding: N candidates per line (--mbr-candidates), and the one with the "
                         "highest expected utility (--mbr-utility) against the others is output (0 = off)", 0, 1024)
    mbr_candidates: Literal["beam", "sample"] = option(
        "beam", "MBR candidates: beam (the N-best of a beam of N) or sample (N draws with --temperature, --top-k, "
        "--top-p, --epsilon); beam measured better and faster (docs/benchmarks.md)")
    mbr_utility: Literal["chrf", "chrf++", "bleu", "ter"] = option(
        "chrf", "MBR utility, a metric of nmtkit evaluate computed between candidates: chrf, chrf++, bleu "
        "(sentence BLEU) or ter (lower is better: its negative is the utility)")
    guard_placeholders: bool = option(
        True, "make each masked placeholder symbol of a source (｟ph1｠, tag pairs ｟t1｠…｟/t1｠) come out "
        "exactly once, no other, and tag pairs properly nested, in beam search, greedy search and sampling (PyTorch "
        "engine; a model without reserved symbols is unaffected)")
    tgt_lang: str = option("", "target language of a multilingual model (its tag starts every source)")
    tag: str = option("", "corpus tag (such as <bt>) to start every source with, one the model was trained with "
                          "(prepare --corpora); none is added without it")
    placeholders: str = option(
        "model", "placeholders and markup (printf directives, format fields, tags, entities...) masked to reserved "
        "symbols before translation and restored, byte for byte and each exactly once, after it: model (the rule "
        "the model's data was prepared with; none for a model prepared without), auto (every built-in family), none "
        "(translate the text as it is) or a pattern file (see docs/translate.md)")
    dtype: Literal["float32", "float16", "bfloat16"] = option("float32", "weights and activations when translating")
    batch_tokens: int = option(6000, "source-token budget per translation batch")
    buffer_size: int = option(2000, "lines read before sorting by length and translating")

    def __post_init__(self):
        """Settings that are each valid alone but contradict each other, or that a search would ignore."""
        searching = self.beam > 1 and not self.sample
        if self.beam < 1 or self.nbest < 1 or self.batch_tokens < 1 or self.buffer_size < 1:
            raise NmtkitError("--beam, --nbest, --batch-tokens and --buffer-size must be at least 1")
        if self.nbest > 1 and self.sample:
            raise NmtkitError("--nbest needs beam search; --sample draws one translation per line")
        if self.nbest > self.beam:
            raise NmtkitError(f"--nbest {self.nbest} needs a beam of at least {self.nbest} (--beam {self.beam})")
        if 0 < self.stop_finished < self.nbest:
            raise NmtkitError(f"--nbest {self.nbest} needs --stop-finished of at least {self.nbest} (or 0)")
        if self.coverage_penalty and not searching:
            raise NmtkitError("--coverage-penalty ranks the hypotheses of a beam search; it needs --beam 2 or more "
                              "(greedy search and --sample follow one path)")
        if self.temperature <= 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise NmtkitError("--temperature must be positive, --top-p in (0, 1] and --top-k at least 0")
        self._check_mbr()

    def _check_mbr(self) -> None:
        """MBR's settings against the others: it draws its own candidates and outputs one translation a line."""
        if self.mbr == 1:
            raise NmtkitError("--mbr N chooses among N candidates: give N of at least 2 (0 = off)")
        if self.mbr and (self.sample or self.nbest > 1):
            raise NmtkitError("--mbr outputs one translation a line from its own candidates (--mbr-candidates): it "
                              "does not combine with --sample or --nbest")
        sampling = self.sample or (self.mbr and self.mbr_candidates == "sample")
        if self.epsilon and not sampling:
            raise NmtkitError("--epsilon restricts sampling: it needs --sample or --mbr N --mbr-candidates sample")


@dataclass
class Config:
    """Everything a run needs besides the data: saved as `config.yaml` in the run directory."""

    model: Any = None
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def help_for(cls: type, name: str) -> str:
    """The help text of field `name` of config dataclass `cls`, for the command-line option that sets it."""
    for item in dataclasses.fields(cls):
        if item.name == name:
            return item.metadata["help"]
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def to_dict(config: Any) -> dict:
    return dataclasses.asdict(config)
