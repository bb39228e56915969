"""Preset gallery thumbnails: each preset rendered by the reference renderer from one real engine frame.

Rendering all presets takes seconds on a CPU, so each PNG is rendered once (by `prewarm` at start, or on its
first request) and cached on disk (keyed by preset name, size and the preset data), then served from the file.
"""

from __future__ import annotations

import hashlib
import io
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image

from gbuffer.formats.common import write_atomic
from gbuffer.frame import GBufferFrame
from prompt_presets import Conditioning, get_preset, load_presets, resolve_prompt

if TYPE_CHECKING:
    from renderer.base import Renderer   # the renderer is imported on first use

log = logging.getLogger("alaya.ui.thumbnails")
THUMB_WIDTH, THUMB_HEIGHT = 192, 112
ENGINE_WARMUP_FRAMES = 24     # let the chase camera settle behind the kart before taking the frame


class ThumbnailCache:
    def __init__(self, directory: Path, width: int = THUMB_WIDTH, height: int = THUMB_HEIGHT):
        self.directory = Path(directory)
        self.width, self.height = width, height
        self._frame: GBufferFrame | None = None
        self._renderer: Renderer | None = None
        self._lock = threading.Lock()

    def path(self, name: str) -> Path:
        preset = get_preset(name)                    # unknown name → PresetError (a UserError)
        key = hashlib.sha1(repr((preset.prompt, preset.reference)).encode()).hexdigest()[:10]
        return self.directory / f"{preset.name}-{self.width}x{self.height}-{key}.png"

    def png(self, name: str) -> bytes:
        """The thumbnail of preset `name` as PNG bytes; blocking (renders on a cache miss)."""
        path = self.path(name)
        if not path.is_file():
            with self._lock:
                if not path.is_file():
                    self._render_to(get_preset(name).name, path)
        return path.read_bytes()

    def prewarm(self, names: list[str] | None = None) -> threading.Thread:
        """Render the missing thumbnails of `names` (default: every preset) in a background thread, so the
        first visitor's gallery is ready."""
        def run() -> None:
            for name in names or load_presets():
                try:
                    self.png(name)
                except Exception:             # a broken preset must not stop the others; its request will say why
                    log.exception("thumbnail of preset %s failed", name)
        thread = threading.Thread(target=run, name="thumbnails", daemon=True)
        thread.start()
        return thread

    def _engine_frame(self) -> GBufferFrame:
        if self._frame is None:
            from gbuffer.engine import EngineSource

            with EngineSource(width=self.width, height=self.height, fps=30.0, seed=0, autopilot=True) as source:
                frames = iter(source)
                for _ in range(ENGINE_WARMUP_FRAMES):
                    frame = next(frames)
            self._frame = frame
        return self._frame

    def _render_to(self, name: str, path: Path) -> None:
        from renderer import create_renderer

        frame = self._engine_frame()
        if self._renderer is None:
            self._renderer = create_renderer("reference")
        with self._renderer.open_session(self.width, self.height, 0) as session:   # fresh: no history
            rgb = session.render([frame], [Conditioning((resolve_prompt(name),))]).rgb[0]
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, format="PNG")
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(path, buf.getvalue())           # a concurrent reader never sees half a PNG
