"""The AOVs that carry each material's base colour, roughness and metallic out of the render.

Blender has passes for depth, normals and the lit image, but none for the Principled BSDF's roughness and
metallic; its diffuse-colour pass is the base colour already scaled by what the specular layer takes (0.96 of it
for a dielectric, 0 for a metal), not the base colour. So each material gets three AOV outputs fed from whatever
feeds those inputs of its Principled BSDF (a texture, a node chain, or the input's own value).
"""

from __future__ import annotations

from gbuffer.blender.bpy_module import BlenderError

# AOV name → (Principled BSDF input, AOV type, AOV node input)
AOVS = {"alaya_albedo": ("Base Color", "COLOR", "Color"),
        "alaya_roughness": ("Roughness", "VALUE", "Value"),
        "alaya_metallic": ("Metallic", "VALUE", "Value")}
RENDERABLE = {"MESH", "CURVE", "CURVES", "SURFACE", "META", "FONT"}


def principled_bsdf(material):
    """The Principled BSDF that feeds the material's active output's Surface, or a one-line BlenderError."""
    where = f"material {material.name!r}"
    tree = material.node_tree
    if tree is None:
        raise BlenderError("has no shader nodes; roughness and metallic cannot be read from it", where)
    outputs = [n for n in tree.nodes if n.bl_idname == "ShaderNodeOutputMaterial"]
    output = next((n for n in outputs if n.is_active_output), outputs[0] if outputs else None)
    if output is None or not output.inputs["Surface"].is_linked:
        raise BlenderError("has no Material Output with a surface; roughness and metallic cannot be read from it",
                        where)
    shader = output.inputs["Surface"].links[0].from_node
    if shader.bl_idname != "ShaderNodeBsdfPrincipled":
        raise BlenderError(f"its surface is a {shader.bl_label or shader.bl_idname} node, not a Principled BSDF; "
                        f"roughness and metallic cannot be read from it", where)
    return shader


def rendered_materials(scene) -> list:
    """Every material the render will shade, each once; an object that has none is a one-line BlenderError."""
    materials = {}
    for obj in scene.objects:
        if obj.type not in RENDERABLE or obj.hide_render:
            continue
        slots = [slot.material for slot in obj.material_slots if slot.material is not None]
        if not slots:
            raise BlenderError("has no material; give it a Principled BSDF material", f"object {obj.name!r}")
        for material in slots:
            materials[material.name] = material
    return list(materials.values())


def add_aovs(scene, view_layer) -> None:
    """Declare the AOVs on the view layer and feed them in every rendered material (the file is not saved)."""
    materials = [(m, principled_bsdf(m)) for m in rendered_materials(scene)]   # all checked before any change
    for name, (_, kind, _) in AOVS.items():
        aov = view_layer.aovs.get(name) or view_layer.aovs.add()
        aov.name, aov.type = name, kind
    for material, bsdf in materials:
        tree = material.node_tree
        for name, (socket, _, aov_input) in AOVS.items():
            node = tree.nodes.new("ShaderNodeOutputAOV")
            node.aov_name = name
            source = bsdf.inputs[socket]
            if source.is_linked:
                tree.links.new(source.links[0].from_socket, node.inputs[aov_input])
            else:
                node.inputs[aov_input].default_value = source.default_value
