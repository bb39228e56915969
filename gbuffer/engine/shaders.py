"""GLSL for the one-pass G-buffer: five colour targets in the official channel order, 8-bit encodings done in
the fragment shader with exactly the rules of gbuffer/encoding.py (constants are filled in from there)."""

from __future__ import annotations

import math

from gbuffer.encoding import DEPTH_FAR_M, DEPTH_NEAR_M
from gbuffer.engine import beauty as beauty_glsl
from gbuffer.engine import meshes

VERTEX = """
#version 330
uniform mat4 model;
uniform mat4 view;
uniform mat4 proj;
in vec3 in_pos;
in vec3 in_normal;
in vec3 in_color;
in vec2 in_uv;
in vec3 in_mat;            // metallic, roughness, pattern id
out vec3 v_normal;         // view space
out vec3 v_color;
out vec2 v_uv;
out float v_distance;      // metres along the camera axis
out vec3 v_world;          // world space (the beauty pass lights there; unused varyings are compiled out)
out vec3 v_world_normal;
flat out vec3 v_mat;
void main() {
    vec4 world = model * vec4(in_pos, 1.0);
    vec4 eye = view * world;
    v_world = world.xyz;
    v_world_normal = mat3(model) * in_normal;
    gl_Position = proj * eye;
    v_distance = -eye.z;
    v_normal = mat3(view) * mat3(model) * in_normal;
    v_color = in_color;
    v_uv = in_uv;
    v_mat = in_mat;
}
"""

FRAGMENT = """
#version 330
const float NEAR = %(near)r;
const float LOG_RANGE = %(log_range)r;
in vec3 v_normal;
in vec3 v_color;
in vec2 v_uv;
in float v_distance;
flat in vec3 v_mat;
layout(location = 0) out vec3 o_albedo;
layout(location = 1) out vec3 o_depth;
layout(location = 2) out vec3 o_metallic;
layout(location = 3) out vec3 o_normal;
layout(location = 4) out vec3 o_roughness;
%(beauty_declarations)s
// Sine-free hash (cheap on llvmpipe): Dave Hoskins' hash12.
float hash(vec2 p) {
    vec3 p3 = fract(vec3(p.xyx) * 0.1031);
    p3 += dot(p3, p3.yzx + 33.33);
    return fract((p3.x + p3.y) * p3.z);
}
float noise(vec2 p) {
    vec2 i = floor(p);
    vec2 f = fract(p);
    f = f * f * (3.0 - 2.0 * f);
    return mix(mix(hash(i), hash(i + vec2(1.0, 0.0)), f.x),
               mix(hash(i + vec2(0.0, 1.0)), hash(i + vec2(1.0, 1.0)), f.x), f.y);
}

void main() {
    vec3 albedo = v_color;
    float metallic = v_mat.x;
    float roughness = v_mat.y;
    int pattern = int(v_mat.z + 0.5);
    vec2 uv = v_uv;
    if (pattern == %(GRASS)d) {
        float n = 0.6 * noise(uv * 0.15) + 0.4 * noise(uv * 1.3);
        albedo *= 0.7 + 0.6 * n;
        roughness = 0.8 + 0.15 * n;
    } else if (pattern == %(ROAD)d) {
        albedo *= 0.85 + 0.3 * hash(floor(uv * vec2(60.0, 12.0)));
        bool dash = abs(uv.x) < 0.03 && fract(uv.y / 8.0) < 0.5;
        bool edge = abs(uv.x) > 0.9 && abs(uv.x) < 0.95;
        if (dash || edge) { albedo = vec3(0.9); roughness = 0.5; }
        if (uv.y < 3.0) {  // chequered start line
            float c = mod(floor(uv.x * 6.0) + floor(uv.y * 2.0), 2.0);
            albedo = vec3(0.05 + 0.85 * c);
            roughness = 0.5;
        }
    } else if (pattern == %(KERB)d) {
        if (mod(floor(uv.y / 2.0), 2.0) > 0.5) albedo = vec3(0.92);
    } else if (pattern == %(WINDOWS)d) {
        vec2 cell = uv / vec2(3.0, 3.2);
        vec2 f = fract(cell);
        albedo *= 0.9 + 0.15 * noise(uv * 2.0);
        if (uv.y > 0.6) {
            bool frame = f.x > 0.18 && f.x < 0.82 && f.y > 0.22 && f.y < 0.82;
            bool glass = f.x > 0.24 && f.x < 0.76 && f.y > 0.28 && f.y < 0.76;
            if (glass) {
                albedo = vec3(0.08, 0.12, 0.18) + 0.1 * hash(floor(cell));
                metallic = 0.0;
                roughness = 0.05;
            } else if (frame) {
                albedo = vec3(0.72, 0.73, 0.76);
                metallic = 1.0;
                roughness = 0.3;
            }
        }
    } else if (pattern == %(BARK)d) {
        albedo *= 0.7 + 0.5 * noise(vec2(uv.x * 9.0, uv.y * 1.2));
    } else if (pattern == %(LEAVES)d || pattern == %(ROCK)d) {
        float n = noise(uv * 1.7);
        albedo *= 0.7 + 0.6 * n;
        roughness = clamp(roughness + 0.15 * (n - 0.5), 0.0, 1.0);
    } else if (pattern == %(WATER)d) {
        albedo *= 0.8 + 0.4 * noise(uv * 0.8);
    } else if (pattern == %(LAVA)d) {
        float n = 0.6 * noise(uv * 0.4) + 0.4 * noise(uv * 2.0);
        if (n < 0.45) { albedo = vec3(0.12, 0.08, 0.07); roughness = 0.9; }
        else { albedo = mix(vec3(0.9, 0.2, 0.02), vec3(1.0, 0.8, 0.2), (n - 0.45) * 2.0); roughness = 0.4; }
    }
    float depth = clamp(1.0 - log(max(v_distance, NEAR) / NEAR) / LOG_RANGE, 0.0, 1.0);
    o_albedo = albedo;
    o_depth = vec3(depth);
    o_metallic = vec3(metallic);
    o_normal = normalize(v_normal) * 0.5 + 0.5;
    o_roughness = vec3(roughness);
%(beauty_main)s
}
"""

# A triangle covering the screen at the far plane (depth 1), writing the sky's value to each target.
SKY_VERTEX = """
#version 330
void main() {
    vec2 corner = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
    gl_Position = vec4(corner, 1.0, 1.0);
}
"""

SKY_FRAGMENT = """
#version 330
uniform vec3 sky_0;
uniform vec3 sky_1;
uniform vec3 sky_2;
uniform vec3 sky_3;
uniform vec3 sky_4;
layout(location = 0) out vec3 o_albedo;
layout(location = 1) out vec3 o_depth;
layout(location = 2) out vec3 o_metallic;
layout(location = 3) out vec3 o_normal;
layout(location = 4) out vec3 o_roughness;
%(beauty_declarations)s
void main() {
    o_albedo = sky_0;
    o_depth = sky_1;
    o_metallic = sky_2;
    o_normal = sky_3;
    o_roughness = sky_4;
%(beauty_main)s
}
"""


def fragment_source(beauty: bool = False) -> str:
    """The object shader; with `beauty`, it also writes the lit image to a sixth target (gbuffer.engine.beauty)."""
    names = {name: getattr(meshes, name) for name in
             ("GRASS", "ROAD", "KERB", "WINDOWS", "BARK", "LEAVES", "ROCK", "WATER", "LAVA")}
    spliced = {"beauty_declarations": beauty_glsl.OBJECT_DECLARATIONS if beauty else "",
               "beauty_main": beauty_glsl.OBJECT_MAIN % names if beauty else ""}
    return FRAGMENT % dict(names, **spliced, near=float(DEPTH_NEAR_M),
                           log_range=math.log(DEPTH_FAR_M / DEPTH_NEAR_M))


def sky_fragment_source(beauty: bool = False) -> str:
    return SKY_FRAGMENT % {"beauty_declarations": beauty_glsl.SKY_DECLARATIONS if beauty else "",
                           "beauty_main": beauty_glsl.SKY_MAIN if beauty else ""}
