"""Layout families: a module rebuilt from a checkpoint's own key/shape table.

A Family's `build(shapes)` returns the module a file describes, or None when the keys are not of its kind. A
family matches only if the rebuilt module's state dict has exactly the file's keys and shapes, so a match is a
proof that the file loads. Used for the G-buffer encoder and for the text sink.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

import torch
from torch import nn

Shapes = dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class Family:
    name: str
    pattern: str                                   # the key pattern, as docs and `inspect` show it
    build: Callable[[Shapes], "nn.Module | None"]


def state_shapes(module: nn.Module) -> Shapes:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def match_family(families: Iterable[Family], shapes: Shapes) -> tuple[Family, nn.Module] | None:
    """The first family whose rebuilt module (on the meta device: no memory) has exactly `shapes`."""
    for family in families:
        try:
            with torch.device("meta"):
                module = family.build(shapes)
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError):   # shapes no module of it has
            module = None
        if module is not None and state_shapes(module) == shapes:
            return family, module
    return None


def key_patterns(keys: Iterable[str], limit: int = 12) -> list[str]:
    """Keys with their indices folded ('blocks.3.attn1.to_q.weight' → 'blocks.N.attn1.to_q.weight')."""
    patterns = sorted({re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.)", "N", k) for k in keys})
    return patterns[:limit] + ([f"... (+{len(patterns) - limit} more)"] if len(patterns) > limit else [])
