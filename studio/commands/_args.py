"""Argument parsing shared by subcommands (record, render, serve, engine)."""

from __future__ import annotations

import re

from alaya_errors import UserError

MAX_SIDE = 4096
SIZE_MULTIPLE = 8  # renderers work on 8x-downsampled latents


class ArgumentError(UserError):
    """A command-line argument that cannot be used."""


def parse_size(text: str, where: str = "--size") -> tuple[int, int]:
    """'832x448' → (832, 448). Both sides positive multiples of 8, at most 4096."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", str(text))
    if not m:
        raise ArgumentError(f"size {text!r} is not WIDTHxHEIGHT (for example 832x448)", where)
    w, h = int(m.group(1)), int(m.group(2))
    for side in (w, h):
        if side <= 0 or side % SIZE_MULTIPLE or side > MAX_SIDE:
            raise ArgumentError(f"size {text!r}: width and height must be positive multiples of "
                                f"{SIZE_MULTIPLE} up to {MAX_SIDE}", where)
    return w, h


def parse_renderer_options(items: list[str] | None, where: str = "--renderer-option") -> dict:
    """['num_steps=2', 'sampler_update=renoise', 'trim_startup_frames=true'] → {'num_steps': 2, ...}: values are
    read as JSON where they parse (numbers, true/false), else kept as text. The renderer validates them."""
    import json

    options = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ArgumentError(f"{item!r} is not KEY=VALUE (for example num_steps=2)", where)
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options
