"""Lexical and prefix constraints as text and as target subword ids: what a line asks of its translation, and how
its text becomes `Constraints` (`ConstraintEncoder`); `nmtkit.decoding.constraint_tracker` enforces them in beam search.

- positive phrases must all appear in the output, in any order, as whole words (given the vocabulary's `WordEnds`).
- negative phrases must not appear.
- a prefix: the pieces of its complete words are forced one by one; its last word, which may be cut short ("Th"),
  is matched at the byte level: each step allows only the pieces that agree with the bytes still to match
  ("▁The" or "▁Then", or "▁T" and then "he"...), until the word is written.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from sentencepiece import sentencepiece_model_pb2
from torch import Tensor

from nmtkit.data.corpus import UNSPACED
from nmtkit.data.subword import Subword
from nmtkit.errors import NmtkitError


@dataclass(frozen=True, eq=False)
class Constraints:
    """One line's constraints in target subword ids."""

    positive: tuple[tuple[int, ...], ...] = ()  # phrases that must appear
    negative: tuple[tuple[int, ...], ...] = ()  # phrases that must not
    forced: tuple[int, ...] = ()  # the pieces of the prefix's complete words, in order
    partial: tuple[tuple[Tensor, Tensor], ...] = ()  # the prefix's last word: for each byte offset into it, the
    # pieces that agree with the bytes left and how many of them each writes (all, for a piece that ends the word)
    requested: tuple[tuple[str, object], ...] = ()  # (request field, value) of the registered restrictions the line
    # asks for (`nmtkit.decoding.restriction`)

    @property
    def lexical(self) -> bool:
        """Whether the line has phrases or a prefix (what `nmtkit.decoding.constraint_tracker` tracks)."""
        return bool(self.positive or self.negative or self.forced or self.partial)

    @property
    def empty(self) -> bool:
        return not (self.lexical or self.requested)

    def room(self) -> int:
        """An output length (EOS included) long enough for the prefix and every positive phrase in turn."""
        return len(self.forced) + len(self.partial) + sum(map(len, self.positive)) + 1


@dataclass(frozen=True, eq=False)
class WordEnds:
    """Which pieces of a vocabulary go on with the word before them, so that a positive phrase is met only as whole
    words ("Jew" is not met by "Jew" + "s", nor "Paul" by "Paul" + "ine")."""

    glued: Tensor  # (V,) no leading space, and a letter or digit of a script written with spaces comes first
    open: Tensor  # (V,) such a letter or digit comes last, so a glued piece after it goes on with the word


def constrained_limits(max_len: Tensor, constraints: Sequence[Constraints | None], cap: int) -> Tensor:
    """Each sentence's output length limit, raised where its constraints need more room (at most `cap`)."""
    room = torch.tensor([1 if line is None else line.room() for line in constraints], device=max_len.device)
    return torch.maximum(max_len, room).clamp(max=cap)


class PieceTable:
    """The bytes each piece of a subword model writes (▁ a space, <0xNN> the byte NN; control and unknown pieces
    none), and which pieces may come next when some bytes are still to be written."""

    def __init__(self, subword: Subword):
        processor = subword.processor
        self.by_surface: dict[bytes, list[int]] = {}
        for index in range(processor.get_piece_size()):
            if processor.is_control(index) or processor.is_unknown(index) or processor.is_unused(index):
                continue
            piece = processor.id_to_piece(index)
            surface = bytes([int(piece[1:-1], 16)]) if processor.is_byte(index) else piece.replace("▁", " ").encode()
            self.by_surface.setdefault(surface, []).append(index)
        self.surfaces = sorted(self.by_surface)
        self.children: list[dict[int, int]] = [{}]  # a trie of the surfaces: node -> {next byte: node}; 0 is the root
        self.ids: list[list[int]] = [[]]  # the pieces whose surface ends at each node
        for surface, ids in self.by_surface.items():
            node = 0
            for byte in surface:
                if byte not in self.children[node]:
                    self.children[node][byte] = len(self.children)
                    self.children.append({})
                    self.ids.append([])
                node = self.children[node][byte]
            self.ids[node] = ids

    def word_ends(self, vocab_size: int) -> WordEnds:
        glued, open_ = torch.zeros(vocab_size, dtype=torch.bool), torch.zeros(vocab_size, dtype=torch.bool)
        for surface, ids in self.by_surface.items():
            text = surface.decode("utf-8", errors="ignore")  # a byte of a longer character: neither
            if text:
                glued[ids], open_[ids] = _inside_word(text[0]), _inside_word(text[-1])
        return WordEnds(glued, open_)

    def moves_through(self, word: bytes) -> list[tuple[list[int], list[int]]]:
        """`moves(word[offset:])` for every byte offset into `word`. Each walks down the trie from its offset, no
        deeper than the longest piece, so the whole costs len(word) times that length (plus the moves found),
        not the cube of len(word) that testing every prefix of every rest would."""
        return [self.moves(word, offset) for offset in range(len(word))]

    def moves(self, word: bytes, offset: int = 0) -> tuple[list[int], list[int]]:
        """(tokens, bytes written) with rest = word[offset:]: the pieces that write a proper prefix of rest, and
        those that start with all of rest (writing all of it, whatever they add)."""
        tokens, written, node = [], [], 0
        for end in range(offset, len(word)):
            node = self.children[node].get(word[end])
            if node is None:  # no piece writes this much of rest, so none writes more or starts with all of it
                break
            if end + 1 < len(word):
                tokens.extend(self.ids[node])
                written.extend([end + 1 - offset] * len(self.ids[node]))
        else:
            starting = self._starting_with(word[offset:])  # rest is no longer than a piece here
            tokens.extend(starting)
            written.extend([len(word) - offset] * len(starting))
        return tokens, written

    @functools.lru_cache(maxsize=1024)  # noqa: B019 (one table per Translator, kept as long as it is)
    def _starting_with(self, rest: bytes) -> tuple[int, ...]:
        """The pieces whose surface starts with `rest`, in the order of their surfaces (a short rest such as a space
        starts many: cached)."""
        tokens, position = [], bisect.bisect_left(self.surfaces, rest)
        while position < len(self.surfaces) and self.surfaces[position].startswith(rest):
            tokens.extend(self.by_surface[self.surfaces[position]])
            position += 1
        return tuple(tokens)


def completable(moves: list[tuple[list[int], list[int]]]) -> tuple[tuple[Tensor, Tensor], ...]:
    """Keep only the moves through a partial word (per byte offset: tokens, bytes written) that lead to an offset
    from which the word can still be finished: "▁the" writes the start of " then", but a word vocabulary has no
    piece that goes on with "n". Lists in, tensors out: a tensor operation per offset would cost more than the
    rest of a long word's encoding."""
    finishable = [False] * len(moves) + [True]
    kept: list[tuple[list[int], list[int]]] = [([], [])] * len(moves)
    for offset in reversed(range(len(moves))):
        leading = [(token, count) for token, count in zip(*moves[offset]) if finishable[offset + count]]
        kept[offset] = ([token for token, _ in leading], [count for _, count in leading])
        finishable[offset] = bool(leading)
    return tuple((torch.tensor(tokens, dtype=torch.long), torch.tensor(written, dtype=torch.long))
                 for tokens, written in kept)


def _inside_word(character: str) -> bool:
    """A letter or digit of a script written with spaces, where the next letter goes on with the same word."""
    return character.isalnum() and not re.fullmatch(f"[{UNSPACED}]", character)


def split_prefix(text: str) -> tuple[str, str, str]:
    """(its complete words, the spaces before its last word, its last word): "I went to Th" -> ("I went to", " ",
    "Th"). A prefix that ends in spaces ends with a complete word: "I went " -> ("I went", " ", "")."""
    words = text.rstrip(" ")
    if len(words) < len(text):
        return words, text[len(words):], ""
    start = words.rfind(" ") + 1
    head = words[:start].rstrip(" ")
    return head, words[len(head):start], words[start:]


class ConstraintEncoder:
    """Target-language text -> `Constraints`, with the target subword model."""

    def __init__(self, subword: Subword):
        self.subword = subword
        self.pieces = PieceTable(subword)
        normalizer = sentencepiece_model_pb2.ModelProto.FromString(subword.proto).normalizer_spec
        self.dummy_prefix, self.collapses_spaces = normalizer.add_dummy_prefix, normalizer.remove_extra_whitespaces
        self.word_ends = self.pieces.word_ends(subword.vocab_size)

    def encode(self, positive: Sequence[str] = (), negative: Sequence[str] = (), prefix: str = "") -> Constraints:
        forced, partial = self.prefix(prefix) if prefix else ((), ())
        return Constraints(tuple(self.phrase(text) for text in positive), tuple(self.phrase(text) for text in negative),
                           forced, partial)

    def phrase(self, text: str) -> tuple[int, ...]:
        """The pieces of `text` as a sentence writes it after a space. nmtkit's SentencePiece models add a dummy
        prefix (a space) to a sentence, so a phrase encoded alone gets exactly those pieces, under every
        normalization rule and model type (encoding " text" and dropping a leading "▁" piece would not: a unigram
        model may write "▁" as a piece of its own before "P a u l", and the NFKC rules drop leading spaces)."""
        if not self.dummy_prefix:
            raise NmtkitError("constraints need a subword model that adds SentencePiece's dummy prefix (nmtkit's do)")
        return tuple(self.subword.encode([text.strip()])[0])

    def prefix(self, text: str) -> tuple[tuple[int, ...], tuple[tuple[Tensor, Tensor], ...]]:
        """The pieces of the prefix's complete words as a sentence starts with them, and the moves through the
        bytes of its last word (`Constraints.partial`), which the output may go on ("Th" -> "The", "Then")."""
        head, spaces, word = split_prefix(text)
        forced = tuple(self.subword.encode([head])[0]) if head else ()
        if self.collapses_spaces:  # the NFKC rules drop leading spaces and squeeze the others into one
            spaces = " " if head and spaces else ""
        rest = (" " if self.dummy_prefix and not head else "").encode() + (spaces.encode() + self._normalized(word))
        return forced, completable(self.pieces.moves_through(rest))

    def _normalized(self, word: str) -> bytes:
        """The word as the subword model's normalization rule writes it (unchanged under `identity`)."""
        if not word:
            return b""
        normalized = self.subword.processor.normalize(word)
        if self.dummy_prefix:
            normalized = normalized.removeprefix("▁")
        return normalized.replace("▁", " ").encode()
