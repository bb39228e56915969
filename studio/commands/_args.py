"""Argument errors shared by subcommands (sizes are gbuffer.size.Size.parse)."""

from __future__ import annotations

from alaya_errors import UserError


class ArgumentError(UserError):
    """A command-line argument that cannot be used."""
