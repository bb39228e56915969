"""`alaya-studio record --blender`: a .blend built here with known materials records, through Cycles on the CPU,
into a paired .gbuf.zip whose channels read back within two levels of gbuffer/encoding.py's values."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("bpy")

from gbuffer.encoding import encode_depth, encode_normal, encode_unit  # noqa: E402
from gbuffer.formats import GbufZipSource  # noqa: E402
from gbuffer.frame import CHANNEL_INDEX  # noqa: E402

W, H = 64, 48
WALL = dict(base=(0.5, 0.2, 0.1), roughness=0.3, metallic=0.6)
FLOOR = dict(base=(0.1, 0.4, 0.2), roughness=0.8, metallic=0.0)
WALL_DISTANCE_M = 6.0


def srgb(linear) -> np.ndarray:
    x = np.asarray(linear, np.float64)
    return np.round(255 * np.where(x <= 0.0031308, 12.92 * x, 1.055 * x ** (1 / 2.4) - 0.055))


BUILD = f'''
import math, sys, bpy
bpy.ops.wm.read_factory_settings(use_empty=True)
scene = bpy.context.scene
scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = {W}, {H}, 100
scene.frame_start, scene.frame_end, scene.render.fps = 1, 3, 24
kind = sys.argv[-1]

def material(name, base, roughness, metallic):
    m = bpy.data.materials.new(name)
    tree = m.node_tree
    bsdf = tree.nodes["Principled BSDF"]
    if kind != "linked":
        bsdf.inputs["Base Color"].default_value = (*base, 1.0)
        bsdf.inputs["Roughness"].default_value = roughness
        bsdf.inputs["Metallic"].default_value = metallic
        return m
    # the same values fed through nodes, as a texture would feed them
    colour = tree.nodes.new("ShaderNodeRGB")
    colour.outputs[0].default_value = (*base, 1.0)
    tree.links.new(colour.outputs[0], bsdf.inputs["Base Color"])
    for socket, value in (("Roughness", roughness), ("Metallic", metallic)):
        node = tree.nodes.new("ShaderNodeValue")
        node.outputs[0].default_value = value
        tree.links.new(node.outputs[0], bsdf.inputs[socket])
    return m

# camera at the origin looking along +y (turned 90 degrees about x): the wall ahead faces it, the floor below
camera = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
camera.rotation_euler = (math.pi / 2, 0.0, 0.0)
scene.collection.objects.link(camera)
if kind != "no-camera":
    scene.camera = camera
bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0.0, {WALL_DISTANCE_M}, 0.0), rotation=(math.pi / 2, 0, 0))
bpy.context.object.data.materials.append(material("wall", {WALL["base"]}, {WALL["roughness"]}, {WALL["metallic"]}))
bpy.ops.mesh.primitive_plane_add(size=200.0, location=(0.0, 0.0, -1.5))
floor = material("floor", {FLOOR["base"]}, {FLOOR["roughness"]}, {FLOOR["metallic"]})
if kind == "emission":
    tree = floor.node_tree
    tree.nodes.remove(tree.nodes["Principled BSDF"])
    glow = tree.nodes.new("ShaderNodeEmission")
    tree.links.new(glow.outputs["Emission"], tree.nodes["Material Output"].inputs["Surface"])
bpy.context.object.data.materials.append(floor)
sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN"))
sun.rotation_euler = (0.6, 0.2, 0.0)
scene.collection.objects.link(sun)
bpy.ops.wm.save_as_mainfile(filepath=sys.argv[-2])
'''


def build_blend(path, kind="good"):
    """A .blend saved by bpy in a child process (the test process stays free of Blender's global state)."""
    out = subprocess.run([sys.executable, "-c", BUILD, str(path), kind], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and path.is_file(), out.stderr[-2000:]
    return path


def record(*args: str):
    return subprocess.run([sys.executable, "-m", "studio.cli", "record", *args], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module", params=["good", "linked"])
def recording(request, tmp_path_factory):
    """Materials with their values set on the Principled BSDF, or fed into it through nodes."""
    tmp = tmp_path_factory.mktemp("blender")
    blend = build_blend(tmp / "known.blend", request.param)
    out = tmp / "known.gbuf.zip"
    run = record("--blender", str(blend), "--frames", "1:2", "--samples", "4", "-o", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    return out


def test_a_known_scene_records_every_channel_within_two_levels(recording):
    with GbufZipSource(recording) as source:
        assert (len(source), source.width, source.height, source.fps) == (2, W, H, 24.0)
        assert source.manifest.rgb is not None and source.metadata["engine"] == "blender:cycles"
        frame = source[0]
    assert frame.meta["blender_frame"] == 1

    def channel(name, rows, cols=slice(W // 2 - 3, W // 2 + 3)):
        return frame.data[CHANNEL_INDEX[name]][rows, cols].astype(int)

    centre = slice(H // 2 - 3, H // 2 + 3)
    wall = {"albedo": srgb(WALL["base"]), "depth": encode_depth(np.float32(WALL_DISTANCE_M)),
            "metallic": encode_unit(WALL["metallic"]), "roughness": encode_unit(WALL["roughness"]),
            "normal": encode_normal(np.array([0.0, 0.0, 1.0]))}
    bottom = slice(H - 3, H)                            # the floor below the wall: view-space up
    floor = {"albedo": srgb(FLOOR["base"]), "metallic": encode_unit(FLOOR["metallic"]),
             "roughness": encode_unit(FLOOR["roughness"]), "normal": encode_normal(np.array([0.0, 1.0, 0.0]))}
    for rows, expected in ((centre, wall), (bottom, floor)):
        for name, value in expected.items():
            got = channel(name, rows)
            assert np.abs(got - value).max() <= 2, (name, got[0, 0], value)
    top = slice(0, 2)                                   # no geometry above the horizon: the engine's sky values
    assert (channel("depth", top) == 0).all() and (channel("roughness", top) == 255).all()
    assert frame.rgb is not None and frame.rgb[centre].mean() > 10     # the sun lights the wall


@pytest.mark.parametrize("kind, args, match", [
    ("no-camera", (), "the scene has no camera"),
    ("good", ("--frames", "5:2"), "--frames: the frame range 5:2 is empty"),
    ("emission", (), "material 'floor': its surface is a Emission node, not a Principled BSDF"),
    ("good", ("--camera", "Nope"), "--camera: no camera named 'Nope' in the scene; cameras: Cam"),
    ("good", ("--engine", "lux"), "--engine: unknown Blender engine 'lux'"),
    ("good", ("--size", "32x24"), "--size: is the scene's own with --blender"),
])
def test_scenes_that_cannot_be_recorded_get_one_line_and_exit_2(tmp_path, kind, args, match):
    blend = build_blend(tmp_path / f"{kind}.blend", kind)
    out = record("--blender", str(blend), *args, "-o", str(tmp_path / "out.gbuf.zip"))
    assert out.returncode == 2, out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], out.stderr[-2000:]
    assert not (tmp_path / "out.gbuf.zip").exists()


def test_a_file_that_is_not_a_blend_gets_one_line(tmp_path):
    fake = tmp_path / "fake.blend"
    fake.write_text("not a blend file")
    out = record("--blender", str(fake), "-o", str(tmp_path / "out.gbuf.zip"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert "Blender cannot open it" in out.stderr
