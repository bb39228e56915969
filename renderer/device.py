"""The one device choice of the renderer layer: cuda when available, else cpu; 'cuda' without CUDA refused."""

from __future__ import annotations

import torch

from renderer.base import RendererError


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """None → cuda if available else cpu; otherwise the named cpu / cuda[:N] device, checked."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise RendererError(f"unknown device {device!r}; use cpu or cuda[:N]", "device") from None
    if dev.type not in ("cpu", "cuda"):
        raise RendererError(f"unsupported device {device!r}; use cpu or cuda[:N]", "device")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RendererError("CUDA was asked for but is not available here; use device 'cpu'", "device")
    return dev
