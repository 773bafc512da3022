"""A loaded CTranslate2 translator, called with nmtkit's subword ids as its pieces (`ctranslate2_engine` searches
with it).

A model that reads its target-language tag in the decoder (an imported M2M100 or NLLB: `language_tags` in
nmtkit.json, `ExportedModel.source_token`) is called as CTranslate2's own M2M100 converter has it called: nmtkit's
source starts with the tag, which moves to the decoder as the target prefix (after the `</s>` the decoder starts
with), and the source-language token takes its place in the source; so the model reads what nmtkit's PyTorch model
reads (`nmtkit.models.transformer.Transformer.encode`, `init_state`). CTranslate2 counts the prefix as a step of its
own: in the length limits (given one more here), in the hypotheses (the tag is removed here, and its row of
attention, and its log-probability from a teacher-forced score), and in the length that divides a beam search's
score (`ctranslate2_engine` accounts for it); it adds nothing to the score (the forced step scores 0).
"""

from __future__ import annotations

import os

from nmtkit.data.subword import EOS
from nmtkit.errors import NmtkitError
from nmtkit.translate.exported import ExportedModel

DEAD = -1e9  # below any score of a real hypothesis, above CTranslate2's -1e10 for a candidate it removed


class CTranslate2Model:
    """A loaded CTranslate2 translator, called with nmtkit's subword ids as its pieces.

    On a CPU it runs one worker of one thread per thread by default (`inter_threads` 0): CTranslate2 spreads every
    operation of a search over its intra-op threads, and for the few rows of a decoding step the threads' wake-ups
    cost more than they share. Measured on a 2-core Intel Xeon (family 6 model 207, int8 export of the messages
    teacher, beam 5): one thread searched a batch of 1, 8, 64 and 256 messages in 8, 48, 454 and 3,704 ms, two
    threads in 90, 267, 522 and 4,072 ms; the 1,000 test messages took 11.0-11.9 s with one worker of two threads
    and 3.4-3.8 s with two of one (docs/export-serve.md)."""

    def __init__(self, exported: ExportedModel, device: tuple[str, int], threads: int, inter_threads: int):
        import ctranslate2

        src, tgt = exported.src_subword.processor, exported.tgt_subword.processor
        self.src_pieces = [src.id_to_piece(index) for index in range(src.get_piece_size())]
        self.tgt_pieces = [tgt.id_to_piece(index) for index in range(tgt.get_piece_size())]
        self.tgt_ids = {piece: index for index, piece in enumerate(self.tgt_pieces)}
        self.eos_piece = tgt.id_to_piece(EOS)
        token = exported.source_token
        self.source_piece = None if token is None else self.src_pieces[token]  # None: no tag in the decoder
        self.device, index = device
        self.device_index = index
        if inter_threads < 0:
            raise NmtkitError(f"--inter-threads must be at least 0 (got {inter_threads})")
        total = threads if threads > 0 else os.cpu_count() or 1
        self.inter_threads = inter_threads or (total if self.device == "cpu" else 1)
        self.intra_threads = max(1, total // self.inter_threads)
        try:
            self.translator = ctranslate2.Translator(str(exported.directory), device=self.device, device_index=index,
                                                     inter_threads=self.inter_threads, intra_threads=self.intra_threads)
        except (RuntimeError, ValueError) as error:
            raise NmtkitError(f"CTranslate2 cannot load {exported.directory}: {error}") from error

    @property
    def decoder_tags(self) -> bool:
        """Whether the target-language tag is read in the decoder, as a target prefix of one token."""
        return self.source_piece is not None

    def pieces(self, sources: list[list[int]]) -> list[list[str]]:
        return [[self.src_pieces[index] for index in ids] for ids in sources]

    def split(self, tokens: list[list[str]]) -> tuple[list[list[str]], list[list[str]] | None]:
        """The sources CTranslate2 reads and the target prefixes (None without a tag in the decoder): the tag that
        starts each source moves to its prefix and the source token takes its place."""
        if not self.decoder_tags:
            return tokens, None
        if any(not pieces for pieces in tokens):
            raise NmtkitError("this model reads its target-language tag in the decoder and a source has none")
        return [[self.source_piece, *pieces[1:]] for pieces in tokens], [pieces[:1] for pieces in tokens]

    def translate(self, tokens: list[list[str]], limit: int, min_len: int,
                  options: dict) -> list[tuple[list[list[str]], list]]:
        """(hypotheses, scores) of each source; nmtkit ends a sentence of limit 1 with EOS at once."""
        if limit <= 1:
            return [([[]], [0.0]) for _ in tokens]
        sources, prefixes = self.split(tokens)
        tag = 0 if prefixes is None else 1  # the prefix counts in CTranslate2's lengths
        try:
            results = self.translator.translate_batch(sources, target_prefix=prefixes,
                                                      max_decoding_length=limit - 1 + tag,
                                                      min_decoding_length=min_len + tag if min_len else 0, **options)
        except RuntimeError as error:  # a CUDA library missing or out of memory: one line, not a traceback
            raise NmtkitError(f"CTranslate2 failed to translate on {self.device}: {error}") from error
        return [([pieces[tag:] for pieces in result.hypotheses], result.scores) for result in results]

    def attention(self, sources: list[list[str]], targets: list[list[str]]) -> list[list[list[float]]]:
        """The attention of each target piece over the source pieces, the target forced as a prefix (and one step
        beyond it, whose row is CTranslate2's to choose)."""
        sources, prefixes = self.split(sources)
        tag = 0 if prefixes is None else 1
        if prefixes is not None:
            targets = [prefix + target for prefix, target in zip(prefixes, targets)]
        try:
            results = self.translator.translate_batch(
                sources, target_prefix=targets, return_attention=True, beam_size=1, max_input_length=0,
                max_decoding_length=max(map(len, targets), default=0) + 1)
        except RuntimeError as error:
            raise NmtkitError(f"CTranslate2 failed to translate on {self.device}: {error}") from error
        return [result.attention[0][tag:] for result in results]

    def score(self, sources: list[list[str]], targets: list[list[str]]) -> list[float]:
        """log P(targets + EOS | sources), teacher-forced by CTranslate2 (which appends the EOS to a target that
        has none)."""
        return [sum(log_probs) for log_probs in self.token_log_probs(sources, targets)]

    def token_log_probs(self, sources: list[list[str]], targets: list[list[str]]) -> list[list[float]]:
        """log p of each target piece and of the EOS CTranslate2 appends, teacher-forced (a tag read in the decoder
        is forced, not predicted: its log p is left out)."""
        if not sources:
            return []
        targets = [pieces[:-1] if pieces[-1:] == [self.eos_piece] else pieces for pieces in targets]
        sources, prefixes = self.split(sources)
        tag = 0 if prefixes is None else 1
        if prefixes is not None:
            targets = [prefix + target for prefix, target in zip(prefixes, targets)]
        try:
            results = self.translator.score_batch(sources, targets, max_input_length=0)
        except RuntimeError as error:
            raise NmtkitError(f"CTranslate2 failed to score on {self.device}: {error}") from error
        return [list(result.log_probs)[tag:] for result in results]

    def eos_hidden(self, tokens: list[list[str]], beam: int, use_vmap: bool) -> list[bool]:
        """Whether CTranslate2's beam search hides EOS at the first step after the prefix (the tag): it replaces an
        EOS ranked 2nd to Kth there with a dead candidate of score -1e10 (`update_sample_with_prefix` in its
        decoding.cc), where nmtkit finishes the empty hypothesis. A search of that one step shows the dead ones."""
        sources, prefixes = self.split(tokens)
        try:
            results = self.translator.translate_batch(
                sources, target_prefix=prefixes, beam_size=beam, num_hypotheses=beam, max_decoding_length=2,
                return_scores=True, max_input_length=0, use_vmap=use_vmap)
        except RuntimeError as error:
            raise NmtkitError(f"CTranslate2 failed to translate on {self.device}: {error}") from error
        return [min(result.scores, default=0.0) < DEAD for result in results]
