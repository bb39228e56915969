"""GLSL for Panda3D's one-pass G-buffer: four colour targets written by one fragment shader.

Targets (locations): 0 the lit frame (paired RGB); 1 albedo; 2 view-space normal; 3 (depth, metallic, roughness,
sun visibility), the three grey channels packed into one target and spread to R = G = B on readback, its alpha
the sun mask (`frame.sun`) from the sun's shadow map (Panda draws it for the shadow-casting light,
gbuffer_pass.py). Every value is encoded in the shader by the rules of gbuffer/encoding.py (the constants are
filled in from there), so the 8-bit targets are the channels as they are stored.

Inputs are Panda3D's own: `p3d_Texture0` (the model's texture; Panda binds white where there is none),
`p3d_Material` (base colour, roughness, metallic), `p3d_ColorScale`. Panda hands GLSL the OpenGL eye space
(x right, y up, camera looking down -z), which is the encoding's view space as is.
"""

from __future__ import annotations

import math

from gbuffer.encoding import DEPTH_FAR_M, DEPTH_NEAR_M

VERTEX = """
#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
uniform mat4 p3d_ModelViewMatrix;
uniform mat3 p3d_NormalMatrix;
in vec4 p3d_Vertex;
in vec3 p3d_Normal;
in vec2 p3d_MultiTexCoord0;
out vec3 v_normal;     // view space
out vec3 v_eye;        // view-space position, metres
out vec2 v_uv;
void main() {
    gl_Position = p3d_ModelViewProjectionMatrix * p3d_Vertex;
    v_eye = (p3d_ModelViewMatrix * p3d_Vertex).xyz;
    v_normal = p3d_NormalMatrix * p3d_Normal;
    v_uv = p3d_MultiTexCoord0;
}
"""

FRAGMENT = """
#version 330
const float NEAR = %(near)r;
const float LOG_RANGE = %(log_range)r;
uniform sampler2D p3d_Texture0;
uniform vec4 p3d_ColorScale;
uniform struct { vec4 baseColor; float roughness; float metallic; } p3d_Material;
uniform mat4 p3d_ViewMatrix;   // world → eye
uniform vec3 sun_world;        // towards the sun, world space
uniform vec3 sky_colour;       // sRGB
uniform struct { sampler2DShadow shadowMap; mat4 shadowViewMatrix; } p3d_LightSource[1];   // the sun, casting
in vec3 v_normal;
in vec3 v_eye;
in vec2 v_uv;
layout(location = 0) out vec4 o_lit;
layout(location = 1) out vec4 o_albedo;
layout(location = 2) out vec4 o_normal;
layout(location = 3) out vec4 o_scalars;   // depth, metallic, roughness
void main() {
    vec4 texel = texture(p3d_Texture0, v_uv) * p3d_Material.baseColor * p3d_ColorScale;
    if (texel.a < 0.5) discard;            // cut-out foliage: what is behind shows through
    vec3 albedo = clamp(texel.rgb, 0.0, 1.0);
    float metallic = clamp(p3d_Material.metallic, 0.0, 1.0);
    float roughness = clamp(p3d_Material.roughness, 0.0, 1.0);
    vec3 n = normalize(v_normal);
    if (dot(n, v_eye) > 0.0) n = -n;       // a visible surface faces the camera (two-sided cards, flipped models)
    vec3 sun_dir = normalize(mat3(p3d_ViewMatrix) * sun_world);
    float distance = -v_eye.z;
    float depth = clamp(1.0 - log(max(distance, NEAR) / NEAR) / LOG_RANGE, 0.0, 1.0);

    // The lit frame: sun + sky ambient, a GGX-like highlight, metals tint their reflection. Linear light.
    vec3 base = pow(albedo, vec3(2.2));
    vec3 v = normalize(-v_eye);
    vec3 h = normalize(sun_dir + v);
    float a2 = max(roughness * roughness, 0.02);
    a2 *= a2;
    float nh = max(dot(n, h), 0.0);
    float d = a2 / (3.14159 * pow(nh * nh * (a2 - 1.0) + 1.0, 2.0));
    vec3 f0 = mix(vec3(0.04), base, metallic);
    float nl = max(dot(n, sun_dir), 0.0);
    // The sun's visibility from its shadow map (outside the map's box counts as lit), 0 on faces turned away.
    vec4 shadow_at = p3d_LightSource[0].shadowViewMatrix * vec4(v_eye + n * 0.08, 1.0);
    vec3 q = shadow_at.xyz / shadow_at.w;
    bool mapped = all(greaterThan(q, vec3(0.0))) && all(lessThan(q, vec3(1.0)));
    float sunlit = nl > 0.0 ? (mapped ? textureProj(p3d_LightSource[0].shadowMap, shadow_at) : 1.0) : 0.0;
    vec3 sky = pow(sky_colour, vec3(2.2));
    float sun = nl * sunlit;
    vec3 lit = (1.0 - metallic) * base * (2.2 * sun + 0.35 * sky) + f0 * (d * sun * 0.25 + 0.3 * sky);
    float fog = 1.0 - exp(-distance * 0.004);
    lit = mix(lit, sky, fog);

    o_lit = vec4(pow(lit / (1.0 + lit), vec3(1.0 / 2.2)) * 1.15, 1.0);
    o_albedo = vec4(albedo, 1.0);
    o_normal = vec4(n * 0.5 + 0.5, 1.0);
    o_scalars = vec4(depth, metallic, roughness, sunlit);   // alpha: the sun mask (frame.sun)
}
"""


def fragment_source() -> str:
    return FRAGMENT % {"near": float(DEPTH_NEAR_M), "log_range": math.log(DEPTH_FAR_M / DEPTH_NEAR_M)}
