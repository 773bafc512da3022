"""A Hugging Face checkpoint's weights, read as data only: safetensors files by their published layout (an 8-byte
little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes), with
no package of its own and nothing executed; PyTorch `.bin` files through `torch.load(weights_only=True)`, which
refuses pickled objects other than tensors. Sharded checkpoints (`*.index.json`) are read shard by shard.

Every refusal is a one-line `NmtkitError` naming the file: a header longer than MAX_HEADER_BYTES is refused before
it is read, and each tensor's byte range is checked against its dtype, its shape and the file's size before any
tensor is built.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import torch

from nmtkit.errors import NmtkitError

MAX_HEADER_BYTES = 100 << 20  # safetensors' own reader refuses headers above 100 MB
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The tensors of the checkpoint in `directory`, by name, from the first of WEIGHT_FILES found there."""
    for name in WEIGHT_FILES:
        path = directory / name
        if path.is_file():
            return read_index(path) if name.endswith(".index.json") else read_file(path)
    raise NmtkitError(f"{directory} has no weights: none of {', '.join(WEIGHT_FILES)}")


def read_file(path: Path) -> dict[str, torch.Tensor]:
    return read_safetensors(path) if path.suffix == ".safetensors" else read_pickled_weights(path)


def read_index(path: Path) -> dict[str, torch.Tensor]:
    """A sharded checkpoint: the index's weight_map names each tensor's shard, a file beside the index."""
    try:
        weight_map = json.loads(path.read_text(encoding="utf-8"))["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise NmtkitError(f"{path} is not a weight index (a JSON object with a weight_map)") from error
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        shard_path = path.parent / str(shard)
        if Path(str(shard)).name != str(shard) or not shard_path.is_file():
            raise NmtkitError(f"{path} names shard {shard!r}, which is not a file beside it")
        tensors.update(read_file(shard_path))
    if missing := sorted(set(weight_map) - set(tensors)):
        raise NmtkitError(f"{path} names {missing[0]}, which no shard holds")
    return tensors


def read_pickled_weights(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch.load fails in many ways on foreign, damaged or unsafe files
        reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise NmtkitError(f"{path} is not a file of weights only (torch.load with weights_only: {reason})") from error
    if not (isinstance(state, dict) and all(isinstance(value, torch.Tensor) for value in state.values())):
        raise NmtkitError(f"{path} holds no mapping of names to tensors")
    return state


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    size = path.stat().st_size
    with open(path, "rb") as file:
        header, start = read_header(file, path, size)
        tensors = {}
        for name, entry in header.items():
            dtype, shape, begin, end = checked_entry(name, entry, path, size - start)
            file.seek(start + begin)
            data = file.read(end - begin)
            tensors[name] = (torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape) if data
                             else torch.empty(shape, dtype=dtype))
    return tensors


def read_header(file, path: Path, size: int) -> tuple[dict, int]:
    """The JSON header (without __metadata__) and where the tensor bytes start."""
    if size < 8:
        raise NmtkitError(f"{path} is not a safetensors file (shorter than its 8-byte header length)")
    (length,) = struct.unpack("<Q", file.read(8))
    if length > MAX_HEADER_BYTES or 8 + length > size:
        raise NmtkitError(f"{path} is not a safetensors file (a header of {length} bytes, in a file of {size})")
    try:
        header = json.loads(file.read(length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise NmtkitError(f"{path} is not a safetensors file (its header is not JSON)") from error
    if not isinstance(header, dict):
        raise NmtkitError(f"{path} is not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    return header, 8 + length


def checked_entry(name: str, entry: object, path: Path, data_size: int) -> tuple[torch.dtype, list[int], int, int]:
    """A header entry's dtype, shape and byte range, each checked: the range lies in the file and holds exactly
    the shape's elements."""
    problem = f"{path}: tensor {name[:100]!r} "
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise NmtkitError(problem + f"has no dtype nmtkit reads ({', '.join(DTYPES)})")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(type(dim) is int and dim >= 0 for dim in shape)):
        raise NmtkitError(problem + "has no shape (a list of sizes)")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(at) is int for at in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_size):
        raise NmtkitError(problem + "has a byte range outside the file")
    dtype = DTYPES[entry["dtype"]]
    if math.prod(shape) * dtype.itemsize != offsets[1] - offsets[0]:
        raise NmtkitError(problem + f"has {offsets[1] - offsets[0]} bytes for a shape of {shape}")
    return dtype, shape, offsets[0], offsets[1]
