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


def check_renderer_options(renderer: str, options: dict, where: str = "--renderer-option") -> None:
    """`options` as the renderer's RendererSpec declares them (renderer/base.py): each closed-set option takes one
    of its values, and a backend with a settings model validates the rest; one without takes nothing else."""
    from alaya_errors import validate
    from renderer import renderer_spec

    spec = renderer_spec(renderer)
    for key, value in options.items():
        allowed = spec.options.get(key)
        if allowed is None and spec.settings is None:
            takes = ", ".join(f"{name}=..." for name in spec.options) or "no options"
            raise ArgumentError(f"the {renderer} renderer takes only {takes}, not {key!r}", where)
        if allowed is not None and value not in allowed:
            raise ArgumentError(f"{key}={value} is not one of {', '.join(allowed)}", where)
    if spec.settings is not None:
        validate(spec.settings(), options, ArgumentError, where)    # a bad option fails here, not at load
