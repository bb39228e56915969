"""Where the GL reference renderer's time goes: each pass timed on its own, and what a texel fetch costs.

    python -m bench.gl_passes_bench [--size 416x224] [--frames 60] [--threads 1] [--json out.json]

Part 1 renders real engine frames through the style shader, the eight report styles in turn (5 frames each),
and waits for llvmpipe after every pass, so each pass's time is its own (the sum is a little above a normal
frame, which lets passes overlap). Part 2 times one full-screen pass at the same size that reads a texture once
and five times, per texture format: the difference is the cost of a fetch, the single read is a pass's floor.
Medians; run it twice and compare in one sitting (these machines are noisy).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

import numpy as np
import torch

from bench.harness import parser, size, write_json
from prompt_presets import REPORT_STYLES, conditioning_for

os.environ.setdefault("EGL_PLATFORM", "surfaceless")


def _timed_shader(ms: dict[str, list[float]]):
    """A StyleShader whose every draw is waited for and timed into `ms`, by pass name and output size."""
    from renderer.reference.gl import StyleShader

    class TimedShader(StyleShader):
        def _draw(self, name, out, inputs, features=(), **uniforms):
            self.ctx.finish()
            t0 = time.perf_counter()
            super()._draw(name, out, inputs, features, **uniforms)
            self.ctx.finish()
            ms[f"{name}@{out.size[0]}x{out.size[1]}"].append((time.perf_counter() - t0) * 1e3)

    return TimedShader()


def pass_costs(width: int, height: int, count: int) -> dict:
    from bench.reference_bench import load_frames
    from renderer.reference.style import StyleCache

    frames = load_frames("engine", width, height, count)
    styles = StyleCache(torch.device("cpu"))
    looks = [styles.get(conditioning_for(REPORT_STYLES[(i // 5) % len(REPORT_STYLES)])) for i in range(count)]
    ms: dict[str, list[float]] = defaultdict(list)
    shader = _timed_shader(ms)
    for f, s in zip(frames, looks):            # warm-up: every style's programs compile on its first frame
        shader.render(f.data, s, f.timestamp)
    ms.clear()
    totals = []
    for f, s in zip(frames, looks):
        t0 = time.perf_counter()
        shader.render(f.data, s, f.timestamp)
        totals.append((time.perf_counter() - t0) * 1e3)
    passes = {name: {"runs": len(v), "ms_median": float(np.median(v)), "ms_per_frame": sum(v) / count}
              for name, v in sorted(ms.items(), key=lambda kv: -sum(kv[1]))}
    return {"frame_ms_median": float(np.median(totals)), "passes": passes}


_VERTEX = """#version 330
void main() { vec2 c = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2); gl_Position = vec4(c * 2.0 - 1.0, 0, 1); }
"""
# name: (components, moderngl dtype, numpy dtype, sampler type)
_FORMATS = {"RGBA8 (unorm)": (4, "f1", np.uint8, "sampler2D"), "RGB8 (unorm)": (3, "f1", np.uint8, "sampler2D"),
            "R32F": (1, "f4", np.float32, "sampler2D"), "RGBA32F": (4, "f4", np.float32, "sampler2D"),
            "RGBA16F": (4, "f2", np.float16, "sampler2D"), "RGBA32UI": (4, "u4", np.uint32, "usampler2D")}


def fetch_costs(width: int, height: int, reps: int = 60) -> dict:
    import moderngl

    ctx = moderngl.create_context(standalone=True, backend="egl")
    out = ctx.texture((width, height), 4, dtype="f4")
    fbo = ctx.framebuffer([out])
    rng = np.random.default_rng(0)
    results = {}
    for name, (comps, dtype, np_dtype, sampler) in _FORMATS.items():
        data = (rng.random((height, width, comps)) * (255 if np_dtype in (np.uint8, np.uint32) else 1))
        tex = ctx.texture((width, height), comps, data.astype(np_dtype).tobytes(), dtype=dtype, alignment=1)
        times = {}
        for k in (1, 5):   # distinct rows, so no two reads are the same texel
            body = "".join(f"s += vec4(texelFetch(t, p + ivec2(0, {i}), 0));\n" for i in range(k))
            fs = (f"#version 330\nuniform {sampler} t;\nout vec4 r;\nvoid main() {{\n"
                  f"ivec2 p = ivec2(gl_FragCoord.xy) / 2; vec4 s = vec4(0.0);\n{body}r = s;\n}}")
            prog = ctx.program(vertex_shader=_VERTEX, fragment_shader=fs)
            vao = ctx.vertex_array(prog, [])
            tex.use(0)
            fbo.use()
            ts = []
            for _ in range(reps):
                ctx.finish()
                t0 = time.perf_counter()
                vao.render(vertices=3)
                ctx.finish()
                ts.append((time.perf_counter() - t0) * 1e3)
            times[k] = float(np.median(ts))
            vao.release()
            prog.release()
        tex.release()
        results[name] = {"pass_ms_one_fetch": times[1], "ms_per_extra_fetch": (times[5] - times[1]) / 4}
    ctx.release()
    return results


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1, help="llvmpipe's threads (LP_NUM_THREADS; default 1)")
    args = ap.parse_args()
    os.environ["LP_NUM_THREADS"] = str(args.threads)   # read when a GL context opens
    w, h = size(args.size)

    passes = pass_costs(w, h, args.frames)
    print(f"{args.size}, {args.threads} llvmpipe thread(s): a frame {passes['frame_ms_median']:.2f} ms (median)")
    print(f"{'pass@output size':>22} {'runs':>5} {'ms median':>10} {'ms / frame':>11}")
    for name, r in passes["passes"].items():
        print(f"{name:>22} {r['runs']:5d} {r['ms_median']:10.3f} {r['ms_per_frame']:11.3f}")
    fetches = fetch_costs(w, h)
    print(f"\n{'texture format':>15} {'pass, one fetch':>16} {'each further fetch':>19}")
    for name, r in fetches.items():
        print(f"{name:>15} {r['pass_ms_one_fetch']:13.3f} ms {r['ms_per_extra_fetch']:16.3f} ms")
    write_json(args.json, {"benchmark": "gl_passes", "size": args.size, "threads": args.threads,
                           "cpu_count": os.cpu_count(), **passes, "fetch": fetches})


if __name__ == "__main__":
    main()
