"""Attention from a model, as word attention: teacher forcing, and subword -> word mapping.

A model translating source to target is teacher-forced on each sentence pair; its cross-attention row for a
target subword is a distribution over source subwords (which one, for a model with several, is the model's
`select_attention`). Word attention sums a source word's subwords and averages a target word's subwords.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator

import torch
from torch import Tensor

import nmtkit.models  # noqa: F401  (registers the built-in models, for `attention_models`)
from nmtkit.align.links import Link, hard_links
from nmtkit.checkpoint.payload import LoadedModel
from nmtkit.data.dataset import encode_sources, pad_sequences, token_batches
from nmtkit.data.subword import BOS
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder
from nmtkit.models.transformer import TransformerConfig
from nmtkit.registry import MODELS

log = logging.getLogger(__name__)


def piece_words(spans: list[tuple[int, int]], words: list[str]) -> list[int]:
    """The word each subword piece belongs to, from the pieces' UTF-8 byte spans in `" ".join(words)` (see
    `Subword.spans`: offsets into the text before normalization, so they hold whatever the normalization does).

    A piece that starts on the space before a word (SentencePiece's "▁") belongs to that word; a piece spanning two
    words to the first.
    """
    if not words:
        return [0] * len(spans)
    ends, position = [], 0
    for word in words:
        position += len(word.encode("utf-8"))
        ends.append(position)
        position += 1  # the space that joins it to the next word
    return [min(bisect.bisect_right(ends, begin), len(words) - 1) for begin, _ in spans]


def word_attention(attention: Tensor, src_owner: list[int], tgt_owner: list[int],
                   src_words: int, tgt_words: int) -> Tensor:
    """(T, S) subword attention -> (target words, source words): sum over source subwords, mean over target ones.

    Rows are renormalised over the real source words, so the source EOS column (beyond `src_owner`) drops out.
    """
    attention = attention[: len(tgt_owner), : len(src_owner)].float()  # (T, S) without EOS row and column
    by_source = attention.new_zeros(len(tgt_owner), src_words).index_add_(
        1, torch.tensor(src_owner), attention)  # (T, Ws)
    summed = by_source.new_zeros(tgt_words, src_words).index_add_(0, torch.tensor(tgt_owner), by_source)
    counts = torch.bincount(torch.tensor(tgt_owner), minlength=tgt_words).clamp(min=1).unsqueeze(1)
    mean = summed / counts  # (Wt, Ws)
    return mean / mean.sum(dim=1, keepdim=True).clamp(min=1e-9)


def attention_models() -> list[str]:
    """The registered models that return cross-attention."""
    return sorted(name for name, entry in MODELS.items() if entry.cls.has_attention)


@torch.no_grad()
def teacher_forced_attention(model: EncoderDecoder, sources: list[list[int]], targets: list[list[int]],
                             device: torch.device) -> list[Tensor]:
    """Cross-attention (T, S) of each pair, T = target subwords + EOS row, S = source subwords + EOS column."""
    src, src_mask = encode_sources(sources)
    tgt_in = pad_sequences(list(targets), [BOS], [])
    _, attention = model(src.to(device), src_mask.to(device), tgt_in.to(device), need_attention=True)
    if attention is None:
        raise NmtkitError(f"{type(model).__name__} has no attention; align needs an attention model "
                          f"({', '.join(attention_models())})")
    return [attention[row, : len(target) + 1, : len(source) + 1].cpu()
            for row, (source, target) in enumerate(zip(sources, targets))]


def source_prefix(loaded: LoadedModel) -> list[int]:
    """The tag of the default target language for a model that takes each source's first token for its tag (an
    imported M2M100 or NLLB: language_tags=decoder); its attention column is left out of the alignment."""
    config = loaded.config.model
    if not (isinstance(config, TransformerConfig) and config.language_tags == "decoder"):
        return []
    lang = loaded.config.decode.tgt_lang
    if lang not in loaded.tags:
        raise NmtkitError("this model reads a target-language tag before each source and has no default target "
                          "language; import it with --tgt-lang")
    return [loaded.tags[lang]]


def word_attentions(loaded: LoadedModel, src_lines: list[list[str]], tgt_lines: list[list[str]],
                    device: torch.device, batch_tokens: int = 4000) -> Iterator[Tensor]:
    """(target words, source words) attention for each pair of word lists, in input order; a pair with an empty
    side gets an empty matrix, and one longer than the model's positions (left unaligned) an empty (0, 0) one: its
    zeros would take (target words x source words) floats, 10 GB for a line of 50,000 words."""
    src_texts, tgt_texts = [" ".join(words) for words in src_lines], [" ".join(words) for words in tgt_lines]
    src_spans, tgt_spans = loaded.src_subword.spans(src_texts), loaded.tgt_subword.spans(tgt_texts)
    prefix = source_prefix(loaded)
    src_ids = [prefix + ids for ids in loaded.src_subword.encode(src_texts)]
    tgt_ids = loaded.tgt_subword.encode(tgt_texts)
    limit = (loaded.model.max_length() or 1 << 62) - 1  # EOS and BOS take a position
    todo, results = [], {}
    for index, (source, target) in enumerate(zip(src_ids, tgt_ids)):
        if max(len(source), len(target)) > limit:
            log.warning("line %d: %d and %d subwords, more than the model's %d positions; left unaligned",
                        index + 1, len(source), len(target), limit + 1)
            results[index] = torch.zeros(0, 0)
        elif source and target:
            todo.append(index)
        else:
            results[index] = torch.zeros(len(tgt_lines[index]), len(src_lines[index]))
    longest = [max(len(src_ids[index]), len(tgt_ids[index])) for index in todo]
    for batch in token_batches(longest, longest, batch_tokens):
        rows = [todo[position] for position in batch]
        attentions = teacher_forced_attention(loaded.model, [src_ids[i] for i in rows], [tgt_ids[i] for i in rows],
                                              device)
        for index, attention in zip(rows, attentions):
            results[index] = word_attention(attention[:, len(prefix):], piece_words(src_spans[index], src_lines[index]),
                                            piece_words(tgt_spans[index], tgt_lines[index]),
                                            len(src_lines[index]), len(tgt_lines[index]))
    return (results[index] for index in range(len(src_lines)))


def align_translations(loaded: LoadedModel, sources: list[str], hypotheses: list[str],
                       device: torch.device) -> list[set[Link]]:
    """Argmax links between each source line and its translation (whitespace words), by teacher forcing."""
    with loaded.model.chosen_attention(None, None):
        matrices = word_attentions(loaded, [source.split() for source in sources],
                                   [hypothesis.split() for hypothesis in hypotheses], device)
        return [hard_links(matrix) for matrix in matrices]
