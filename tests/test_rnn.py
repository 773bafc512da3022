"""Tests for nmtkit/modules/rnn.py: the shared RNN encoder and decoder stack, the bridges from encoder to decoder
states and source reversal."""

from __future__ import annotations

import pytest
import torch

from nmtkit.data.dataset import encode_sources
from nmtkit.data.subword import EOS, PAD
from nmtkit.modules.rnn import (
    RNNEncoder,
    RNNStack,
    bridge_aligned_at_bottom,
    bridge_aligned_at_top,
    reverse_all_tokens_index,
    reverse_before_eos_index,
    states_from_dict,
    states_to_dict,
)


def make_encoder(cell: str = "lstm", **options) -> RNNEncoder:
    torch.manual_seed(0)
    return RNNEncoder(20, 6, 8, 3, cell, **options).eval()


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("bidirectional_layers", [0, 1, 3])
def test_encoder_outputs_do_not_depend_on_padding(cell, bidirectional_layers):
    encoder = make_encoder(cell, bidirectional_layers=bidirectional_layers, residual_from=3)
    with torch.no_grad():
        outputs, finals = encoder(*encode_sources([[4, 5, 6, 7, 8, 9], [10, 11]]))
        alone, alone_finals = encoder(*encode_sources([[10, 11]]))
    assert outputs.shape == (2, 7, 8)
    torch.testing.assert_close(outputs[1, :3], alone[0], rtol=0, atol=1e-6)
    assert torch.all(outputs[1, 3:] == 0)
    assert len(finals) == 3 and len(finals[0]) == (2 if cell == "lstm" else 1)
    for final, alone_final in zip(finals, alone_finals):
        for part, alone_part in zip(final, alone_final):
            assert part.shape == (2, 8)
            torch.testing.assert_close(part[1], alone_part[0], rtol=0, atol=1e-6)


def test_bidirectional_final_state_is_forward_last_and_backward_first():
    encoder = make_encoder(bidirectional_layers=1)
    src, src_mask = encode_sources([[4, 5, 6]])
    with torch.no_grad():
        embedded = encoder.embedding(src)
        outputs, _ = encoder.layers[0](embedded)  # (1, 4, 2 * 4): forward half, backward half
        _, finals = encoder(src, src_mask)
    torch.testing.assert_close(finals[0][0][0, :4], outputs[0, -1, :4])  # forward read to EOS
    torch.testing.assert_close(finals[0][0][0, 4:], outputs[0, 0, 4:])  # backward read back to the first token


def test_residual_connections_start_at_the_given_depth():
    encoder = make_encoder(residual_from=3)
    with torch.no_grad():
        for parameter in encoder.layers[2].parameters():
            parameter.zero_()  # layer 3 outputs zeros, so only its skip path carries layer 2's output
        outputs, _ = encoder(*encode_sources([[4, 5, 6]]))
        below = make_encoder().layers[:2]
        x = encoder.embedding(encode_sources([[4, 5, 6]])[0])
        for layer in below:
            x, _ = layer(x)
    torch.testing.assert_close(outputs, x)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("feed_all", [False, True])
def test_stack_over_a_sequence_equals_step_by_step(cell, feed_all):
    torch.manual_seed(0)
    stack = RNNStack(5, 7, 3, cell, dropout=0.2, extra=4, feed_all=feed_all, residual_from=2).eval()
    inputs, extra = torch.randn(2, 6, 5), torch.randn(2, 6, 4)
    start = [tuple(torch.randn(2, 7) for _ in part) for part in stack.zero_states(2, inputs)]
    with torch.no_grad():
        whole, whole_states = stack(inputs, start, extra)
        states, outputs = start, []
        for t in range(6):
            output, states = stack(inputs[:, t : t + 1], states, extra[:, t : t + 1])
            outputs.append(output)
    torch.testing.assert_close(torch.cat(outputs, dim=1), whole, rtol=0, atol=1e-6)
    for final, step_final in zip(whole_states, states):
        torch.testing.assert_close(final, step_final, rtol=0, atol=1e-6)


def test_states_round_trip_through_a_batch_first_dict():
    states = [(torch.randn(3, 4), torch.randn(3, 4)), (torch.randn(3, 4), torch.randn(3, 4))]
    as_dict = states_to_dict(states, "dec_")
    assert sorted(as_dict) == ["dec_c0", "dec_c1", "dec_h0", "dec_h1"]
    assert states_from_dict(as_dict, 2, "dec_") == states
    gru_states = [(torch.randn(3, 4),)]
    assert states_from_dict(states_to_dict(gru_states), 1) == gru_states


def test_unknown_cell_and_odd_bidirectional_size_are_errors():
    with pytest.raises(ValueError, match="unknown RNN cell"):
        RNNEncoder(10, 4, 8, 1, "rnn")
    with pytest.raises(ValueError, match="even hidden size"):
        RNNEncoder(10, 4, 7, 1, bidirectional_layers=1)


def test_bridge_aligned_at_top_aligns_stacks_of_different_depth_at_the_top():
    finals = [(torch.full((1, 1), float(layer)),) for layer in range(3)]
    assert [state[0].item() for state in bridge_aligned_at_top(finals, 3)] == [0, 1, 2]
    assert [state[0].item() for state in bridge_aligned_at_top(finals, 2)] == [1, 2]
    assert [state[0].item() for state in bridge_aligned_at_top(finals[:1], 3)] == [0, 0, 0]
    assert [state[0].item() for state in bridge_aligned_at_top(finals[:2], 3)] == [0, 0, 1]


def test_bridge_aligned_at_bottom_goes_layer_by_layer_and_repeats_the_top_encoder_layer():
    finals = [(torch.full((1, 2), 1.0),), (torch.full((1, 2), 2.0),)]
    assert [state[0][0, 0].item() for state in bridge_aligned_at_bottom(finals, 4)] == [1.0, 2.0, 2.0, 2.0]
    assert [state[0][0, 0].item() for state in bridge_aligned_at_bottom(finals, 1)] == [1.0]


def test_reversal_before_eos_keeps_the_final_eos_and_padding_in_place():
    src = torch.tensor([[4, 5, 6, EOS, PAD], [7, 8, EOS, PAD, PAD], [9, 10, 11, 12, 4], [5, 6, PAD, PAD, PAD]])
    reversed_src = src.gather(1, reverse_before_eos_index(src, src != PAD))
    assert reversed_src.tolist() == [[6, 5, 4, EOS, PAD], [8, 7, EOS, PAD, PAD], [4, 12, 11, 10, 9],
                                     [6, 5, PAD, PAD, PAD]]  # no final EOS: everything reversed


def test_reversal_of_all_tokens_reverses_real_tokens_and_keeps_padding():
    _, src_mask = encode_sources([[4, 5], [6, 7, 8, 9]])  # lengths 3 and 5
    assert reverse_all_tokens_index(src_mask).tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0]]
