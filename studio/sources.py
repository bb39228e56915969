"""Open a G-buffer source from what a user typed: `demo`, `engine`, or recorded files."""

from __future__ import annotations

from pathlib import Path

from alaya_errors import UserError
from gbuffer.source import Source

ENGINE_INPUTS = ("demo", "engine")


def open_source(inputs: list[str] | str, *, width: int = 416, height: int = 224, fps: float | None = None,
                seed: int = 0) -> Source:
    """`demo` = built-in engine on autopilot, `engine` = built-in engine waiting for a driver (autopilot until
    input arrives), anything else = recorded sequence files/folders (`gbuffer.formats.open_sequence`).
    `width`/`height` only size the engine; recorded sequences keep their own size."""
    if isinstance(inputs, (str, Path)):
        inputs = [str(inputs)]
    if not inputs:
        raise UserError("no input given: name sequence files or 'demo'", "INPUT")
    if len(inputs) == 1 and inputs[0] in ENGINE_INPUTS:
        from gbuffer.engine import EngineSource

        return EngineSource(width=width, height=height, fps=fps or 30.0, seed=seed, autopilot=True)
    if any(i in ENGINE_INPUTS for i in inputs):
        raise UserError(f"'{' '.join(inputs)}': the built-in engine cannot be mixed with files", "INPUT")
    from gbuffer.formats import open_sequence

    return open_sequence(inputs, fps=fps)
