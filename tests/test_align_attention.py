"""nmtkit.align.attention: subword -> word attention, teacher-forced attention and the attention a model chose."""

from __future__ import annotations

import pytest
import torch

from nmtkit.align.attention import piece_words, teacher_forced_attention, word_attention
from nmtkit.decoding.ensemble import Ensemble
from nmtkit.errors import NmtkitError
from nmtkit.models.base import EncoderDecoder

# --- subwords -> words ------------------------------------------------------------------------------------------


def spans_of(pieces: list[str]) -> list[tuple[int, int]]:
    """Byte spans of pieces that spell the text exactly ("▁" = the space before a word, none before the first)."""
    spans, position = [], 0
    for index, piece in enumerate(pieces):
        length = len(piece.replace("\u2581", " ").encode()) - (index == 0 and piece.startswith("\u2581"))
        spans.append((position, position + length))
        position += length
    return spans


@pytest.mark.parametrize("pieces, words, expected", [
    (["▁EN", "▁el", "▁pri", "mer"], ["EN", "el", "primer"], [0, 1, 2, 2]),
    (["▁", "á", "▁hacer", "▁,"], ["á", "hacer", ","], [0, 0, 1, 2]),
    (["▁tratado", ","], ["tratado", ","], [0, 1]),
    (["▁ab", "c▁d"], ["abc", "d"], [0, 0]),  # a piece across two words belongs to the first
    (["▁中文", "▁", "日本"], ["中文", "日本"], [0, 1, 1]),  # a lone "▁" belongs to the word after it
    (["▁x"], [], [0]),
])
def test_piece_words(pieces, words, expected):
    assert piece_words(spans_of(pieces), words) == expected


WORDS_AFTER_NORMALIZATION = ["ﬁle", "café", "…", "ｘ²", "cafe\u0301", "（注）", "end"]  # NFKC changes their lengths


@pytest.mark.parametrize("normalization", ["nmt_nfkc", "identity"])
def test_piece_words_follow_the_raw_text_whatever_the_normalization(normalization):
    """Each word gets exactly the bytes of its own pieces, also where NFKC makes a piece longer or shorter than
    the raw characters it came from (the old character count drifted one word per such character)."""
    from nmtkit.config.sections import DataConfig
    from nmtkit.data.subword import train_subword

    lines = [" ".join(WORDS_AFTER_NORMALIZATION), "the file of the cafe", "end of the file"] * 40
    subword = train_subword(lines, DataConfig(subword="bpe", normalization=normalization), 60)
    text = " ".join(WORDS_AFTER_NORMALIZATION).encode()
    [spans] = subword.spans([text.decode()])
    owners = piece_words(spans, WORDS_AFTER_NORMALIZATION)
    for index, word in enumerate(WORDS_AFTER_NORMALIZATION):
        own = b"".join(text[begin:end] for (begin, end), owner in zip(spans, owners) if owner == index)
        assert own.strip() == word.encode(), (word, own)


def test_word_attention_sums_source_and_averages_target_subwords():
    # 3 target subwords (words 0, 0, 1) + EOS row; 3 source subwords (words 0, 0, 1) + EOS column
    attention = torch.tensor([[0.2, 0.2, 0.5, 0.1],
                              [0.0, 0.4, 0.4, 0.2],
                              [0.1, 0.0, 0.9, 0.0],
                              [0.0, 0.0, 0.0, 1.0]])
    matrix = word_attention(attention, [0, 0, 1], [0, 0, 1], 2, 2)
    raw = torch.tensor([[(0.4 + 0.4) / 2, (0.5 + 0.4) / 2], [0.1, 0.9]])
    assert torch.allclose(matrix, raw / raw.sum(dim=1, keepdim=True))


# --- attention from a model -------------------------------------------------------------------------------------


def test_teacher_forced_attention_shapes_and_layers(make_transformer):
    model = make_transformer(decoder_layers=3)
    sources, targets = [[4, 5, 6], [7, 8]], [[9, 10], [4, 5, 6, 7]]
    last = teacher_forced_attention(model, sources, targets, torch.device("cpu"))
    assert [tuple(a.shape) for a in last] == [(3, 4), (5, 3)]
    assert torch.allclose(last[0].sum(dim=-1), torch.ones(3), atol=1e-5)
    model.select_attention(0, 1)
    first_head = teacher_forced_attention(model, sources, targets, torch.device("cpu"))
    assert not torch.allclose(first_head[0], last[0])
    model.select_attention(-1, None)
    assert torch.allclose(teacher_forced_attention(model, sources, targets, torch.device("cpu"))[0], last[0])
    with pytest.raises(NmtkitError, match="--layer 3"):
        model.select_attention(3, None)
    with pytest.raises(NmtkitError, match="--head 2"):
        model.select_attention(None, 2)


def test_convs2s_attention_is_the_block_average_or_a_chosen_block():
    from nmtkit.models.convs2s import ConvS2SConfig
    from nmtkit.registry import build_model

    torch.manual_seed(0)
    config = ConvS2SConfig(embed_dim=16, hidden=16, encoder_layers=2, decoder_layers=3, out_embed_dim=16)
    model = build_model(config, 12, 12, True).eval()
    sources, targets, cpu = [[4, 5, 6]], [[9, 10, 11]], torch.device("cpu")
    blocks = []
    for layer in range(3):
        model.select_attention(layer, None)
        blocks.append(teacher_forced_attention(model, sources, targets, cpu)[0])
    assert not torch.allclose(blocks[0], blocks[2])
    with model.chosen_attention(None, None):
        average = teacher_forced_attention(model, sources, targets, cpu)[0]
    torch.testing.assert_close(average, torch.stack(blocks).mean(dim=0))
    torch.testing.assert_close(teacher_forced_attention(model, sources, targets, cpu)[0], blocks[2])  # restored
    with pytest.raises(NmtkitError, match="no attention heads"):
        model.select_attention(0, 1)


def test_chosen_attention_restores_the_models_own_after_the_block(make_transformer):
    """Alignment takes the second last layer; translation (the coverage penalty) keeps reading the last one."""
    model = make_transformer(decoder_layers=3)
    sources, targets, cpu = [[4, 5, 6]], [[9, 10]], torch.device("cpu")
    own = teacher_forced_attention(model, sources, targets, cpu)[0]
    with model.chosen_attention(None, None):
        second_last = teacher_forced_attention(model, sources, targets, cpu)[0]
        with pytest.raises(NmtkitError, match="--head 5"), model.chosen_attention(None, 5):
            pass
        assert torch.equal(teacher_forced_attention(model, sources, targets, cpu)[0], second_last)  # refused: kept
    assert not torch.equal(second_last, own)
    assert torch.equal(teacher_forced_attention(model, sources, targets, cpu)[0], own)


class NoAttention(EncoderDecoder):
    has_attention = False

    def forward(self, src, src_mask, tgt_in, need_attention=False):
        return torch.zeros(*tgt_in.shape, 5), None


@pytest.mark.parametrize("model", [NoAttention(), Ensemble([NoAttention(), NoAttention()])])
def test_models_without_attention_are_refused(model):
    with pytest.raises(NmtkitError, match="has no attention") as refused:
        teacher_forced_attention(model, [[4]], [[5]], torch.device("cpu"))
    assert "(bahdanau, convs2s, gnmt, luong, transformer)" in str(refused.value)  # the registered ones that attend
    with pytest.raises(NmtkitError, match="--layer and --head do not apply"):
        model.select_attention(1, None)


def test_an_ensemble_attends_with_the_mean_of_its_members(make_transformer):
    """The ensemble aligns as it decodes: its attention is the mean of its members', each member's as chosen."""
    first, second = make_transformer(seed=1, decoder_layers=3), make_transformer(seed=2)
    ensemble, cpu = Ensemble([first, second]).eval(), torch.device("cpu")
    sources, targets = [[4, 5, 6], [7, 8]], [[9, 10], [4, 5, 6, 7]]
    with ensemble.chosen_attention(None, 1):
        mixed = teacher_forced_attention(ensemble, sources, targets, cpu)
        with first.chosen_attention(None, 1), second.chosen_attention(None, 1):
            members = [teacher_forced_attention(member, sources, targets, cpu) for member in (first, second)]
    for pair, (one, other) in zip(mixed, zip(*members)):
        torch.testing.assert_close(pair, (one + other) / 2)
    own = [teacher_forced_attention(member, sources, targets, cpu)[1] for member in (first, second)]
    torch.testing.assert_close(teacher_forced_attention(ensemble, sources, targets, cpu)[1], sum(own) / 2)  # restored
    with pytest.raises(NmtkitError, match="--layer 2"):
        ensemble.select_attention(2, None)  # the second member has two decoder layers
