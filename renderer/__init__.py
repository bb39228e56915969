"""Renderers: the protocol (base.py), and the table of backends: the reference style shader (CPU default) and
the flash model (GPU). A backend is imported when it is first built, never by naming it."""

from __future__ import annotations

from typing import cast

from renderer.base import (BatchFn, Renderer, RendererError, RenderResult, RendererSpec, RenderSession, SizeRule,
                           check_size, register, renderer_names, renderer_spec)
from renderer.flash.config import PATCH_MULTIPLE, TEMPORAL_SCALE   # light: the flash model's shapes, no model stack


def _reference() -> type[Renderer]:
    from renderer.reference import ReferenceRenderer

    return ReferenceRenderer


def _flash() -> type[Renderer]:
    from renderer.flash import FlashRenderer

    return FlashRenderer


def _flash_settings() -> type:
    from renderer.flash.settings import FlashSettings

    return FlashSettings


def _flash_batch() -> BatchFn:
    from renderer.flash.batch import render_batch

    # it takes FlashSessions only: the batcher hands it the sessions of the flash renderer it wraps, no others
    return cast(BatchFn, render_batch)


# Live (serve): free text with no text encoder loaded renders as its nearest cached presets; a chunk of one latent
# frame (a viewer waits for 4 G-buffer frames, not the config's chunk); one torch thread beside the encoder and
# the event loop (docs/flash.md, "Serving it live").
FLASH_LIVE = {"unknown_prompt": "presets", "chunk_size": TEMPORAL_SCALE, "threads": 1}
# Reference frames are independent per-pixel math: no batched pass (its sessions render one after another).
REFERENCE = register(RendererSpec("reference", SizeRule(), _reference,
                                  options={"backend": ("auto", "gl", "torch")}))
FLASH = register(RendererSpec("flash", SizeRule(PATCH_MULTIPLE, "the codecs downsample 8x and the transformer takes "
                                                                 "2x2 patches"), _flash, batch=_flash_batch,
                              settings=_flash_settings, live_options=FLASH_LIVE))

RENDERERS = renderer_names()
REFERENCE_BACKENDS = REFERENCE.options["backend"]    # the reference renderer's `backend` option


def create_renderer(name: str = "reference", **options) -> Renderer:
    """Build a renderer by name. Options are backend-specific (device, weights=DIR, ...)."""
    return renderer_spec(name).load()(**options)


__all__ = ["FLASH", "REFERENCE", "REFERENCE_BACKENDS", "RENDERERS", "Renderer", "RendererError", "RendererSpec",
           "RenderResult", "RenderSession", "SizeRule", "check_size", "create_renderer", "renderer_spec"]
