"""The REST routes the studio page needs beyond the live server's own, under /api/ui: one module per concern, each
with its own router, all included here into the one `router` that `mount_ui` adds to the app (prefix, tag and the
documented errors are set once, here).

- presets:   the preset gallery with its thumbnails, and what a prompt box's text means
- sources:   the source picker (engine, recorded sequences, uploads, feeds, takes)
- takes:     a finished take's schedule, removing a take
- uploads:   uploading a sequence file, removing one
- schedules: the page's configuration, built-in schedules, schedule import and validation
- inspector: a live session's newest frame, its G-buffer channels and metadata
- renders:   render-to-MP4 jobs

What a route needs from the live server comes from studio.server.deps, the UI's own state from `deps.UIDep`.
"""

from __future__ import annotations

from fastapi import APIRouter

from studio.ui.routes import inspector, presets, renders, schedules, sources, takes, uploads
from studio.ui.routes.deps import ERRORS

CONCERNS = (presets, sources, takes, uploads, schedules, inspector, renders)
router = APIRouter(prefix="/api/ui", tags=["studio ui"], responses=ERRORS)
for concern in CONCERNS:
    router.include_router(concern.router)
