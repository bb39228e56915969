"""Safetensors files read by their header alone, then tensor by tensor straight into the target dtype and device.

The format (github.com/huggingface/safetensors): 8 bytes little-endian header length N, N bytes of JSON
`{key: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, then the data. `inspect` needs
only the header; loading reads each tensor's bytes with one `readinto` into its own buffer (no mmap: mapped file
pages would count in the process's memory next to the loaded copy), then casts and moves it, so a load never
holds much more than the model itself.

A checkpoint whose keys all carry a wrapper prefix (`transformer.`, `model.`, `module.`, `diffusion_model.`) is
read without it; a `key_map(key) -> key | None` hook renames (or, with None, drops) keys of other layouts.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import torch

from renderer.base import RendererError

WRAPPER_PREFIXES = ("transformer.", "model.", "module.", "diffusion_model.")
MAX_HEADER_BYTES = 100 * 2**20
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}

KeyMap = Callable[[str], "str | None"]


class WeightsError(RendererError):
    """A weights directory or checkpoint that does not fit the model."""


@dataclass(frozen=True)
class TensorInfo:
    path: Path
    stored_key: str        # the key as written in the file
    dtype: str             # safetensors name: BF16, F32, ...
    shape: tuple[int, ...]
    begin: int             # absolute byte offsets in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


def read_header(path: Path) -> dict[str, TensorInfo]:
    """key → TensorInfo from the header only; a clear WeightsError for anything that is not safetensors."""
    if not path.is_file():
        raise WeightsError("file is missing", str(path))
    try:
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > MAX_HEADER_BYTES:
                raise ValueError(f"header length {n} is implausible")
            header = json.loads(f.read(n))
        size = path.stat().st_size
        out = {}
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            info = TensorInfo(path, key, entry["dtype"], tuple(entry["shape"]), 8 + n + begin, 8 + n + end)
            if info.end > size or info.dtype not in DTYPES:
                raise ValueError(f"tensor {key!r} is truncated or of unknown dtype {info.dtype}")
            out[key] = info
        return out
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise WeightsError(f"not a readable safetensors file ({exc})", str(path)) from None


def strip_wrapper_prefix(keys: Iterable[str]) -> str:
    """The prefix every key shares among WRAPPER_PREFIXES (nested ones too: 'module.model.'), or ''."""
    keys = list(keys)
    prefix = ""
    while keys:
        found = next((p for p in WRAPPER_PREFIXES if all(k.startswith(prefix + p) for k in keys)), None)
        if found is None:
            break
        prefix += found
    return prefix


def mapped(infos: dict[str, TensorInfo], key_map: KeyMap | None = None) -> dict[str, TensorInfo]:
    """Model key → TensorInfo: the wrapper prefix stripped, then `key_map` applied (None drops a key)."""
    prefix = strip_wrapper_prefix(infos)
    out: dict[str, TensorInfo] = {}
    for key, info in infos.items():
        stripped = key[len(prefix):]
        name = key_map(stripped) if key_map else stripped
        if name is not None:
            out[name] = info
    return out


def load_tensor(info: TensorInfo, device: torch.device | str = "cpu",
                dtype: torch.dtype | None = None) -> torch.Tensor:
    """One tensor's bytes read into its own buffer, viewed as its dtype and shape, cast and moved."""
    raw = torch.empty(info.nbytes, dtype=torch.uint8)
    with info.path.open("rb") as f:
        f.seek(info.begin)
        if f.readinto(raw.numpy().data) != info.nbytes:
            raise WeightsError(f"tensor {info.stored_key!r} is truncated", str(info.path))
    t = raw.view(DTYPES[info.dtype]).reshape(info.shape) if math.prod(info.shape) else \
        torch.empty(info.shape, dtype=DTYPES[info.dtype])
    return t.to(device=device, dtype=dtype or t.dtype)


def dtype_counts(infos: Iterable[TensorInfo]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for info in infos:
        counts[info.dtype] = counts.get(info.dtype, 0) + 1
    return dict(sorted(counts.items()))
