"""Argument errors shared by subcommands (sizes are gbuffer.size.Size.parse)."""

from __future__ import annotations

from alaya_errors import UserError


class ArgumentError(UserError):
    """A command-line argument that cannot be used."""


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


def check_reference_options(options: dict, where: str = "--renderer-option") -> None:
    """The reference renderer takes one setting, backend=auto|gl|torch; anything else is a one-line error."""
    from renderer import REFERENCE_BACKENDS

    for key, value in options.items():
        if key != "backend":
            raise ArgumentError(f"the reference renderer takes only backend=..., not {key!r}", where)
        if value not in REFERENCE_BACKENDS:
            raise ArgumentError(f"backend={value} is not one of {', '.join(REFERENCE_BACKENDS)}", where)
