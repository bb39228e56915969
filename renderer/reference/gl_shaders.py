"""GLSL of the reference renderer's GL backend: the torch modules' math (surface, effects, lighting, post), pass
by pass. Each GLSL function names the torch function it mirrors; change the two together.
tests/test_reference_golden.py holds both backends to the same golden images.

Every pass draws one full-screen triangle and reads its inputs with texelFetch at integer pixels; the one use of
texture filtering (`upsample`) is shown there to be PyTorch's rule. So the pooling and bilinear rules are
PyTorch's own and exact:
- pooling with ceil_mode and no padding averages the pixels inside the image;
- box averages use count_include_pad=False;
- upsampling is bilinear with align_corners=False.
Row 0 of every texture is the image's top row, as in the G-buffer arrays and the frame read back.
"""

from __future__ import annotations

import math

from gbuffer.encoding import DEPTH_FAR_M, DEPTH_NEAR_M
from gbuffer.frame import CHANNEL_INDEX

_LOG_RANGE = math.log(DEPTH_FAR_M / DEPTH_NEAR_M)

VERTEX = """
#version 330
void main() {
    // one triangle covering the viewport: (-1,-1), (3,-1), (-1,3)
    vec2 corner = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
"""

_COMMON = """
uniform ivec2 size;              // the pass's output size (W, H)

float smooth_step(float e0, float e1, float x) {   // effects._smoothstep: e0 > e1 allowed (GLSL's is not)
    float t = clamp((x - e0) / (e1 - e0), 0.0, 1.0);
    return t * t * (3.0 - 2.0 * t);
}

float luminance(vec3 c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b; }

vec4 fetch(sampler2D tex, ivec2 p) { return texelFetch(tex, p, 0); }

// F.interpolate(mode="bilinear", align_corners=False) of a smaller texture to `size`, at output pixel p. The
// texture's own bilinear filter, sampled at the pixel's centre with edges clamped, is that rule exactly (the
// renderer sets LINEAR and clamp-to-edge on every pass target), in one fetch instead of four.
vec4 upsample(sampler2D tex, ivec2 p) { return texture(tex, (vec2(p) + 0.5) / vec2(size)); }
"""

_SURFACE = """
uniform sampler2DArray gbuf;     // (W, H) RGB8, one layer per channel
uniform float tan_half;          // tan(VERTICAL_FOV / 2)
const float DEPTH_NEAR_M = {near}, LOG_DEPTH_RANGE = {log_range};

vec3 levels(int channel, ivec2 p) {   // the stored 8-bit values, one fetch per channel and pixel
    return floor(texelFetch(gbuf, ivec3(p, channel), 0).rgb * 255.0 + 0.5);
}

uniform float srgb_lut[256];     // surface.SRGB_LUT, the linear value of each stored level

vec3 unit_normal(vec3 stored) {  // SurfaceDecoder.decode: decode_normal, renormalised
    vec3 n = stored * (1.0 / 127.5) - 1.0;
    return n * inversesqrt(max(dot(n, n), 1e-12));
}

struct Surface {
    vec3 albedo; float depth_m; float log_depth; bool sky; float metallic; float roughness;
    vec3 normal; vec3 position; vec3 view;
};

Surface decode(ivec2 p) {        // surface.SurfaceDecoder.decode
    Surface s;
    float d = levels(DEPTH, p).r;
    s.log_depth = d / 255.0;
    s.depth_m = DEPTH_NEAR_M * exp((1.0 - s.log_depth) * LOG_DEPTH_RANGE);   // gbuffer.encoding.decode_depth
    s.sky = d == 0.0;
    ivec3 a = ivec3(levels(ALBEDO, p));
    s.albedo = vec3(srgb_lut[a.r], srgb_lut[a.g], srgb_lut[a.b]);
    s.metallic = levels(METALLIC, p).r / 255.0;
    s.roughness = levels(ROUGHNESS, p).r / 255.0;
    s.normal = unit_normal(levels(NORMAL, p));
    float h = float(size.y), w = float(size.x);
    vec3 ray = vec3(((float(p.x) + 0.5) / w * 2.0 - 1.0) * tan_half * w / h,
                    (1.0 - (float(p.y) + 0.5) / h * 2.0) * tan_half, -1.0);
    s.position = ray * s.depth_m;
    s.view = -ray / length(ray);
    return s;
}

struct Material { vec3 albedo; float roughness; float metallic; };

uniform float snow;

Material styled_material(Surface s) {   // effects.apply_snow (when the style has snow)
    Material m = Material(s.albedo, s.roughness, s.metallic);
#ifdef SNOW
    {
        float up = smooth_step(0.35, 0.75, s.normal.y);
        float holds = 0.5 + 0.5 * smooth_step(0.02, 0.12, luminance(m.albedo));
        float cover = up * holds * (s.sky ? 0.0 : 1.0) * min(snow, 1.0);
        m.albedo = m.albedo + (vec3(0.8, 0.85, 0.92) - m.albedo) * cover;
        m.roughness = m.roughness + (0.55 - m.roughness) * cover;
        m.metallic = m.metallic * (1.0 - cover);
    }
#endif
    return m;
}
"""

# What the neighbourhood passes need, per pixel, for the styles that have neon or lava: x the neon edge strength
# before widening (effects.neon_edges), y the luminance of the styled albedo (effects.lava_glow's local mean).
PREP = """
out vec4 result;

float edge_strength(ivec2 p) {   // replicate padding: neighbours clamped into the image
    ivec2 hi = size - 1;
    ivec2 l = clamp(p - ivec2(1, 0), ivec2(0), hi), r = clamp(p + ivec2(1, 0), ivec2(0), hi);
    ivec2 u = clamp(p - ivec2(0, 1), ivec2(0), hi), d = clamp(p + ivec2(0, 1), ivec2(0), hi);
    float dd = (abs(levels(DEPTH, r).r - levels(DEPTH, l).r) + abs(levels(DEPTH, d).r - levels(DEPTH, u).r)) / 255.0;
    float nn = 2.0 - dot(unit_normal(levels(NORMAL, r)), unit_normal(levels(NORMAL, l)))
                   - dot(unit_normal(levels(NORMAL, d)), unit_normal(levels(NORMAL, u)));
    return clamp(smooth_step(0.02, 0.06, dd) + smooth_step(0.15, 0.5, nn), 0.0, 1.0);
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    result = vec4(0.0);
#ifdef NEON
    result.x = edge_strength(p);
#endif
#ifdef LAVA
    result.y = luminance(styled_material(decode(p)).albedo);
#endif
}
"""

# F.avg_pool2d(x, 4, ceil_mode=True) of max(x - threshold, 0): the mean of the source pixels inside the image.
# With GBUF_DEPTH the source is the G-buffer's depth layer (its stored 0..1 value, for ambient occlusion).
POOL = """
#ifdef GBUF_DEPTH
uniform sampler2DArray gbuf;
vec4 source(ivec2 p) { return texelFetch(gbuf, ivec3(p, DEPTH), 0); }
#else
uniform sampler2D src;
vec4 source(ivec2 p) { return fetch(src, p); }
#endif
uniform ivec2 src_size;
uniform float threshold;         // bloom's bright pass; 0 keeps non-negative inputs as they are
out vec4 result;

void main() {
    ivec2 start = ivec2(gl_FragCoord.xy) * 4;
    vec4 sum = vec4(0.0);
#ifdef WHOLE_BLOCKS              // the source is exactly 4x the output: constant bounds, so the loops unroll
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++)
            sum += max(source(start + ivec2(x, y)) - threshold, 0.0);
    result = sum / 16.0;
#else
    ivec2 stop = min(start + 4, src_size);
    for (int y = start.y; y < stop.y; y++)
        for (int x = start.x; x < stop.x; x++)
            sum += max(source(ivec2(x, y)) - threshold, 0.0);
    result = sum / float((stop.x - start.x) * (stop.y - start.y));
#endif
}
"""

# One direction of F.avg_pool2d(x, 2r+1, stride=1, padding=r, count_include_pad=False): a box whose window is
# clipped to the image, so the two directions multiply to the 2-D count.
BOX = """
uniform sampler2D src;
uniform ivec2 step_dir;          // (1, 0) or (0, 1)
uniform int radius;
out vec4 result;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    int along = p.x * step_dir.x + p.y * step_dir.y;
    int extent = size.x * step_dir.x + size.y * step_dir.y;
    vec4 sum = vec4(0.0);
#ifdef RADIUS                    // the radius compiled in: constant bounds, so the loop unrolls
    float count = 0.0;
    for (int i = -RADIUS; i <= RADIUS; i++) {
        bool inside = along + i >= 0 && along + i < extent;
        sum += inside ? fetch(src, clamp(p + i * step_dir, ivec2(0), size - 1)) : vec4(0.0);
        count += inside ? 1.0 : 0.0;
    }
    result = sum / count;
#else
    int first = max(along - radius, 0), last = min(along + radius, extent - 1);
    for (int i = first; i <= last; i++)
        sum += fetch(src, p + (i - along) * step_dir);
    result = sum / float(last - first + 1);
#endif
}
"""

# One direction of post._blur: a 9-tap Gaussian (sigma 1.5) with replicated edges.
_BLUR = """
uniform float weights[9];

vec4 blur(sampler2D tex, ivec2 p, ivec2 step_dir) {
    vec4 sum = vec4(0.0);
    for (int i = 0; i < 9; i++)
        sum += weights[i] * fetch(tex, clamp(p + (i - 4) * step_dir, ivec2(0), size - 1));
    return sum;
}
"""

BLUR = _BLUR + """
uniform sampler2D src;
uniform ivec2 step_dir;
out vec4 result;

void main() { result = blur(src, ivec2(gl_FragCoord.xy), step_dir); }
"""

# post.bloom's glow at 1/4 resolution: the 1/4 level's blur finished downwards here (one pass fewer), plus the
# blurred 1/16 level brought up to it.
GLOW = _BLUR + """
uniform sampler2D src;           // the 1/4 level blurred across
uniform sampler2D aux;           // blurred 1/16 level
out vec4 result;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    result = blur(src, p, ivec2(0, 1)) + upsample(aux, p);
}
"""

# renderer.ReferenceSession._render_frame up to post: linear HDR radiance.
SHADE = """
uniform sampler2D prep;          // PREP's result
uniform sampler2D lava_local;    // PREP.y box-averaged 9x9 (with lava)
uniform sampler2D ao_near;       // the stored log depth pooled to 1/4 and box-averaged (ambient occlusion)
uniform float time_s;

uniform vec3 sun_color; uniform float sun_intensity; uniform vec3 sun_direction;
uniform vec3 sky_light; uniform vec3 ground_light; uniform float ambient;
uniform vec3 sky_top; uniform vec3 sky_horizon;
uniform vec3 fog_color; uniform float fog_density;
uniform float edge_glow; uniform vec3 edge_color_a; uniform vec3 edge_color_b;
uniform float lava; uniform vec3 lava_color;
uniform float haze; uniform vec3 haze_color;
uniform float caustics; uniform vec3 caustic_color;
uniform float infrared; uniform vec3 ironbow[8];   // effects.IRONBOW, linear
out vec4 result;

float ambient_occlusion(Surface s, ivec2 p) {      // lighting.ambient_occlusion
    float near = upsample(ao_near, p).r;
    return 1.0 - clamp((near - s.log_depth) * 12.0, 0.0, 0.6);
}

vec3 shade(Surface s, Material m, ivec2 p) {       // lighting.shade
    vec3 n = s.normal, v = s.view, l = sun_direction;
    float n_l_raw = dot(n, l), v_l = dot(v, l);
    float n_v = max(dot(n, v), 1e-3);
    float inv_len = inversesqrt(max(2.0 + 2.0 * v_l, 1e-6));
    float n_h = max((n_v + n_l_raw) * inv_len, 0.0);
    float v_h = clamp((1.0 + v_l) * inv_len, 0.0, 1.0);
    float n_l = max(n_l_raw, 0.0);

    float r = clamp(m.roughness, 0.045, 1.0);
    float a2 = (r * r) * (r * r);
    float dd = n_h * n_h * (a2 - 1.0) + 1.0;
    float d = a2 / (3.14159265358979 * dd * dd);
    float k = (r + 1.0) * (r + 1.0) * 0.125;
    float g = (n_v / (n_v * (1.0 - k) + k)) * (n_l / (n_l * (1.0 - k) + k));
    vec3 f0 = 0.04 + (m.albedo - 0.04) * m.metallic;
    float q = 1.0 - v_h;
    float schlick = (q * q) * (q * q) * q;
    vec3 fresnel = f0 + (1.0 - f0) * schlick;
    float spec_scale = d * g / (4.0 * n_v * max(n_l, 1e-3));
    float kd = (1.0 - m.metallic) / 3.14159265358979;

    vec3 sun = sun_color * (sun_intensity * 3.14159265358979);
    vec3 brdf = fresnel * spec_scale + m.albedo * kd * (1.0 - fresnel);
    vec3 direct = brdf * (sun * n_l);

    float up = 0.5 + 0.5 * n.y;
    vec3 hemi = mix(ground_light, sky_light, up) * ambient;
    vec3 amb = hemi * (m.albedo * (1.0 - m.metallic) + f0 * (1.0 - 0.7 * r));
    float occlusion = ambient_occlusion(s, p);
    return direct * (0.5 + 0.5 * occlusion) + amb * occlusion;
}

vec3 sky_radiance(Surface s) {   // lighting.sky
    vec3 ray = -s.view;
    float height = clamp(ray.y, 0.0, 1.0);
    float t = pow(clamp(height / 0.6, 0.0, 1.0), 0.7);
    vec3 base = sky_horizon + (sky_top - sky_horizon) * t;
    float below = clamp(-ray.y, 0.0, 1.0);
    base = base * (1.0 - 0.5 * below);
    float cos_sun = max(dot(ray, sun_direction), 0.0);
    float c2 = cos_sun * cos_sun, c4 = c2 * c2;
    vec3 glow = sun_color * (sun_intensity * (0.08 * c4 * c4 + 2.0 * pow(cos_sun, 400.0)));
    return base + glow;
}

float caustic_pattern(Surface s) {   // effects.caustics
    float u = s.position.x * 1.3, w = s.position.z * 1.3, t = time_s * 0.8;
    float a = sin(u + sin(w * 0.9 + t) * 1.6 + t * 0.7);
    float b = sin(w * 1.1 + sin(u * 0.8 - t * 0.9) * 1.6 - t * 0.5);
    float c = sin((u + w) * 0.7 + sin(u - w + t) * 1.2);
    float x = 1.0 - abs(a + b + c) / 3.0, x3 = x * x * x;
    float facing = 0.35 + 0.65 * max(s.normal.y, 0.0);
    return x3 * x3 * 1.5 * facing * exp(-s.depth_m / 30.0) * (s.sky ? 0.0 : 1.0) * caustics;
}

vec3 neon(Surface s, ivec2 p) {  // effects.neon_edges: the 3x3 max widens the edge into a tube
    float e = 0.0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            ivec2 q = p + ivec2(dx, dy);
            if (all(greaterThanEqual(q, ivec2(0))) && all(lessThan(q, size))) e = max(e, fetch(prep, q).x);
        }
    e *= exp(-s.depth_m / 80.0);
    float side = 0.5 + 0.5 * s.normal.x;
    return (edge_color_a + (edge_color_b - edge_color_a) * side) * (e * 5.0 * edge_glow);
}

vec3 fog(Surface s, vec3 radiance) {   // effects.fog (geometry only)
    float amount = 1.0 - exp(-s.depth_m * fog_density);
    return radiance + (fog_color - radiance) * amount;
}

vec3 dust(Surface s, vec3 radiance) {  // effects.haze
    vec3 ray = -s.view;
    float x = ray.x, y = ray.y;
    float streak = 1.0 + 0.25 * sin(x * 40.0 + y * 14.0 - time_s * 6.0) * sin(x * 9.0 - y * 30.0 + time_s);
    float distance = s.sky ? 400.0 : s.depth_m;
    float density = 1.0 - exp(-distance * (0.06 * haze) * streak);
    float ts = max(dot(ray, sun_direction), 0.0);
    float toward_sun = (ts * ts) * (ts * ts);
    vec3 color = haze_color * (0.7 + 0.6 * toward_sun * sun_intensity / 2.0);
    float amount = clamp(density * min(haze * 1.1, 1.0), 0.0, 0.97);
    return radiance + (color - radiance) * amount;
}

vec3 thermal(Surface s, vec3 radiance, float metallic) {   // effects.infrared and effects._palette
    float lit = luminance(radiance);
    float heat = 0.75 * lit / (lit + 0.25) + 0.45 * metallic + 0.45 * s.log_depth - 0.3;
    heat = clamp(s.sky ? 0.04 * (1.0 + s.view.y) : heat, 0.0, 1.0);
    float pos = heat * 7.0;
    int i = clamp(int(floor(pos)), 0, 6);
    float f = pos - float(i);
    vec3 palette = (ironbow[i] * (1.0 - f) + ironbow[i + 1] * f) * 1.2;
    return radiance + (palette - radiance) * infrared;
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    Surface s = decode(p);
    Material m = styled_material(s);
    vec3 emissive = vec3(0.0);
#ifdef LAVA
    {                            // effects.lava_glow
        float lum = luminance(m.albedo);
        float local = fetch(lava_local, p).y;
        float crack = max(smooth_step(0.75, 0.35, lum / max(local, 1e-4)), smooth_step(0.02, 0.004, lum));
        float ground = smooth_step(0.5, 0.9, s.normal.y) * (s.sky ? 0.0 : 1.0);
        float horizon = smooth_step(20.0, 150.0, s.depth_m);
        float heat = clamp(ground * (crack + 0.3 * horizon), 0.0, 1.0) * lava;
        m.albedo = m.albedo * (1.0 - 0.75 * lava) * (1.0 - heat);
        emissive = lava_color * (heat * 6.0);
    }
#endif
#ifdef CAUSTICS                  // focused sunlight: it brightens the diffuse surface colour
    emissive += caustic_pattern(s) * caustic_color * (sun_color * sun_intensity) * m.albedo;
#endif
    vec3 radiance = shade(s, m, p) + emissive;
#ifdef NEON
    radiance += neon(s, p);
#endif
    radiance = s.sky ? sky_radiance(s) : fog(s, radiance);
#ifdef HAZE
    radiance = dust(s, radiance);
#endif
#ifdef INFRARED
    radiance = thermal(s, radiance, m.metallic);
#endif
    result = vec4(radiance, 1.0);
}
"""

# post: bloom added, ACES tone map, the 4096-entry sRGB table, grading, vignette. Written to an RGBA8 target,
# whose conversion rounds to the nearest level as post.to_uint8 does.
FINISH = """
uniform sampler2D src;           // radiance
uniform sampler2D aux;           // the bloom glow at 1/4
uniform float bloom; uniform float exposure;
uniform vec3 tint; uniform vec3 lift; uniform vec3 gamma; uniform vec3 gain;
uniform float contrast; uniform float saturation;
uniform float duotone; uniform vec3 duotone_dark; uniform vec3 duotone_light;
uniform float vignette;
out vec4 result;

uniform float srgb_encode[4096];  // post.SrgbEncoder's table

float encode(float linear) {     // post.SrgbEncoder: the table entry nearest below linear * 4095 + 0.5
    return srgb_encode[int(linear * 4095.0 + 0.5)];
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    vec3 r = fetch(src, p).rgb;
#ifdef BLOOM
    r += upsample(aux, p).rgb * bloom;
#endif
    vec3 x = max(r, 0.0) * exposure;   // post.tonemap
    vec3 display = clamp((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0);
    vec3 c = clamp(vec3(encode(display.r), encode(display.g), encode(display.b)) * tint, 0.0, 1.0);  // post.grade
#ifdef LIFT
    c = c + lift * (1.0 - c);
#endif
#ifdef GAIN
    c = c * gain;
#endif
#ifdef GAMMA
    c = pow(clamp(c, 0.0, 1.0), 1.0 / max(gamma, 0.05));
#endif
#ifdef CONTRAST
    c = (c - 0.5) * contrast + 0.5;
#endif
#ifdef SATURATION
    c = mix(vec3(luminance(c)), c, saturation);
#endif
#ifdef DUOTONE
    float y = clamp(luminance(c), 0.0, 1.0);
    c = mix(c, mix(duotone_dark, duotone_light, y), duotone);
#endif
    c = clamp(c, 0.0, 1.0);
#ifdef VIGNETTE                  // post.Vignette: linspace(-1, 1) across each side
    vec2 t = vec2(p) / vec2(max(size - 1, 1)) * 2.0 - 1.0;
    float r2 = dot(t, t) / 2.0;
    c = c * (1.0 - vignette * r2 * sqrt(r2));
#endif
    result = vec4(c, 1.0);
}
"""


def fragment(body: str, surface: bool = False, features: tuple[str, ...] = ()) -> str:
    """A pass's full fragment source: the common part (and the surface decoding where it reads the G-buffer),
    with the style's `features` (SNOW, LAVA, ...) compiled in. llvmpipe runs both sides of a branch on a
    uniform, so a feature the style does not use is left out of the program rather than skipped at run time."""
    defines = "".join(f"#define {name}\n" for name in features)
    channels = defines + "".join(f"const int {name.upper()} = {i};\n" for name, i in CHANNEL_INDEX.items())
    decoding = _SURFACE.replace("{near}", repr(float(DEPTH_NEAR_M))).replace("{log_range}", repr(_LOG_RANGE))
    return "#version 330\n" + channels + _COMMON + (decoding if surface else "") + body
