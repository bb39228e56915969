"""Renderers: the protocol, the reference style shader (CPU default) and the flash model (GPU)."""

from __future__ import annotations

from gbuffer.size import Size, SizeError
from renderer.base import Renderer, RendererError, RenderResult, RenderSession

RENDERERS = ("reference", "flash")
REFERENCE_BACKENDS = ("auto", "gl", "torch")   # the reference renderer's `backend` option (renderer/reference)
# Each renderer's one size rule: a multiple for both sides, and why. Known without importing the backend, so
# an offer is checked before a model loads.
SIZE_RULES = {"reference": (1, "any size"),
              "flash": (16, "the codecs downsample 8x and the transformer takes 2x2 patches")}


def check_size(renderer: str, width: int, height: int, where: str = "size") -> Size:
    """Size(width, height) if `renderer` can render it; else a RendererError naming the rule."""
    multiple, why = SIZE_RULES[renderer]
    try:
        return Size(width, height).require_multiple(multiple, f"the {renderer} renderer: {why}", where)
    except SizeError as exc:
        raise RendererError(exc.detail, exc.where) from None


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


__all__ = ["REFERENCE_BACKENDS", "RENDERERS", "SIZE_RULES", "Renderer", "RendererError", "RenderResult", "RenderSession", "check_size",
           "create_renderer"]
