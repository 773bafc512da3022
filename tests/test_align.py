"""nmtkit.align: subword -> word attention, hard links, symmetrization, Pharaoh I/O, AER, heat-maps."""

from __future__ import annotations

import pytest
import torch
from rich.console import Console

from nmtkit.align import (
    alignment_error,
    format_pharaoh,
    hard_links,
    parse_pharaoh,
    piece_words,
    plot_heatmap,
    source_links,
    symmetrize,
    teacher_forced_attention,
    terminal_heatmap,
    transpose,
    word_attention,
)
from nmtkit.ensemble import Ensemble
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
    from nmtkit.config import DataConfig
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


# --- hard links and symmetrization ------------------------------------------------------------------------------


def test_hard_links_argmax_and_threshold():
    matrix = torch.tensor([[0.1, 0.9], [0.6, 0.4]])  # (target words, source words)
    assert hard_links(matrix) == {(1, 0), (0, 1)}
    assert hard_links(matrix, threshold=0.35) == {(1, 0), (0, 1), (1, 1)}
    assert hard_links(torch.zeros(0, 3)) == set()
    assert source_links(matrix) == {(0, 1), (1, 0)}
    assert source_links(torch.tensor([[0.1, 0.9], [0.2, 0.8]])) == {(0, 1), (1, 0)}


FORWARD, BACKWARD = {(0, 0), (1, 2), (3, 3)}, {(0, 0), (2, 1), (3, 3), (3, 4)}


@pytest.mark.parametrize("method, expected", [
    ("intersection", {(0, 0), (3, 3)}),
    ("union", {(0, 0), (1, 2), (2, 1), (3, 3), (3, 4)}),
    # (3, 4) grows next to (3, 3) (target 4 unaligned); (1, 2) and (2, 1) join in final-and (both words unaligned)
    ("grow-diag-final-and", {(0, 0), (1, 2), (2, 1), (3, 3), (3, 4)}),
])
def test_symmetrize(method, expected):
    assert symmetrize(FORWARD, BACKWARD, method) == expected


def test_grow_diag_final_and_skips_links_of_aligned_words():
    # (0, 2) is not next to (0, 0) and source 0 is aligned, so final-and leaves it out; union keeps it
    assert symmetrize({(0, 0), (0, 2)}, {(0, 0)}, "grow-diag-final-and") == {(0, 0)}
    # a diagonal neighbour of the intersection that covers an unaligned word grows in
    assert symmetrize({(0, 0), (1, 1)}, {(0, 0)}, "grow-diag-final-and") == {(0, 0), (1, 1)}
    assert transpose({(0, 1)}) == {(1, 0)}
    with pytest.raises(NmtkitError, match="unknown symmetrization"):
        symmetrize(set(), set(), "both")


# --- Pharaoh and AER --------------------------------------------------------------------------------------------


def test_parse_and_format_pharaoh():
    sure, possible = parse_pharaoh("0-1 2p3 4-4")
    assert sure == {(0, 1), (4, 4)} and possible == {(0, 1), (2, 3), (4, 4)}
    assert format_pharaoh({(4, 4), (0, 1), (10, 2)}) == "0-1 4-4 10-2"
    with pytest.raises(NmtkitError, match="x-1"):
        parse_pharaoh("x-1", "gold:1")


@pytest.mark.parametrize("predicted, precision, recall, aer", [
    ({(0, 0), (1, 1)}, 1.0, 1.0, 0.0),  # all sure links
    ({(0, 0), (1, 1), (2, 2)}, 1.0, 1.0, 0.0),  # a possible link costs nothing
    ({(0, 0), (1, 1), (2, 2), (0, 3)}, 0.75, 1.0, 1 - (2 + 3) / (4 + 2)),
    ({(0, 0)}, 1.0, 0.5, 1 - (1 + 1) / (1 + 2)),
    (set(), 0.0, 0.0, 1.0),
])
def test_alignment_error(predicted, precision, recall, aer):
    gold = [parse_pharaoh("0-0 1-1 2p2")]
    scores = alignment_error([predicted], gold)
    assert (scores.precision, scores.recall) == pytest.approx((precision, recall))
    assert scores.aer == pytest.approx(aer)


def test_alignment_error_sums_over_the_corpus_and_needs_pairs():
    gold = [parse_pharaoh("0-0"), parse_pharaoh("0-0 1-1 2-2")]
    scores = alignment_error([{(0, 0)}, {(0, 0)}], gold)
    assert scores.recall == pytest.approx(2 / 4) and scores.precision == 1.0
    with pytest.raises(NmtkitError, match="pair up"):
        alignment_error([set()], gold)


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


# --- heat-maps --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml")])
def test_plot_heatmap_writes_an_image(tmp_path, suffix, magic):
    matrix = torch.softmax(torch.randn(4, 5), dim=-1)
    path = tmp_path / f"pair.{suffix}"
    plot_heatmap(matrix, ["el", "primer", "tratado", ",", "oh"], ["The", "former", "treatise", ","], path,
                 {(0, 0), (1, 1)})
    assert path.read_bytes().startswith(magic)
    if suffix == "png":
        from PIL import Image

        with Image.open(path) as image:
            image.verify()


def test_terminal_heatmap_shows_words_and_shades():
    console = Console(record=True, width=100, color_system=None)
    console.print(terminal_heatmap(torch.tensor([[0.0, 1.0], [0.5, 0.5]]), ["uno", "dos"], ["two", "one"]))
    text = console.export_text()
    assert "two" in text and "0:uno" in text and "1:dos" in text and "█" in text


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
