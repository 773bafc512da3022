"""Constrained beam search's bookkeeping: what `nmtkit.decoding.search.beam_search` keeps track of, per live
hypothesis, for lines that carry `Constraints` (`nmtkit.decoding.constraints`). It sees only token ids and scores, so
it works the same for every model.

Each positive phrase is tracked on its own as the longest prefix of it that the output ends with
(Knuth-Morris-Pratt), so a partial match that breaks falls back to what still matches, and overlapping phrases share
tokens: A B C meets both [A B] and [B C]. Given the vocabulary's `WordEnds`, a phrase is met only as whole words: a
full match waits for the next token, and one that goes on with the word ("Jew" then "s") undoes it. A token that
would complete a negative phrase gets -inf. A prefix's complete words are forced piece by piece; its last word is
followed byte by byte (`PrefixTracker`).

Beams are grouped into banks by the number of positive-constraint tokens they have met, and the K slots of a
sentence go round-robin over the banks, best candidate of each bank first: dynamic beam allocation (Post & Vilar
2018), batched over all sentences and beams as Hu et al. vectorise it (2019, "Improved lexically constrained
decoding for translation and monolingual rewriting", NAACL). The candidates are the 2K best continuations, each
beam's best token, each beam's next token of every unmet phrase, and its best token that ends the word of a phrase
it has just matched. EOS is allowed once every positive phrase is met and the prefix is written; at the length
limit, where only EOS is left, a hypothesis may end unmet, and it is flagged so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from nmtkit.data.subword import EOS
from nmtkit.decoding.constraints import Constraints, WordEnds

NEG_INF = float("-inf")
_KEY_STRIDE = 2**32  # a pair (a sentence or a state, a token) as one sortable number: first * stride + token


def phrase_transitions(phrase: Sequence[int]) -> list[dict[int, int]]:
    """rows[s] for s in 0..len(phrase): token -> how much of `phrase` an output matches after it matched the first
    s tokens and then emits that token (the longest prefix of the phrase that ends the output: Knuth-Morris-Pratt's
    automaton); a token a row lacks leads to 0. Row s is the row of its fallback with phrase[s] leading to s + 1, so
    the rows hold at most 2 len(phrase) entries in all (Simon 1993: at most len(phrase) lead back to a state above
    0), where a table of every state by every position held the square of the phrase's length."""
    fallback = [0] * (len(phrase) + 1)  # longest proper prefix of phrase[:k] that is also its suffix
    for k in range(2, len(phrase) + 1):
        matched = fallback[k - 1]
        while matched and phrase[matched] != phrase[k - 1]:
            matched = fallback[matched]
        fallback[k] = matched + (phrase[matched] == phrase[k - 1])
    rows: list[dict[int, int]] = []
    for state in range(len(phrase) + 1):
        rows.append(dict(rows[fallback[state]]) if state else {})
        if state < len(phrase):
            rows[state][phrase[state]] = state + 1
    return rows


class PhraseAutomata:
    """Every sentence's phrases' `phrase_transitions` as one sparse table, its entries sorted by (sentence, slot,
    state, token) for a search: a dense one of (B, P, L+1, L) numbers held the square of the longest phrase for
    every phrase of the batch (2,000 tokens: 32 MB and seconds a phrase)."""

    def __init__(self, phrases: list[list[list[int]]], device: torch.device):
        """phrases (B, P): lists of tokens, every sentence with P (empty ones too)."""
        bases, keys, following, base = [], [], [], 0  # base: a phrase's first row, one row a state
        for line in phrases:
            bases.append([])
            for phrase in line:
                bases[-1].append(base)
                for state, row in enumerate(phrase_transitions(phrase)):
                    keys += [(base + state) * _KEY_STRIDE + token for token in row]
                    following += row.values()
                base += len(phrase) + 1
        self.bases = torch.tensor(bases, dtype=torch.long, device=device)  # (B, P)
        sentinel = torch.iinfo(torch.long).max  # above every key, so that a search for any key lands on an entry
        self.keys, order = torch.tensor([*keys, sentinel], dtype=torch.long, device=device).sort()
        self.following = torch.tensor([*following, 0], dtype=torch.long, device=device)[order]

    def step(self, sentences: Tensor, slots: Tensor, states: Tensor, tokens: Tensor) -> Tensor:
        """The state of each phrase (sentence, slot) in `states` after `tokens` (all four broadcast together)."""
        keys = (self.bases[sentences, slots] + states) * _KEY_STRIDE + tokens
        entries = torch.searchsorted(self.keys, keys)
        return torch.where(self.keys[entries] == keys, self.following[entries], 0)


def advance_phrases(automata: PhraseAutomata, lengths: Tensor, open_ends: Tensor, sentences: Tensor,
                    progress: Tensor, tokens: Tensor, glued: Tensor) -> Tensor:
    """Progress (N, P) after each row emits its token (N,). The tables hold each sentence's phrases: their
    automata, lengths (B, P), open_ends (B, P) whether a phrase ends inside a word; sentences (N,) says whose each
    row is.

    A phrase matched in full (progress = its length) waits for the next token: one that is `glued` (N,) to an open
    end goes on with the word and undoes the match; any other makes the phrase met for good (length + 1)."""
    slots = torch.arange(lengths.size(1), device=lengths.device)
    lengths = lengths[sentences]
    following = automata.step(sentences.unsqueeze(1), slots, progress.minimum(lengths), tokens.unsqueeze(1))
    kept = (progress == lengths) & ~(open_ends[sentences] & glued.unsqueeze(1))
    return torch.where(progress > lengths, progress, torch.where(kept, lengths + 1, following))


def allocate(scores: Tensor, banks: Tensor, totals: Tensor, count: int) -> Tensor:
    """Dynamic beam allocation: the positions (n, count) of the candidates to keep, taken round-robin over the
    banks: the best candidate of each bank, from the bank that met the most constraint tokens down, then the second
    best of each, and so on (Post & Vilar 2018; Hu et al. 2019). scores (n, M), banks (n, M) in
    [0, totals], totals (n,). Candidates at -inf come last."""
    order = scores.argsort(dim=1, descending=True, stable=True)
    ranked_banks = banks.gather(1, order)
    levels = int(totals.max()) + 1
    key = rank_within(ranked_banks) * levels + (totals.unsqueeze(1) - ranked_banks)
    key = key.masked_fill(~torch.isfinite(scores.gather(1, order)), torch.iinfo(key.dtype).max)
    return order.gather(1, key.argsort(dim=1, stable=True)[:, :count])


def rank_within(groups: Tensor) -> Tensor:
    """(n, M) -> each entry's rank among the earlier entries of its row with the same value (0 for the first). By
    sorting, not by a one-hot count per value: that would hold n * M * values numbers, the square of the
    constraints for a beam with many."""
    by_group = groups.argsort(dim=1, stable=True)
    grouped = groups.gather(1, by_group).contiguous()
    positions = torch.arange(groups.size(1), device=groups.device).expand_as(groups)
    ranks = positions - torch.searchsorted(grouped, grouped)  # minus where each value's run starts
    return torch.empty_like(ranks).scatter_(1, by_group, ranks)


def repeated(ids: Tensor) -> Tensor:
    """(n, M) -> True where an id already appeared earlier in its row."""
    ordered, order = ids.sort(dim=1, stable=True)
    again = torch.zeros_like(ordered, dtype=torch.bool)
    again[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return torch.zeros_like(again).scatter(1, order, again)


@dataclass
class Choice:
    """What one step of beam search keeps, per sentence: EOS candidates that finish (others at -inf), and the K
    continuations; ids index the sentence's K*V candidates."""

    finish_scores: Tensor  # (n, K)
    finish_ids: Tensor  # (n, K)
    next_scores: Tensor  # (n, K)
    next_ids: Tensor  # (n, K)
    finish_met: Tensor | None = None  # (n, K) whether each finished hypothesis meets its constraints
    next_state: ConstraintState | None = None  # the constraint state of the n*K continuations


@dataclass
class ConstraintState:
    """Per live row: how much of each phrase the output ends with (all of a met positive phrase), and how far it got
    through the prefix (its forced pieces, then the bytes of its last word)."""

    progress: Tensor  # (R, P)
    prefix: Tensor  # (R,)

    def take(self, index: Tensor) -> ConstraintState:
        return ConstraintState(self.progress[index], self.prefix[index])


def _padded(rows: list[list[int]], fill: int, width: int = 1) -> Tensor:
    width = max([width, *map(len, rows)])
    return torch.tensor([row + [fill] * (width - len(row)) for row in rows], dtype=torch.long)


class PrefixTracker:
    """Each sentence's prefix as tensors: the pieces of its complete words, forced one by one, then its last word,
    followed byte by byte through the sparse moves of `_partial_table`."""

    def __init__(self, lines: Sequence[Constraints], device: torch.device):
        self.forced = _padded([list(line.forced) for line in lines], 0).to(device)  # (B, H)
        self.forced_len = torch.tensor([len(line.forced) for line in lines], device=device)
        self.partial_len = torch.tensor([len(line.partial) for line in lines], device=device)
        self.partial_base = (self.partial_len.cumsum(0) - self.partial_len).to(device)
        self.partial_keys, self.partial_reached = (column.to(device) for column in _partial_table(lines))

    def written(self, sentences: Tensor, position: Tensor) -> Tensor:
        """(R,) whether each row wrote its sentence's whole prefix."""
        return position == self.forced_len[sentences] + self.partial_len[sentences]

    def restrict(self, scores: Tensor, sentences: Tensor, position: Tensor, free: Tensor) -> None:
        """Set to -inf, in place, every piece the prefix does not allow next, for the rows (R,) still writing it
        that are `free` (R,); position (R,) is how far each got: forced pieces, then bytes of the last word."""
        forced_len = self.forced_len[sentences]
        forced = (free & (position < forced_len)).nonzero().squeeze(1)
        if forced.numel():
            tokens = self.forced[sentences[forced], position[forced]]
            kept = scores[forced, tokens]
            scores[forced] = NEG_INF
            scores[forced, tokens] = kept
        offset = position - forced_len
        partial = (free & (offset >= 0) & (offset < self.partial_len[sentences])).nonzero().squeeze(1)
        if partial.numel():
            states = (self.partial_base[sentences[partial]] + offset[partial]) * _KEY_STRIDE  # (R',)
            starts = torch.searchsorted(self.partial_keys, states)
            rows, entries = _expand(starts, torch.searchsorted(self.partial_keys, states + _KEY_STRIDE) - starts)
            allowed = torch.zeros(partial.numel(), scores.size(1), dtype=torch.bool, device=scores.device)
            allowed[rows, self.partial_keys[entries] - states[rows]] = True
            scores[partial] = scores[partial].masked_fill(~allowed, NEG_INF)

    def advance(self, position: Tensor, tokens: Tensor, sentences: Tensor) -> Tensor:
        """The positions (N,) after each row emits its token (N,): one piece further through the forced ones, or as
        many bytes as the piece writes of the last word; EOS and a ruled-out piece do not move."""
        forced_len = self.forced_len[sentences]
        following = position + (position < forced_len).long()
        offset = position - forced_len
        partial = ((offset >= 0) & (offset < self.partial_len[sentences])).nonzero().squeeze(1)
        if partial.numel():
            keys = (self.partial_base[sentences[partial]] + offset[partial]) * _KEY_STRIDE + tokens[partial]
            entries = torch.searchsorted(self.partial_keys, keys)  # the sentinel key is above every other
            found = self.partial_keys[entries] == keys
            reached = torch.where(found, self.partial_reached[entries], offset[partial])  # a ruled-out piece: no move
            following[partial] = forced_len[partial] + reached
        return torch.where(tokens == EOS, position, following)


def occurrence_table(lines: Sequence[Constraints], device: torch.device) -> tuple[Tensor, Tensor]:
    """Which of each sentence's positive phrases hold each token, sorted by (sentence, token), for
    `ConstraintTracker.banks` to look up: keys (sentence * stride + token), slots."""
    entries = sorted((sentence * _KEY_STRIDE + token, slot)
                     for sentence, line in enumerate(lines) for slot, phrase in enumerate(line.positive)
                     for token in set(phrase))
    table = torch.tensor(entries, dtype=torch.long, device=device).view(-1, 2)  # (E, 2)
    keys, slots = table.T.contiguous()
    return keys, slots


class ConstraintTracker:
    """The constraints of a batch of sentences as tensors, indexed by sentence (`_Beams.sentences` in search): a
    `nmtkit.decoding.restriction.Restriction` that also ranks (`choose`)."""

    def __init__(self, constraints: Sequence[Constraints | None], device: torch.device,
                 word_ends: WordEnds | None = None):
        lines = [line or Constraints() for line in constraints]
        self.lines, self.device, self.word_ends = lines, device, word_ends
        self.glued, self.open = (word_ends.glued.to(device), word_ends.open.to(device)) if word_ends else (None, None)
        self._init_phrases(lines, device)
        self.prefix = PrefixTracker(lines, device)

    def _init_phrases(self, lines: list[Constraints], device: torch.device) -> None:
        """Each sentence's positive then negative phrases, padded to P phrases of L tokens."""
        phrases = [[list(phrase) for phrase in (*line.positive, *line.negative)] for line in lines]
        slots = max([1, *map(len, phrases)])
        longest = max([1, *(len(phrase) for line in phrases for phrase in line)])
        phrases = [line + [[]] * (slots - len(line)) for line in phrases]
        self.phrases = torch.stack([_padded(line, -1, longest) for line in phrases]).to(device)  # (B, P, L)
        self.lengths = torch.tensor([[len(phrase) for phrase in line] for line in phrases], device=device)  # (B, P)
        self.negative = torch.tensor([[len(line.positive) <= slot < len(line.positive) + len(line.negative)
                                       for slot in range(slots)] for line in lines], device=device)  # (B, P)
        self.totals = (self.lengths * ~self.negative).sum(dim=1)  # (B,) positive tokens to meet
        self.automata = PhraseAutomata(phrases, device)
        last = self.phrases.gather(2, (self.lengths - 1).clamp(min=0).unsqueeze(2)).squeeze(2).clamp(min=0)
        open_last = torch.zeros_like(last, dtype=torch.bool) if self.open is None else self.open[last]
        self.open_ends = (self.lengths > 0) & ~self.negative & open_last  # (B, P) a positive phrase ends in a word
        self.occurrence_keys, self.occurrence_slots = occurrence_table(lines, device)

    def initial_state(self, rows: int) -> ConstraintState:
        return ConstraintState(torch.zeros(rows, self.lengths.size(1), dtype=torch.long, device=self.lengths.device),
                               torch.zeros(rows, dtype=torch.long, device=self.lengths.device))

    def take(self, sentences: Tensor) -> ConstraintTracker:
        return ConstraintTracker([self.lines[index] for index in sentences.tolist()], self.device, self.word_ends)

    def complete(self, sentences: Tensor, state: ConstraintState) -> Tensor:
        """(R,) whether each row met every positive phrase and wrote the whole prefix; sentences (R,)."""
        met = (state.progress >= self.lengths[sentences]) | self.negative[sentences]  # a full match: EOS ends it
        return met.all(dim=1) & self.prefix.written(sentences, state.prefix)

    def restrict(self, candidates: Tensor, sentences: Tensor, state: ConstraintState, steps_left: Tensor) -> None:
        """Set to -inf, in place, the candidates the constraints rule out: a token completing a negative phrase; in
        the prefix, every piece it does not allow; EOS before `complete`. candidates (R, V), one row per live
        hypothesis, or (n, K, V) with sentences and steps_left (n,) a sentence's. Rows at their length limit
        (`steps_left` 0: only EOS is left) are left alone."""
        scores = candidates.view(-1, candidates.size(-1))
        repeat = scores.size(0) // sentences.size(0)
        row_sentences, row_steps_left = sentences.repeat_interleave(repeat), steps_left.repeat_interleave(repeat)
        self._ban_negative(scores, row_sentences, state)
        free = row_steps_left > 0
        self.prefix.restrict(scores, row_sentences, state.prefix, free)
        scores[free & ~self.complete(row_sentences, state), EOS] = NEG_INF

    def _ban_negative(self, scores: Tensor, sentences: Tensor, state: ConstraintState) -> None:
        lengths = self.lengths[sentences]
        rows, slots = (self.negative[sentences] & (state.progress == lengths - 1)).nonzero(as_tuple=True)
        if rows.numel():
            scores[rows, self.phrases[sentences[rows], slots, lengths[rows, slots] - 1]] = NEG_INF

    def advance(self, state: ConstraintState, rows: Tensor, tokens: Tensor, sentences: Tensor) -> ConstraintState:
        """The state after each of rows (N,) emits its token (N,); sentences (N,) are the rows' sentences."""
        glued = torch.zeros_like(tokens, dtype=torch.bool) if self.glued is None else self.glued[tokens]
        progress = advance_phrases(self.automata, self.lengths, self.open_ends, sentences, state.progress[rows],
                                   tokens, glued)
        return ConstraintState(progress, self.prefix.advance(state.prefix[rows], tokens, sentences))

    follow = advance  # `Restriction.follow`

    def choose(self, candidates: Tensor, sentences: Tensor, state: ConstraintState) -> Choice:
        """One step of constrained beam search over candidates (n, K, V), already `restrict`ed: EOS candidates
        `allocate` ranks within the first K finish, the first K others go on. Only the kept candidates' states are
        computed (the banks of all M come from `banks`: their states would be n * M * P numbers)."""
        n, beam_size, vocab = candidates.shape
        flat = candidates.view(n, beam_size * vocab)
        ids = self._candidate_ids(flat, sentences, state, beam_size, vocab)  # (n, M)
        scores = flat.gather(1, ids).masked_fill(repeated(ids), NEG_INF)
        rows = torch.arange(n, device=ids.device).unsqueeze(1) * beam_size + ids // vocab  # (n, M)
        tokens = ids % vocab
        row_sentences = sentences.repeat_interleave(beam_size)
        live = torch.isfinite(scores)  # a candidate at -inf (ruled out, or a repeat) comes last whatever its bank
        banks = torch.zeros_like(ids)
        banks[live] = self.banks(state, row_sentences, rows[live], tokens[live])
        totals, eos = self.totals[sentences], tokens == EOS
        first = allocate(scores, banks, totals, beam_size)
        finishing = self.advance(state, rows.gather(1, first).view(-1), tokens.gather(1, first).view(-1), row_sentences)
        met = self.complete(row_sentences, finishing).view(n, beam_size)
        going_scores = scores.masked_fill(eos, NEG_INF)
        going = allocate(going_scores, banks, totals, beam_size)
        following = self.advance(state, rows.gather(1, going).view(-1), tokens.gather(1, going).view(-1), row_sentences)
        return Choice(scores.gather(1, first).masked_fill(~eos.gather(1, first), NEG_INF), ids.gather(1, first),
                      going_scores.gather(1, going), ids.gather(1, going), met, following)

    def banks(self, state: ConstraintState, sentences: Tensor, rows: Tensor, tokens: Tensor) -> Tensor:
        """(N,) the positive-phrase tokens met after each of rows (N,) emits its token (N,): `advance`'s, summed, in
        memory linear in N (sentences (R,): the state's rows'). A token leaves each phrase it is not in as any such
        token would (a full match kept, or undone if glued to an open end, or a partial one lost), so a row's sums
        after a glued and an unglued token hold for all; only phrases holding the token are looked up one by one."""
        lengths, positive, open_ends = self.lengths[sentences], ~self.negative[sentences], self.open_ends[sentences]
        progress = state.progress  # (R, P)
        met = progress > lengths
        unglued_sums = (lengths * ((met | (progress == lengths)) & positive)).sum(dim=1)
        glued_sums = (lengths * ((met | ((progress == lengths) & ~open_ends)) & positive)).sum(dim=1)
        glued = torch.zeros_like(tokens, dtype=torch.bool) if self.glued is None else self.glued[tokens]
        sums = torch.where(glued, glued_sums[rows], unglued_sums[rows])
        pairs, slots = self._occurrences(sentences[rows], tokens)
        parents = rows[pairs]
        length, matched = lengths[parents, slots], progress[parents, slots]
        kept = (matched > length) | ((matched == length) & ~(open_ends[parents, slots] & glued[pairs]))
        reached = self.automata.step(sentences[parents], slots, matched.minimum(length), tokens[pairs])
        return sums.index_add(0, pairs, reached.minimum(length) * ~kept)

    def _occurrences(self, sentences: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """The positive phrases that hold each row's token: (row, slot) for each."""
        keys = sentences * _KEY_STRIDE + tokens
        starts = torch.searchsorted(self.occurrence_keys, keys)
        pairs, entries = _expand(starts, torch.searchsorted(self.occurrence_keys, keys, right=True) - starts)
        return pairs, self.occurrence_slots[entries]

    def _candidate_ids(self, flat: Tensor, sentences: Tensor, state: ConstraintState, beam_size: int,
                       vocab: int) -> Tensor:
        """The 2K best continuations, each beam's best token, each beam's next token of every unmet positive phrase,
        and its best token that ends the word of a phrase matched in full (the best token where there is none), as
        ids into the K*V candidates: (n, 4K + K*P)."""
        n = flat.size(0)
        best = flat.view(n, beam_size, vocab).argmax(dim=-1)  # (n, K)
        beam_starts = torch.arange(beam_size, device=flat.device) * vocab
        row_sentences = sentences.repeat_interleave(beam_size)
        wanted = self._next_tokens(row_sentences, state)  # (n*K, P)
        wanted = torch.where(wanted >= 0, wanted, best.view(-1, 1)).view(n, beam_size, -1)
        ending = self._best_word_ends(flat.view(n * beam_size, vocab), row_sentences, state, best.view(-1))
        top = flat.topk(min(2 * beam_size, flat.size(1)), dim=1).indices
        return torch.cat([top, beam_starts + best, (beam_starts.view(1, -1, 1) + wanted).view(n, -1),
                          beam_starts + ending.view(n, beam_size)], dim=1)

    def _best_word_ends(self, scores: Tensor, sentences: Tensor, state: ConstraintState, best: Tensor) -> Tensor:
        """(R,) each row's best token that is not glued to the word before it, where a phrase matched in full waits
        for one (the model may prefer to go on with the word); `best` elsewhere."""
        if self.glued is None:
            return best
        pending = ((state.progress == self.lengths[sentences]) & self.open_ends[sentences]).any(dim=1)
        rows = pending.nonzero().squeeze(1)
        if not rows.numel():
            return best
        return best.index_put((rows,), scores[rows].masked_fill(self.glued, NEG_INF).argmax(dim=-1))

    def _next_tokens(self, sentences: Tensor, state: ConstraintState) -> Tensor:
        """(R, P) the token that takes each unmet positive phrase one further, -1 for the others."""
        slots = torch.arange(self.phrases.size(1), device=sentences.device)
        unmet = ~self.negative[sentences] & (state.progress < self.lengths[sentences])
        tokens = self.phrases[sentences.unsqueeze(1), slots, state.progress.clamp(max=self.phrases.size(2) - 1)]
        return torch.where(unmet, tokens, -1)


def _partial_table(lines: Sequence[Constraints]) -> tuple[Tensor, Tensor]:
    """The moves through every line's partial word, sparse (a table of byte offsets by pieces would hold the
    vocabulary size times the word's length): keys (E+1,) state * stride + piece, sorted, where the states number
    every byte offset of every line's word in line order; and reached (E+1,), the offset each move leads to. The
    last entry is a sentinel above every key, so that a search for any key lands on an entry."""
    moves = [(offset, tokens, written) for line in lines for offset, (tokens, written) in enumerate(line.partial)]
    counts = torch.tensor([len(tokens) for _, tokens, _ in moves], dtype=torch.long)
    states = torch.repeat_interleave(torch.arange(len(moves)), counts)
    offsets = torch.repeat_interleave(torch.tensor([offset for offset, _, _ in moves], dtype=torch.long), counts)
    tokens = torch.cat([torch.zeros(0, dtype=torch.long), *(tokens for _, tokens, _ in moves)])
    written = torch.cat([torch.zeros(0, dtype=torch.long), *(written for _, _, written in moves)])
    keys, order = torch.cat([states * _KEY_STRIDE + tokens, torch.tensor([2**62])]).sort()
    return keys, torch.cat([offsets + written, torch.tensor([-1])])[order]


def _expand(starts: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
    """Ranges of entries, one per owner (starts (N,), counts (N,)), as pairs: (owners, entries), both (sum(counts),)."""
    owners = torch.repeat_interleave(torch.arange(len(starts), device=starts.device), counts)
    firsts = counts.cumsum(0) - counts
    return owners, starts[owners] + torch.arange(len(owners), device=starts.device) - firsts[owners]
