"""Blender scenes as recordings: a .blend's animation rendered through bpy (Blender as a Python module) into
G-buffer frames with the combined pass as paired RGB: a path-traced ground truth for training.

Needs the optional `engines` extra (bpy); only `alaya-studio record --blender` imports this package.

    with BlenderScene("shot.blend", camera="Cam", engine="cycles", samples=16) as scene:
        for frame in scene.render(scene.frame_range((1, 48))):     # GBufferFrames with .rgb
            ...
"""

from gbuffer.blender.scene import BlenderError, BlenderScene

__all__ = ["BlenderError", "BlenderScene"]
