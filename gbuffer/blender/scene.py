"""BlenderScene: one .blend opened in bpy, checked, set up for the G-buffer passes, and rendered frame by frame.

Everything is checked before the first frame renders (camera, frame range, every material), each problem a
one-line BlenderError. The scene is changed in memory only (passes, AOVs, output format); the file is not saved.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from gbuffer.blender.bpy_module import BlenderError, import_bpy, quiet
from gbuffer.blender.materials import add_aovs
from gbuffer.blender.passes import read_layers, to_frame
from gbuffer.frame import GBufferFrame

ENGINES = {"cycles": "CYCLES", "eevee": "BLENDER_EEVEE"}


def parse_frame_range(text: str, where: str = "--frames") -> tuple[int, int]:
    """'A:B' → (A, B), both included as in Blender's own frame range."""
    first, sep, last = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(first), int(last)
    except ValueError:
        raise BlenderError(f"{text!r} is not a frame range A:B (both included, as in Blender)", where) from None


class BlenderScene:
    """A .blend ready to render: `render(first, last)` yields GBufferFrames (index 0 at `first`) with `.rgb`."""

    def __init__(self, path: str | Path, *, camera: str | None = None, engine: str = "cycles",
                 samples: int | None = None):
        self.path = Path(path)
        where = str(self.path)
        if not self.path.is_file():
            raise BlenderError("file not found", where)
        if engine not in ENGINES:
            raise BlenderError(f"unknown engine {engine!r}; available: {', '.join(ENGINES)}", "--engine")
        if samples is not None and samples < 1:
            raise BlenderError(f"must be at least 1, got {samples}", "--samples")
        self.bpy = bpy = import_bpy()
        try:
            with quiet():
                bpy.ops.wm.open_mainfile(filepath=str(self.path.resolve()), load_ui=False)
        except RuntimeError as exc:
            reason = " ".join(str(exc).replace("Error:", "").split())
            raise BlenderError(f"Blender cannot open it: {reason}", where) from None
        self.scene = scene = bpy.context.scene
        self.camera = self._camera(camera)
        self.view_layer = scene.view_layers[0]
        add_aovs(scene, self.view_layer)
        self._configure(ENGINES[engine], samples)
        render = scene.render
        scale = render.resolution_percentage / 100
        self.width, self.height = round(render.resolution_x * scale), round(render.resolution_y * scale)
        self.fps = render.fps / render.fps_base
        self.engine = engine
        self._dir = tempfile.TemporaryDirectory(prefix="alaya-blender-")

    def _camera(self, name: str | None):
        scene = self.scene
        if name is not None:
            obj = self.bpy.data.objects.get(name)
            if obj is None or obj.type != "CAMERA":
                cameras = sorted(o.name for o in scene.objects if o.type == "CAMERA")
                raise BlenderError(f"no camera named {name!r} in the scene; cameras: {', '.join(cameras) or 'none'}",
                                   "--camera")
            scene.camera = obj
        if scene.camera is None:
            raise BlenderError("the scene has no camera; add one (or name one with --camera)", str(self.path))
        return scene.camera

    def _configure(self, engine_id: str, samples: int | None) -> None:
        scene, layer = self.scene, self.view_layer
        scene.render.engine = engine_id
        if engine_id == "CYCLES":
            scene.cycles.device = "CPU"
            scene.cycles.use_denoising = False      # the combined pass as traced: no learned filter in the truth
            if samples is not None:
                scene.cycles.samples = samples
        elif samples is not None:
            scene.eevee.taa_render_samples = samples
        layer.use = True
        layer.use_pass_combined = layer.use_pass_z = layer.use_pass_normal = True
        scene.render.use_single_layer = True
        settings = scene.render.image_settings
        settings.media_type = "MULTI_LAYER_IMAGE"
        settings.file_format = "OPEN_EXR_MULTILAYER"
        settings.color_depth = "32"
        settings.exr_codec = "NONE"

    def frame_range(self, frames: tuple[int, int] | None) -> range:
        """The frames to render, checked: the scene's own range when `frames` is None."""
        first, last = frames if frames is not None else (self.scene.frame_start, self.scene.frame_end)
        if last < first:
            raise BlenderError(f"the frame range {first}:{last} is empty", "--frames")
        return range(first, last + 1)

    def render(self, frames: range) -> Iterator[GBufferFrame]:
        bpy, scene = self.bpy, self.scene
        path = Path(self._dir.name) / "frame.exr"
        for k, number in enumerate(frames):
            scene.frame_set(number)
            scene.render.filepath = str(path)
            with quiet():
                bpy.ops.render.render(write_still=True)
            rotation = np.array(self.camera.matrix_world.to_3x3().normalized(), np.float32)
            yield to_frame(read_layers(path, self.view_layer.name), rotation, k, k / self.fps,
                           {"blender_frame": number, "engine": self.engine})

    def close(self) -> None:
        self._dir.cleanup()

    def __enter__(self) -> "BlenderScene":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
