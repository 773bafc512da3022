"""`nmtkit import` of transformers' MarianMTModel and M2M100ForConditionalGeneration: for small random models built
here with transformers' own classes and save_pretrained (tests/hf_models.py), nmtkit's subword ids, teacher-forced
log-probabilities, greedy and beam outputs equal the tokenizer's and `generate`'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hf_models import SOURCE, TARGET, TEXTS, m2m100_dir, marian_dir, nllb_dir

from nmtkit.checkpoint.payload import LoadedModel, load_checkpoint, restore_model
from nmtkit.data.subword import BOS, EOS, PAD
from nmtkit.decoding.hypotheses import LengthPenalty
from nmtkit.decoding.search import beam_search, greedy_search
from nmtkit.pretrained.command import import_model

LIMIT = 30  # output tokens, EOS included
BEAM_BOOST = 4.0  # random models whose beams mostly end before LIMIT (tests/hf_models.py)
BEAM_TEXTS = TEXTS + SOURCE[:6]


@dataclass
class Pair:
    """A transformers model and its tokenizer, the nmtkit import of the same directory, and nmtkit id -> their id."""

    kind: str  # marian, m2m100 or nllb (an M2M100ForConditionalGeneration with NllbTokenizer's files)
    hf: torch.nn.Module
    tokenizer: object
    loaded: LoadedModel
    to_hf: dict[int, int]
    prompt: list[int]  # the decoder's start in transformers' ids: Marian's pad; M2M100's </s> and the language
    tgt_lang: str = ""  # the target language of a multilingual model

    def hf_ids(self, ids: list[int]) -> list[int]:
        return [self.to_hf[index] for index in ids]


LANGS = {"m2m100": ("en", "de"), "nllb": ("eng_Latn", "deu_Latn")}


def build(kind: str, directory: Path, eos_boost: float) -> Pair:
    from transformers import (
        M2M100ForConditionalGeneration,
        M2M100Tokenizer,
        MarianMTModel,
        MarianTokenizer,
        NllbTokenizer,
    )

    if kind == "marian":
        marian_dir(directory / "hf", eos_boost)
        hf, tokenizer = MarianMTModel.from_pretrained(directory / "hf"), MarianTokenizer.from_pretrained(
            directory / "hf")
        import_model(directory / "hf", directory / "nmtkit")
    else:
        (m2m100_dir if kind == "m2m100" else nllb_dir)(directory / "hf", eos_boost)
        hf = M2M100ForConditionalGeneration.from_pretrained(directory / "hf")
        tokenizer_class = M2M100Tokenizer if kind == "m2m100" else NllbTokenizer
        tokenizer = tokenizer_class.from_pretrained(directory / "hf", src_lang=LANGS[kind][0], tgt_lang=LANGS[kind][1])
        import_model(directory / "hf", directory / "nmtkit", *LANGS[kind])
    loaded = restore_model(load_checkpoint(directory / "nmtkit" / "model.pt"), torch.device("cpu"))

    def hf_id(piece: str) -> int:
        if piece.startswith("<row"):  # an embedding row without a piece
            return int(piece[4:-1])
        if piece.startswith("<2"):  # a language tag
            lang = piece[2:-1]
            piece = {"marian": f">>{lang}<<", "m2m100": f"__{lang}__", "nllb": lang}[kind]
        return tokenizer.get_lang_id(piece[2:-2]) if kind == "m2m100" and piece.startswith("__") \
            else tokenizer.convert_tokens_to_ids(piece)

    pieces = loaded.tgt_subword.processor
    to_hf = {index: hf_id(pieces.id_to_piece(index)) for index in range(len(pieces))
             if index != BOS or kind != "marian"}
    start = hf.config.decoder_start_token_id
    tgt_lang = LANGS.get(kind, ("", ""))[1]
    prompt = [start] if kind == "marian" else [start, to_hf[loaded.tags[tgt_lang]]]
    return Pair(kind, hf.eval(), tokenizer, loaded, to_hf, prompt, tgt_lang)


@pytest.fixture(scope="module", params=["marian", "m2m100", "nllb"])
def pairs(request, tmp_path_factory) -> dict[float, Pair]:
    """Each architecture with two EOS boosts: 2 (greedy search writes a few tokens), BEAM_BOOST (beams end early)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp(request.param)
    return {boost: build(request.param, root / str(boost), boost) for boost in (2.0, BEAM_BOOST)}


def sources(pair: Pair, texts: list[str] = TEXTS) -> tuple[torch.Tensor, torch.Tensor]:
    """`texts` in nmtkit ids (the target-language tag first for M2M100), EOS appended, padded."""
    tags = [pair.loaded.tags[pair.tgt_lang]] if pair.tgt_lang else []
    ids = [tags + seq + [EOS] for seq in pair.loaded.src_subword.encode(texts)]
    width = max(map(len, ids))
    src = torch.tensor([seq + [PAD] * (width - len(seq)) for seq in ids])
    return src, src != PAD


def hf_inputs(pair: Pair, texts: list[str] = TEXTS):
    return pair.tokenizer(texts, return_tensors="pt", padding=True)


def hf_tokens(pair: Pair, row: list[int]) -> tuple[list[int], bool]:
    """A generated row without its prompt, padding and EOS; and whether it ended with EOS."""
    body = [token for token in row[len(pair.prompt):] if token != pair.hf.config.pad_token_id]
    ended = bool(body) and body[-1] == pair.hf.config.eos_token_id
    return (body[:-1] if ended else body), ended


def test_source_ids_are_the_tokenizers(pairs):
    pair = pairs[2.0]
    src, mask = sources(pair)
    encoded = hf_inputs(pair)
    for ids, keep, hf_row, hf_keep in zip(src.tolist(), mask.tolist(), encoded.input_ids.tolist(),
                                          encoded.attention_mask.tolist()):
        mine = [index for index, real in zip(ids, keep) if real]
        theirs = [index for index, real in zip(hf_row, hf_keep) if real]
        if pair.tgt_lang:  # nmtkit's source starts with the target tag, the model's with the source language
            assert mine[0] == pair.loaded.tags[pair.tgt_lang]
            assert theirs[0] == pair.to_hf[pair.loaded.model.config.source_token]
            mine, theirs = mine[1:], theirs[1:]
        assert pair.hf_ids(mine) == theirs


def test_target_text_decodes_as_the_tokenizer_decodes(pairs):
    pair = pairs[2.0]
    ids = pair.loaded.tgt_subword.encode(TARGET[:6])
    theirs = pair.tokenizer(text_target=TARGET[:6]).input_ids
    body = [row[1:-1] if pair.tgt_lang else row[:-1] for row in theirs]  # no language token, no EOS
    assert [pair.hf_ids(row) for row in ids] == body
    assert pair.loaded.tgt_subword.decode(ids) == pair.tokenizer.batch_decode(body, skip_special_tokens=True)


def test_teacher_forced_log_probs_agree_to_float32_precision(pairs):
    pair = pairs[BEAM_BOOST]
    src, mask = sources(pair)
    targets = pair.loaded.tgt_subword.encode(TARGET[:len(TEXTS)])
    width = max(map(len, targets)) + 1
    tgt_in = torch.tensor([[BOS] + seq + [PAD] * (width - 1 - len(seq)) for seq in targets])
    decoder_in = torch.tensor([pair.prompt + pair.hf_ids(row[1:]) for row in tgt_in.tolist()])
    encoded = hf_inputs(pair)
    with torch.no_grad():
        mine = F.log_softmax(pair.loaded.model(src, mask, tgt_in)[0], dim=-1)  # (B, T, V)
        theirs = F.log_softmax(pair.hf(input_ids=encoded.input_ids, attention_mask=encoded.attention_mask,
                                       decoder_input_ids=decoder_in).logits, dim=-1)[:, len(pair.prompt) - 1:]
    columns = sorted(pair.to_hf)
    real = tgt_in != PAD
    difference = (mine[..., columns] - theirs[..., pair.hf_ids(columns)])[real].abs().max()
    assert difference < 1e-5
    if pair.kind == "marian":  # nmtkit's BOS, a row transformers' Marian lacks, takes no probability
        assert mine[..., BOS].max() < -1000


def test_greedy_output_is_generates(pairs):
    pair = pairs[2.0]
    src, mask = sources(pair)
    encoded = hf_inputs(pair)
    with torch.no_grad():
        mine = greedy_search(pair.loaded.model, src, mask, torch.full((len(TEXTS),), LIMIT))
        theirs = pair.hf.generate(**encoded, num_beams=1, do_sample=False, max_new_tokens=LIMIT + len(pair.prompt) - 1,
                                  **forced(pair))
    rows = [hf_tokens(pair, row)[0] for row in theirs.tolist()]
    assert [pair.hf_ids(hyp.tokens) for hyp in mine] == rows
    assert sum(len(row) for row in rows) >= 2 * len(rows)  # the test compares tokens, not only EOS


def forced(pair: Pair) -> dict:
    """M2M100's target language token first; EOS at the limit, as nmtkit and Marian's config.json force it."""
    return {"forced_bos_token_id": pair.prompt[1], "forced_eos_token_id": pair.hf.config.eos_token_id} \
        if pair.tgt_lang else {}


@pytest.mark.parametrize("beam", [2, 4, 5])
def test_beam_outputs_and_scores_are_generates(pairs, beam):
    """The best hypothesis, token for token and score for score; the n-best list, where the two searches differ in
    one respect only: when a sentence's K-th hypothesis finishes, transformers (early_stopping=True) keeps the K
    best of all finished so far, so a hypothesis finishing at that step may replace an earlier one, while nmtkit
    keeps the first K. So each of transformers' K scores is at least nmtkit's of the same rank, and a hypothesis in
    both lists has one score. Hypotheses cut at the length limit are scored differently (transformers without the
    EOS it forces, nmtkit with its log-probability): sentences whose hypotheses all ended before it are compared,
    and at least three of ten do."""
    pair = pairs[BEAM_BOOST]
    src, mask = sources(pair, BEAM_TEXTS)
    decode = pair.loaded.config.decode  # the search defaults the import took from generation_config.json
    assert decode.beam == 4
    penalty = LengthPenalty(decode.length_penalty, decode.alpha, decode.beta)
    with torch.no_grad():
        mine = beam_search(pair.loaded.model, src, mask, torch.full((len(BEAM_TEXTS),), LIMIT), beam, penalty)
        theirs = pair.hf.generate(**hf_inputs(pair, BEAM_TEXTS), num_beams=beam, num_return_sequences=beam,
                                  do_sample=False, early_stopping=True, length_penalty=1.0,
                                  max_new_tokens=LIMIT + len(pair.prompt) - 1, output_scores=True,
                                  return_dict_in_generate=True, **forced(pair))
    rows = theirs.sequences.view(len(BEAM_TEXTS), beam, -1).tolist()
    scores = theirs.sequences_scores.view(len(BEAM_TEXTS), beam).tolist()
    compared, longest = 0, 0
    for hyps, hf_rows, hf_scores in zip(mine, rows, scores):
        ended = [hf_tokens(pair, row) for row in hf_rows]
        if not all(done and len(tokens) < LIMIT - 1 for tokens, done in ended):
            continue
        compared, longest = compared + 1, max(longest, *(len(hyp.tokens) for hyp in hyps))
        extra = len(pair.prompt) - 1  # the M2M100 language token counts in transformers' length
        found = {tuple(pair.hf_ids(hyp.tokens)): hyp.log_prob / (len(hyp.tokens) + 1 + extra) for hyp in hyps}
        assert pair.hf_ids(hyps[0].tokens) == ended[0][0]
        assert all(theirs_ >= ours - 1e-5 for theirs_, ours in zip(hf_scores, found.values()))
        for (tokens, _), score in zip(ended, hf_scores):
            if tuple(tokens) in found:
                assert found[tuple(tokens)] == pytest.approx(score, abs=1e-5)
    assert compared >= 3 and longest >= 2
