"""The built-in kart engine: a seeded world, deterministic 60 Hz physics, an autopilot and a one-pass
moderngl G-buffer renderer, exposed as `EngineSource` (a LiveSource)."""

from gbuffer.engine.source import EngineError, EngineSimulation, EngineSource

__all__ = ["EngineError", "EngineSimulation", "EngineSource"]
