"""A vocabulary shortlist for exported models (Marian's lexical shortlist; CTranslate2's vocabulary map).

At each decoding step the output layer and the softmax cover the whole target vocabulary, a large share of a small
model's decoding work. With a shortlist, CTranslate2 computes them over the candidates of the batch only: the
`frequent` most frequent target pieces of the training data, plus, for each piece of the batch's sources, the
`per_piece` target pieces most associated with it in the training data (`use_vmap`). The association is the Dice
coefficient 2·c(s,t) / (c(s) + c(t)) of sentence-level co-occurrence: c(s) counts the training pairs whose source
holds piece s, c(t) those whose target holds piece t, c(s,t) those with both (a piece counts once per sentence).

The map is written as CTranslate2's `vmap.txt` (`source piece<TAB>target pieces`, the line with an empty source
holding the pieces that are always candidates), in the exported directory, by `nmtkit export --shortlist DATA`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmtkit.data.dataset import TokenArray
from nmtkit.data.prepare import load_subwords
from nmtkit.data.subword import EOS, Subword
from nmtkit.errors import NmtkitError

log = logging.getLogger(__name__)
CHUNK = 20_000  # sentence pairs counted at a time (memory: their distinct piece pairs)


@dataclass
class Shortlist:
    """The pieces always searched, and each source piece's candidates (nmtkit ids, best first)."""

    frequent: np.ndarray
    candidates: dict[int, np.ndarray]
    pairs: int  # training pairs counted

    def vmap(self, src_subword: Subword, tgt_subword: Subword) -> str:
        """CTranslate2's vmap.txt. A piece that holds whitespace (a tab, kept by the `identity` rule) cannot be
        written in it: it is left out, with a warning naming how many (a search with the map never writes such a
        target piece; a source piece's own candidates are then not added)."""
        src, tgt = src_subword.processor.id_to_piece, tgt_subword.processor.id_to_piece
        left_out: set[str] = set()

        def writable(piece: str) -> bool:
            if piece and not any(char.isspace() for char in piece):
                return True
            left_out.add(piece)
            return False

        def targets(indices: np.ndarray) -> str:
            return " ".join(piece for piece in (tgt(int(index)) for index in indices) if writable(piece))

        lines = ["\t" + targets(self.frequent)]
        lines += [src(source) + "\t" + targets(candidates) for source, candidates in sorted(self.candidates.items())
                  if writable(src(source))]
        if left_out:
            log.warning("shortlist: %d subword piece(s) hold whitespace (%s), which CTranslate2's vocabulary map "
                        "cannot hold: left out of it (a search with the shortlist never writes them; export without "
                        "--shortlist to keep them)", len(left_out), ", ".join(sorted(map(repr, left_out))[:5]))
        return "".join(line + "\n" for line in lines)


def cooccurrence(src: TokenArray, tgt: TokenArray, lines: np.ndarray, src_vocab: int,
                 tgt_vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Over the sentence pairs `lines`: the keys s * tgt_vocab + t of the piece pairs that occur together, in how
    many pairs each does, and in how many pairs each source and each target piece occurs."""
    keys, counts = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    src_sentences, tgt_sentences = np.zeros(src_vocab, dtype=np.int64), np.zeros(tgt_vocab, dtype=np.int64)
    for start in range(0, len(lines), CHUNK):
        pieces = [(np.unique(src[line]).astype(np.int64), np.unique(tgt[line]).astype(np.int64))
                  for line in lines[start : start + CHUNK]]
        src_sentences += np.bincount(np.concatenate([s for s, _ in pieces]), minlength=src_vocab)
        tgt_sentences += np.bincount(np.concatenate([t for _, t in pieces]), minlength=tgt_vocab)
        chunk_keys, chunk_counts = np.unique(np.concatenate([(s[:, None] * tgt_vocab + t[None, :]).ravel()
                                                             for s, t in pieces]), return_counts=True)
        keys, inverse = np.unique(np.concatenate([keys, chunk_keys]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([counts, chunk_counts])).astype(np.int64)
    return keys, counts, src_sentences, tgt_sentences


def build_shortlist(src: TokenArray, tgt: TokenArray, src_vocab: int, tgt_vocab: int, per_piece: int,
                    frequent: int, max_pairs: int = 1_000_000) -> Shortlist:
    """The shortlist of a corpus (see the module docstring); at most `max_pairs` sentence pairs are counted,
    evenly spaced through the corpus. Special pieces (ids below EOS + 1) are never candidates: CTranslate2 adds
    `<unk>`, `<s>` and `</s>` itself."""
    if per_piece < 0 or frequent < 0:
        raise NmtkitError("the shortlist sizes must be at least 0")
    count = len(src)
    lines = np.arange(count) if count <= max_pairs else np.linspace(0, count - 1, max_pairs).round().astype(np.int64)
    target_counts = np.bincount(np.asarray(tgt.tokens), minlength=tgt_vocab)
    target_counts[: EOS + 1] = 0
    by_count = np.argsort(-target_counts, kind="stable")
    common = by_count[: min(frequent, int(np.count_nonzero(target_counts)))]
    keys, together, src_sentences, tgt_sentences = cooccurrence(src, tgt, lines, src_vocab, tgt_vocab)
    sources, targets = keys // tgt_vocab, keys % tgt_vocab
    keep = targets > EOS
    sources, targets, together = sources[keep], targets[keep], together[keep]
    dice = 2 * together / (src_sentences[sources] + tgt_sentences[targets])
    order = np.lexsort((targets, -dice, sources))  # by source, then best first, ties by id
    sources, targets = sources[order], targets[order]
    rank = np.arange(len(sources)) - np.searchsorted(sources, sources, side="left")
    sources, targets = sources[rank < per_piece], targets[rank < per_piece]
    starts = np.flatnonzero(np.r_[True, sources[1:] != sources[:-1]]) if len(sources) else np.zeros(0, np.int64)
    candidates = {int(sources[start]): targets[start:end]
                  for start, end in zip(starts, np.r_[starts[1:], len(sources)])}
    return Shortlist(common, candidates, len(lines))


def shortlist_from_data(data_dir: Path, src_subword: Subword, tgt_subword: Subword, per_piece: int,
                        frequent: int) -> Shortlist:
    """The shortlist of the training split of `data_dir` (written by `nmtkit prepare` with the model's subword
    models, checked)."""
    if not (data_dir / "train.src.tok.npy").is_file():
        raise NmtkitError(f"{data_dir} is not a data directory written by nmtkit prepare (it has no training split)")
    data_src, data_tgt = load_subwords(data_dir)
    if (data_src.proto, data_tgt.proto) != (src_subword.proto, tgt_subword.proto):
        raise NmtkitError(f"{data_dir} was prepared with other subword vocabularies than the model; use the data the "
                          "model was trained on (or data prepared with --subword-model)")
    return build_shortlist(TokenArray.load(data_dir / "train.src"), TokenArray.load(data_dir / "train.tgt"),
                           src_subword.vocab_size, tgt_subword.vocab_size, per_piece, frequent)
