"""Checks shared by the model test files (imported like tests/scripts.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def assert_step_matches_forward(model, src: Tensor, src_mask: Tensor, tgt_in: Tensor,
                                atol: float = 1e-5) -> tuple[Tensor | None, dict]:
    """Running `step` once per target position reproduces `forward`'s log-probs and attention (to `atol`).
    Returns forward's attention (None for a model without) and the state after the last step."""
    with torch.no_grad():
        logits, attention = model(src, src_mask, tgt_in, need_attention=True)
        expected = F.log_softmax(logits.float(), dim=-1)
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        for t in range(tgt_in.size(1)):
            log_probs, state, step_attention = model.step(tgt_in[:, t], state, memory)
            assert log_probs.dtype == torch.float32
            torch.testing.assert_close(log_probs, expected[:, t], rtol=0, atol=atol)
            if attention is None:
                assert step_attention is None
            else:
                torch.testing.assert_close(step_attention.float(), attention[:, t].float(), rtol=0, atol=atol)
    return attention, state
