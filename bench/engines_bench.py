"""Real engines as sources: Panda3D's export cost per frame, and Blender's seconds per frame per render engine.

    python -m bench.engines_bench [--panda3d-sizes 416x224 832x448] [--frames 120]
                                  [--blender-engines cycles eevee] [--blender-size 416x224] [--samples 16]
                                  [--blender-frames 4] [--json FILE]

Panda3D (offscreen, EGL): per frame, the Bullet ticks (physics_ms), the one-pass draw of the four targets with
their copy to RAM (draw_and_copy_ms), and their arrangement into the (5, H, W, 3) frame + lit image (to_frame_ms);
medians in ms, plus the CPU ms per frame summed over all threads (llvmpipe draws on every core).
Blender (bpy): a bench scene (floor, cube, metal sphere, monkey, sun, an orbiting camera) recorded by
gbuffer.blender; the first frame apart (EEVEE compiles its shaders then), then the median of the others, in
seconds per frame. Needs the `engines` extra.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import parser, size, write_json


def _ms(samples: list[float]) -> float:
    return round(1000 * statistics.median(samples), 2)


def measure_panda3d(width: int, height: int, frames: int, warmup: int) -> dict:
    from gbuffer.panda3d import Panda3DSource

    with Panda3DSource(width, height, fps=30) as game:
        for _ in range(warmup):
            game.next_frame()
        physics, draw, read, total = [], [], [], []
        cpu0 = time.process_time()
        for _ in range(frames):   # next_frame's three stages, timed one by one
            t0 = time.perf_counter()
            game.advance()
            t1 = time.perf_counter()
            game.gbuffer.draw()
            t2 = time.perf_counter()
            game.gbuffer.read()
            t3 = time.perf_counter()
            physics.append(t1 - t0), draw.append(t2 - t1), read.append(t3 - t2), total.append(t3 - t0)
        cpu_ms = (time.process_time() - cpu0) / frames * 1000
    return {"engine": "panda3d", "size": f"{width}x{height}", "frames": frames, "physics_ms": _ms(physics),
            "draw_and_copy_ms": _ms(draw), "to_frame_ms": _ms(read), "frame_ms": _ms(total),
            "fps_median": round(1 / statistics.median(total), 1), "cpu_ms_per_frame": round(cpu_ms, 1)}


def build_bench_scene(path: Path, width: int, height: int, frames: int) -> None:
    """The bench's .blend: a few primitives with Principled materials, a sun and sky, a camera orbiting them."""
    from gbuffer.blender.bpy_module import import_bpy, quiet

    bpy = import_bpy()
    with quiet():
        bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = width, height, 100
    scene.frame_start, scene.frame_end = 1, frames

    def material(name, base, roughness, metallic):
        m = bpy.data.materials.new(name)
        bsdf = m.node_tree.nodes["Principled BSDF"]
        bsdf.inputs["Base Color"].default_value = (*base, 1.0)
        bsdf.inputs["Roughness"].default_value, bsdf.inputs["Metallic"].default_value = roughness, metallic
        return m

    shapes = [(bpy.ops.mesh.primitive_plane_add, dict(size=40), ("floor", (0.3, 0.35, 0.3), 0.9, 0.0)),
              (bpy.ops.mesh.primitive_cube_add, dict(location=(-2, 0, 1)), ("cube", (0.7, 0.2, 0.1), 0.5, 0.0)),
              (bpy.ops.mesh.primitive_uv_sphere_add, dict(location=(1.5, 1, 1)), ("metal", (0.9, 0.8, 0.5), 0.2, 1.0)),
              (bpy.ops.mesh.primitive_monkey_add, dict(location=(0.5, -2, 1)), ("monkey", (0.2, 0.4, 0.8), 0.4, 0.0))]
    for add, where, look in shapes:
        add(**where)
        bpy.context.object.data.materials.append(material(*look))
    world = bpy.data.worlds.new("sky")
    world.color = (0.4, 0.55, 0.8)
    scene.world = world
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN"))
    sun.rotation_euler = (0.7, 0.2, 0.5)
    scene.collection.objects.link(sun)
    camera = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
    scene.collection.objects.link(camera)
    scene.camera = camera
    target = bpy.data.objects.new("target", None)
    scene.collection.objects.link(target)
    constraint = camera.constraints.new("TRACK_TO")
    constraint.target = target
    for f in range(1, frames + 1):
        angle = 2 * np.pi * f / max(frames, 1) * 0.25
        camera.location = (9 * np.cos(angle), 9 * np.sin(angle), 4)
        camera.keyframe_insert("location", frame=f)
    with quiet():
        bpy.ops.wm.save_as_mainfile(filepath=str(path))


def measure_blender(engine: str, width: int, height: int, frames: int, samples: int) -> dict:
    from gbuffer.blender import BlenderScene

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.blend"
        build_bench_scene(path, width, height, frames)
        with BlenderScene(path, engine=engine, samples=samples) as scene:
            times, t0 = [], time.perf_counter()
            for _ in scene.render(scene.frame_range(None)):
                times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
    rest = times[1:] or times
    return {"engine": f"blender:{engine}", "size": f"{width}x{height}", "samples": samples, "frames": len(times),
            "first_frame_s": round(times[0], 2), "s_per_frame_median": round(statistics.median(rest), 2)}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--panda3d-sizes", nargs="*", default=["416x224", "832x448"])
    ap.add_argument("--frames", type=int, default=120, help="Panda3D frames timed per size")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--blender-engines", nargs="*", default=["cycles", "eevee"])
    ap.add_argument("--blender-size", default="416x224")
    ap.add_argument("--blender-frames", type=int, default=4)
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    rows = []
    for text in args.panda3d_sizes:
        rows.append(measure_panda3d(*size(text), args.frames, args.warmup))
        print(json.dumps(rows[-1]), flush=True)
    w, h = size(args.blender_size)
    for engine in args.blender_engines:
        rows.append(measure_blender(engine, w, h, args.blender_frames, args.samples))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
