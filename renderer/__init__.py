"""Renderers: the protocol, the reference style shader (CPU default) and the flash model (GPU)."""

from __future__ import annotations

from renderer.base import Renderer, RendererError, RenderResult, RenderSession

RENDERERS = ("reference", "flash")


def create_renderer(name: str = "reference", **options) -> Renderer:
    """Build a renderer by name. Options are backend-specific (device, weights=DIR, ...).

    Imports are lazy so that the reference renderer never pulls in the model stack.
    """
    if name == "reference":
        from renderer.reference import ReferenceRenderer

        return ReferenceRenderer(**options)
    if name == "flash":
        from renderer.flash import FlashRenderer

        return FlashRenderer(**options)
    raise RendererError(f"unknown renderer {name!r}; choose one of {', '.join(RENDERERS)}", "--renderer")


__all__ = ["RENDERERS", "Renderer", "RendererError", "RenderResult", "RenderSession", "create_renderer"]
