"""sacrebleu's own BLEU preprocessing (lowercasing, rstrip, its tokenizer classes) run over a whole corpus, and the
tokenizer that suits a target language.

Tokenizing is the one part of BLEU that stays in Python, and with Python 3.11's `re` it costs about as much as
all of sacrebleu's n-gram counting, so large corpora are tokenized and hashed by forked worker processes, one
slice each; they hand back only two integer arrays per slice.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import re
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from nmtkit.errors import NmtkitError
from nmtkit.metrics.ngrams import hash_words

MIN_LINES_FOR_WORKERS = 10000
SLICES_PER_WORKER = 4
SEPARATOR = "\x00"
_shared_streams: Sequence[Sequence[str]] = ()  # read by forked workers, so the lines are not pickled to them

# Language codes (ISO 639-1, -2/T, -2/B and -3) by the tokenizer their script needs.
CHINESE = frozenset({"zh", "zho", "chi", "cmn", "yue", "wuu", "lzh"})
MECAB = {"ja": "ja-mecab", "jpn": "ja-mecab", "ko": "ko-mecab", "kor": "ko-mecab"}
# Thai, Lao, Khmer, Myanmar and Tibetan: written without spaces between words, and sacrebleu has no tokenizer
# for them, so 13a would make each sentence a few giant "words"; characters are the fair unit.
UNSPACED = frozenset({"th", "tha", "lo", "lao", "km", "khm", "my", "mya", "bur", "bo", "bod", "tib"})


@functools.cache
def bleu_metric(tokenize: str | None = None, lowercase: bool = False) -> BLEU:
    """A sacrebleu BLEU object used only to preprocess; an unknown or unusable tokenizer is a user error."""
    if tokenize is not None and tokenize not in BLEU.TOKENIZERS:
        raise NmtkitError(f"unknown BLEU tokenizer {tokenize!r}; choose from {', '.join(BLEU.TOKENIZERS)}")
    try:
        return BLEU(tokenize=tokenize, lowercase=lowercase)
    except (ImportError, OSError, RuntimeError, AssertionError) as error:  # missing packages, model or dictionary
        reason = " ".join(str(error).split()) or type(error).__name__
        raise NmtkitError(f"BLEU tokenizer {tokenize!r} is not usable here: {reason}") from error


@functools.cache
def tokenizer_usable(tokenize: str) -> bool:
    """Whether sacrebleu's tokenizer can be built here (ja-mecab and ko-mecab need extra packages)."""
    try:
        bleu_metric(tokenize)
    except NmtkitError:
        return False
    return True


def language_base(lang: str) -> str:
    """The language of a code, without region or script: 'zh_CN', 'zh-TW', 'ZH' -> 'zh'."""
    return re.split("[_-]", lang.strip().lower(), maxsplit=1)[0]


def default_tokenizer(lang: str | None) -> str:
    """sacrebleu's BLEU tokenizer for a target language: zh for Chinese; ja-mecab / ko-mecab for Japanese / Korean
    where those can be built (else char); char for the unspaced scripts of UNSPACED; 13a for the rest and None."""
    base = language_base(lang) if lang else ""
    if base in CHINESE:
        return "zh"
    if base in MECAB:
        return MECAB[base] if tokenizer_usable(MECAB[base]) else "char"
    return "char" if base in UNSPACED else "13a"


def preprocess(lines: Sequence[str], tokenize: str | None = None, lowercase: bool = False) -> list[str]:
    """Each line exactly as `BLEU._preprocess_segment` returns it.

    Tokenizer13a pads its input with spaces and its rules only look at a character's direct neighbours; a
    NUL byte is, for every rule, the same neighbour as a space (neither digit, nor punctuation, nor dash), so
    lines joined by NUL tokenize to the same tokens with one Python call per slice instead of per line.
    """
    metric = bleu_metric(tokenize, lowercase)
    if not isinstance(metric.tokenizer, Tokenizer13a) or not lines:
        return [metric._preprocess_segment(line) for line in lines]
    joined = SEPARATOR.join(line.lower().rstrip() if lowercase else line.rstrip() for line in lines)
    if joined.count(SEPARATOR) != len(lines) - 1:  # some line holds the separator itself
        return [metric._preprocess_segment(line) for line in lines]
    return [segment.strip() for segment in metric.tokenizer(joined).split(SEPARATOR)]


def _hash_slice(tokenize: str | None, lowercase: bool, stream: int, start: int, end: int) -> tuple[np.ndarray, ...]:
    # Forked workers inherit the parent's string-hash seed, so their hashes agree with the parent's.
    return hash_words(preprocess(_shared_streams[stream][start:end], tokenize, lowercase))


def default_workers() -> int:
    """Worker processes for tokenizing: the usable cores on Linux (where fork is safe), else none."""
    return len(os.sched_getaffinity(0)) if sys.platform == "linux" else 0


Slice = tuple[np.ndarray, np.ndarray]  # hashes of the tokens (T,), tokens per line (N,)


def bleu_token_slices(streams: Sequence[Sequence[str]], tokenize: str | None = None, lowercase: bool = False,
                      workers: int | None = None) -> Iterator[list[Slice]]:
    """Tokens of consecutive slices of line-aligned streams (hypotheses, references...), one Slice per stream.

    Tokens are those of sacrebleu's BLEU. Slices come in order as the workers finish them, so the caller can
    count one while the workers tokenize the next; where the slices fall depends only on the number of lines.
    """
    lines, workers = len(streams[0]), default_workers() if workers is None else workers
    if workers < 1 or lines < MIN_LINES_FOR_WORKERS:
        preprocess_line = bleu_metric(tokenize, lowercase)._preprocess_segment
        yield [hash_words([preprocess_line(line) for line in stream]) for stream in streams]
        return
    global _shared_streams
    _shared_streams = streams
    slices = SLICES_PER_WORKER * workers
    bounds = [lines * index // slices for index in range(slices + 1)]
    tasks = [(tokenize, lowercase, stream, bounds[index], bounds[index + 1])
             for index in range(slices) for stream in range(len(streams))]
    gc.freeze()  # workers then neither walk nor copy the parent's objects when they collect garbage
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            done = pool.map(_hash_slice, *zip(*tasks))
            for _ in range(slices):
                yield [next(done) for _ in streams]
    finally:
        gc.unfreeze()
        _shared_streams = ()
