"""Reading a checkpoint file: below the models, so that what needs only a checkpoint's contents (prepare takes its
vocabulary) does not import them; `nmtkit.checkpoint.payload` writes checkpoints and rebuilds their models."""

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
    if problem := layout_problem(payload):
        raise NmtkitError(f"checkpoint {path} is damaged ({problem}); {remedy}")
    return payload


def layout_problem(payload: dict) -> str | None:
    """What is missing or of the wrong type in a checkpoint's payload (its config, subword models, weights); None
    when they are all there, so that a reader may index them."""
    subword, weights = payload.get("subword"), payload.get("model")
    if not isinstance(payload.get("config"), dict):
        return "no config"
    if not (isinstance(subword, dict) and isinstance(subword.get("joint"), bool)
            and all(isinstance(subword.get(side), bytes) for side in ("src", "tgt"))):
        return "no subword models"
    if not (isinstance(weights, dict) and all(isinstance(value, torch.Tensor) for value in weights.values())):
        return "no weights"
    return None
