"""The beauty pass: the engine's own lit RGB image of a frame, drawn in the G-buffer pass as a sixth target.

With it the pass writes the sun's visibility (a seventh target, `frame.sun`): what the shadow map decided per
pixel, so eval can score shadowed and lit pixels apart (training/eval_regions.py).

It holds what the five G-buffer channels alone do not, so a renderer trained on pairs has something real to
learn: sun shadows from a shadow map, a sky with a sun disc, distance fog, and GGX specular from
metallic/roughness (plus image-based ambient and a glow on lava). Lighting is done in linear light (the
8-bit albedo is treated as sRGB) and tone-mapped back to sRGB.

The GLSL here is spliced into shaders.FRAGMENT / SKY_FRAGMENT when a raster is built with `beauty=True`;
a raster without it compiles none of it (the G-buffer-only path costs exactly what it did).
"""

from __future__ import annotations

import math

import numpy as np

from gbuffer.engine.camera import look_at

SUN_DIRECTION = np.array([0.45, 0.72, 0.30]) / np.linalg.norm([0.45, 0.72, 0.30])   # world, towards the sun
SUN_COLOUR = (1.0, 0.93, 0.82)           # linear
SKY_ZENITH = (0.10, 0.26, 0.70)          # linear
SKY_HORIZON = (0.62, 0.72, 0.82)         # linear; also the fog colour
FOG_DENSITY = 0.0035                     # 1/m: half the contrast is gone at ~200 m
SHADOW_MAP_SIZE = 1024
SHADOW_HALF_EXTENT_M = 45.0              # the shadow box covers 90 m x 90 m around the view
SHADOW_AHEAD_M = 30.0                    # centred this far in front of the camera
SHADOW_DEPTH_M = 400.0

# Declarations shared by the object and sky fragment shaders.
COMMON = """
uniform vec3 sun_dir;
uniform vec3 sun_colour;
uniform vec3 sky_zenith;
uniform vec3 sky_horizon;
layout(location = 5) out vec3 o_beauty;
layout(location = 6) out float o_sun;   // sun visibility (frame.sun): the shadow map's verdict, 1 = lit
vec3 sky_colour(vec3 dir) {
    float up = clamp(dir.y, 0.0, 1.0);
    vec3 c = mix(sky_horizon, sky_zenith, sqrt(up));
    float s = max(dot(dir, sun_dir), 0.0);
    return c + sun_colour * (6.0 * pow(s, 600.0) + 0.25 * pow(s, 12.0));
}
vec3 to_display(vec3 linear) {          // exposure tone map, then sRGB-ish gamma
    return pow(vec3(1.0) - exp(-1.4 * linear), vec3(1.0 / 2.2));
}
"""

OBJECT_DECLARATIONS = COMMON + """
uniform vec3 eye_pos;
uniform mat4 light_vp;
uniform float fog_density;
uniform sampler2DShadow shadow_map;
in vec3 v_world;
in vec3 v_world_normal;
float sunlit(vec3 world, vec3 n) {       // 2x2 PCF; outside the shadow box counts as lit
    vec4 p = light_vp * vec4(world + n * 0.08, 1.0);
    vec3 q = p.xyz / p.w * 0.5 + 0.5;
    if (any(lessThan(q, vec3(0.0))) || any(greaterThan(q, vec3(1.0)))) return 1.0;
    vec2 texel = 0.5 / vec2(textureSize(shadow_map, 0));
    float s = 0.0;
    for (int i = -1; i <= 1; i += 2)
        for (int j = -1; j <= 1; j += 2)
            s += texture(shadow_map, vec3(q.xy + vec2(i, j) * texel, q.z - 0.0015));
    return 0.25 * s;
}
"""

# Runs at the end of the object shader's main(), where albedo, metallic, roughness and pattern are final.
OBJECT_MAIN = """
    vec3 base = pow(albedo, vec3(2.2));
    vec3 n = normalize(v_world_normal);
    vec3 v = normalize(eye_pos - v_world);
    if (dot(n, v) < 0.0) n = -n;
    vec3 h = normalize(sun_dir + v);
    float ndl = max(dot(n, sun_dir), 0.0);
    float ndv = max(dot(n, v), 1e-3);
    float ndh = max(dot(n, h), 0.0);
    float a = max(roughness * roughness, 0.02);
    float a2 = a * a;
    float dd = ndh * ndh * (a2 - 1.0) + 1.0;
    float ggx = a2 / (3.14159 * dd * dd);
    float k = a * 0.5;
    float vis = 0.25 / ((ndl * (1.0 - k) + k) * (ndv * (1.0 - k) + k));
    vec3 f0 = mix(vec3(0.04), base, metallic);
    vec3 fresnel = f0 + (1.0 - f0) * pow(1.0 - max(dot(h, v), 0.0), 5.0);
    vec3 direct = (base * (1.0 - metallic) / 3.14159 + ggx * vis * fresnel) * sun_colour * ndl * 3.14159;
    vec3 ambient = base * (1.0 - metallic) * mix(sky_horizon, sky_zenith, n.y * 0.5 + 0.5) * 0.45
                 + f0 * sky_colour(reflect(-v, n)) * (1.0 - roughness) * 0.6;
    float sun_visible = ndl > 0.0 ? sunlit(v_world, n) : 0.0;    // facing away: no sun, whatever the map says
    vec3 lit = ambient + direct * sun_visible;
    if (pattern == %(LAVA)d && albedo.r > 0.5) lit += base * 2.5;      // molten rock glows
    lit = mix(lit, sky_horizon, 1.0 - exp(-fog_density * v_distance));
    o_beauty = to_display(lit);
    o_sun = sun_visible;
"""

SKY_DECLARATIONS = COMMON + """
uniform mat4 inv_view_proj;
uniform vec2 viewport;
"""

SKY_MAIN = """
    vec2 ndc = gl_FragCoord.xy / viewport * 2.0 - 1.0;
    vec4 far = inv_view_proj * vec4(ndc, 1.0, 1.0);
    vec4 near = inv_view_proj * vec4(ndc, -1.0, 1.0);
    o_beauty = to_display(sky_colour(normalize(far.xyz / far.w - near.xyz / near.w)));
    o_sun = 1.0;
"""

SHADOW_VERTEX = """
#version 330
uniform mat4 light_vp;
uniform mat4 model;
in vec3 in_pos;
void main() { gl_Position = light_vp * model * vec4(in_pos, 1.0); }
"""

SHADOW_FRAGMENT = """
#version 330
void main() {}
"""


def orthographic(half_width: float, half_height: float, near: float, far: float) -> np.ndarray:
    """OpenGL orthographic projection (column-vector convention), float32."""
    m = np.eye(4)
    m[0, 0], m[1, 1] = 1.0 / half_width, 1.0 / half_height
    m[2, 2] = -2.0 / (far - near)
    m[2, 3] = -(far + near) / (far - near)
    return m.astype(np.float32)


def camera_position(view: np.ndarray) -> np.ndarray:
    """World position of the eye of a world → camera matrix."""
    rotation, translation = view[:3, :3].astype(np.float64), view[:3, 3].astype(np.float64)
    return -rotation.T @ translation


def light_view_projection(view: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(light view-projection 4x4, box centre): an orthographic sun view of the ground in front of the camera.
    The centre snaps to shadow-map texels so that shadows do not shimmer as the camera moves."""
    eye = camera_position(view)
    forward = -view[2, :3].astype(np.float64)
    flat = np.array([forward[0], 0.0, forward[2]])
    flat = flat / (np.linalg.norm(flat) or 1.0)
    centre = eye + flat * SHADOW_AHEAD_M
    texel = 2 * SHADOW_HALF_EXTENT_M / SHADOW_MAP_SIZE
    centre = np.round(centre / texel) * texel
    light_view = look_at(centre + SUN_DIRECTION * SHADOW_DEPTH_M / 2, centre)
    proj = orthographic(SHADOW_HALF_EXTENT_M, SHADOW_HALF_EXTENT_M, 1.0, SHADOW_DEPTH_M)
    return (proj.astype(np.float64) @ light_view.astype(np.float64)).astype(np.float32), centre


def sky_uniforms() -> dict[str, tuple]:
    return {"sun_dir": tuple(float(v) for v in SUN_DIRECTION), "sun_colour": SUN_COLOUR,
            "sky_zenith": SKY_ZENITH, "sky_horizon": SKY_HORIZON}


def shadow_radius() -> float:
    """Radius of the sphere around the shadow box centre that holds every shadow caster worth drawing."""
    return math.hypot(SHADOW_HALF_EXTENT_M, SHADOW_HALF_EXTENT_M) + 20.0
