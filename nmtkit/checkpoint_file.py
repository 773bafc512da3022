"""Reading a checkpoint file: below the models, so that what needs only a checkpoint's contents (prepare takes its
vocabulary) does not import them; `nmtkit.checkpoint` writes checkpoints and rebuilds their models."""

from __future__ import annotations

from pathlib import Path

import torch

from nmtkit.errors import NmtkitError

FORMAT = 1


def load_checkpoint(path: str | Path,
                    remedy: str = "use another checkpoint, e.g. last.pt or model.pt of the run") -> dict:
    """Read a checkpoint; a missing, truncated or foreign file is a one-line NmtkitError (ending in `remedy` when
    the file is damaged)."""
    path = Path(path)
    if not path.is_file():
        raise NmtkitError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch.load fails in many ways on foreign or damaged files
        raise NmtkitError(f"checkpoint {path} is corrupted or truncated ({type(error).__name__}); {remedy}") from error
    if not isinstance(payload, dict) or "format" not in payload:
        raise NmtkitError(f"{path} is not an nmtkit checkpoint")
    if payload["format"] != FORMAT:
        raise NmtkitError(f"checkpoint {path} has format {payload['format']}, this nmtkit reads format {FORMAT}; "
                          f"it was written by nmtkit {payload.get('nmtkit_version', '?')}")
    return payload
