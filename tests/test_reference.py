"""The reference style renderer on a ray-cast synthetic G-buffer (floor, road, wall, boxes, sky)."""

import numpy as np
import pytest
import torch

from gbuffer import GBufferFrame
from gbuffer.encoding import decode_depth, decode_normal
from prompt_presets import (
    REPORT_STYLES,
    Conditioning,
    PresetError,
    WeightedPrompt,
    conditioning_for,
    get_preset,
    preset_names,
)
from renderer import RendererError, create_renderer
from renderer.reference import STAGES, ReferenceRenderer, ReferenceSession
from renderer.reference.style import StyleCache, prompt_blend
from renderer.reference.surface import SurfaceDecoder
from renderer.reference.synthetic import synthetic_gbuffer

W, H = 160, 96


@pytest.fixture(scope="module")
def frame():
    return synthetic_gbuffer(W, H, t=0.5)


@pytest.fixture(scope="module")
def session():
    return ReferenceRenderer("cpu").open_session(W, H)


@pytest.fixture(scope="module")
def images(session, frame):
    """preset name → rendered uint8 (H, W, 3)."""
    return {n: session.render([frame], [conditioning_for(n)]).rgb[0] for n in preset_names()}


def _mean(img):
    return img.reshape(-1, 3).astype(np.float64).mean(0)


def test_the_factory_builds_it_and_it_reports_every_stage(session, frame):
    r = create_renderer("reference", device="cpu")
    assert r.name == "reference" and r.describe()["device"] == "cpu"
    assert r.describe()["backend"] == "gl"             # this machine has EGL (Mesa llvmpipe): the fast path
    result = session.render([frame, frame], [conditioning_for("polar")] * 2)
    assert result.rgb.shape == (2, H, W, 3) and result.rgb.dtype == np.uint8
    assert tuple(result.timings_ms) == session.stages and all(v >= 0 for v in result.timings_ms.values())
    torch_session = ReferenceRenderer("cpu", backend="torch").open_session(W, H)
    assert tuple(torch_session.render([frame], [conditioning_for("polar")]).timings_ms) == STAGES
    assert result.peak_memory_bytes > 0


def test_every_preset_renders_a_plausible_image(images):
    for name, img in images.items():
        assert img.std() > 8, name                     # not a flat colour
        assert 10 < img.mean() < 245, name              # neither black nor blown out
        assert (img > 250).mean() < 0.5, name


def test_styles_differ_measurably(images):
    names = list(images)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diff = np.abs(images[a].astype(int) - images[b].astype(int)).mean()
            assert diff > 6, (a, b, diff)
    assert np.linalg.norm(_mean(images["infrared"]) - _mean(images["polar"])) > 80


def test_a_half_blend_lands_between_the_two_styles(session, frame, images):
    half = Conditioning((WeightedPrompt(get_preset("infrared").prompt, 0.5, "infrared"),
                         WeightedPrompt(get_preset("polar").prompt, 0.5, "polar")))
    mid = _mean(session.render([frame], [half]).rgb[0])
    a, b = _mean(images["infrared"]), _mean(images["polar"])
    t = np.dot(mid - a, b - a) / np.dot(b - a, b - a)  # position of the blend along the line a → b
    assert 0.15 < t < 0.85  # tone mapping and grading are not linear, so not exactly 0.5
    assert np.linalg.norm(mid - (a + t * (b - a))) < 0.35 * np.linalg.norm(b - a)


def test_slerp_blend_renders_and_differs_from_both_ends(session, frame, images):
    cond = Conditioning((WeightedPrompt("x", 0.5, "volcano"), WeightedPrompt("y", 0.5, "deep_sea")), "slerp")
    img = session.render([frame], [cond]).rgb[0]
    for end in ("volcano", "deep_sea"):
        assert np.abs(img.astype(int) - images[end].astype(int)).mean() > 5


def test_blend_weights_per_mode_and_the_style_cache():
    two = (WeightedPrompt("a", 0.75, "volcano"), WeightedPrompt("b", 0.25, "polar"))
    assert dict(prompt_blend(Conditioning(two))) == pytest.approx({"volcano": 0.75, "polar": 0.25})
    slerp = dict(prompt_blend(Conditioning(two, "slerp")))  # sin(3π/8), sin(π/8) renormalised
    assert slerp["polar"] == pytest.approx(0.2929, abs=1e-4) and sum(slerp.values()) == pytest.approx(1.0)
    cache = StyleCache(torch.device("cpu"))
    assert cache.get(Conditioning(two)) is cache.get(Conditioning(two))
    assert cache.get(Conditioning(two)).params.snow == pytest.approx(0.25 * get_preset("polar").reference.snow)


def test_same_input_same_output_even_in_a_new_session(session, frame):
    cond = conditioning_for("deep_sea")
    a = session.render([frame], [cond]).rgb
    b = session.render([frame], [cond]).rgb
    c = ReferenceRenderer("cpu").open_session(W, H, seed=7).render([frame], [cond]).rgb
    assert np.array_equal(a, b) and np.array_equal(a, c)


def _floor_and_wall_frame():
    """Left half: a grey wall facing the camera; right half: a grey floor facing up. Same albedo, same depth."""
    h, w = 64, 64
    normal = np.zeros((h, w, 3), np.float32)
    normal[:, : w // 2] = (0, 0, 1)
    normal[:, w // 2:] = (0, 1, 0)
    grey = np.full((h, w, 3), 90, np.uint8)
    chans = {"albedo": grey, "depth": np.full((h, w, 3), 160, np.uint8),
             "metallic": np.zeros((h, w, 3), np.uint8), "roughness": np.full((h, w, 3), 200, np.uint8),
             "normal": np.round((normal + 1) * 127.5).astype(np.uint8)}
    return GBufferFrame.from_channels(0, 0.0, chans)


def test_snow_lies_on_up_facing_surfaces_in_polar():
    f = _floor_and_wall_frame()
    s = ReferenceRenderer("cpu").open_session(64, 64)
    polar = s.render([f], [conditioning_for("polar")]).rgb[0].astype(float)
    plain = s.render([f], [conditioning_for("original")]).rgb[0].astype(float)
    # compare the centre of each half, away from the vignette's asymmetry
    wall, floor = polar[20:44, 8:24].mean(), polar[20:44, 40:56].mean()
    assert floor > wall + 40
    assert floor - plain[20:44, 40:56].mean() > 30   # the floor turned white, not just brighter light
    assert polar[20:44, 40:56].std(axis=(0, 1)).max() < 8


def test_free_text_renders_like_its_nearest_presets(session, frame, images):
    img = session.render([frame], [conditioning_for("a river of lava under an ash sky")]).rgb[0]
    dist = {n: np.linalg.norm(_mean(img) - _mean(images[n])) for n in REPORT_STYLES}
    assert min(dist, key=dist.get) == "volcano", dist


def test_frames_of_another_size_are_resized(session):
    big = synthetic_gbuffer(2 * W, 2 * H, t=0.5)
    out = session.render([big], [conditioning_for("original")]).rgb
    assert out.shape == (1, H, W, 3)


def test_decoding_follows_the_gbuffer_encoding_rules(frame):
    s = SurfaceDecoder(H, W, torch.device("cpu")).decode(frame.data)
    np.testing.assert_allclose(s.depth_m[0].numpy(), decode_depth(frame.channel("depth")), rtol=1e-6)
    np.testing.assert_allclose(s.normal.permute(1, 2, 0).numpy(), decode_normal(frame.channel("normal")),
                               atol=1e-6)
    assert s.sky[0].numpy().tolist() == (frame.channel("depth")[..., 0] == 0).tolist()


def test_unknown_preset_in_a_conditioning_is_a_preset_error(session, frame):
    with pytest.raises(PresetError, match="unknown preset 'lava_land'"):
        session.render([frame], [Conditioning.single("some text", preset="lava_land")])


@pytest.mark.parametrize("n_frames, n_cond, msg", [
    (0, 0, r"1\.\.16 frames, got 0"),
    (17, 17, r"1\.\.16 frames, got 17"),
    (2, 1, "2 frames but 1 conditionings"),
])
def test_bad_chunks_are_renderer_errors(session, frame, n_frames, n_cond, msg):
    with pytest.raises(RendererError, match=msg):
        session.render([frame] * n_frames, [conditioning_for("polar")] * n_cond)


@pytest.mark.parametrize("kwargs, msg", [
    ({"device": "tpu"}, "device"),
    ({"device": "nonsense"}, "device"),
])
def test_bad_devices_are_renderer_errors(kwargs, msg):
    with pytest.raises(RendererError, match=msg):
        ReferenceRenderer(**kwargs)


@pytest.mark.parametrize("w, h", [(0, 10), (10, -1), (10.5, 10), (100000, 10)])
def test_bad_session_sizes_are_renderer_errors(w, h):
    with pytest.raises(RendererError, match="must be an integer"):
        ReferenceRenderer("cpu").open_session(w, h)


@pytest.mark.gl
def test_report_styles_are_distinct_on_a_real_engine_frame():
    from gbuffer.engine import EngineSource

    with EngineSource.demo(W, H, fps=30) as src:
        for _ in range(20):
            frame = src.next_frame()
    session = ReferenceRenderer("cpu").open_session(W, H)
    imgs = {n: session.render([frame], [conditioning_for(n)]).rgb[0] for n in REPORT_STYLES}
    for name, img in imgs.items():
        assert img.std() > 8 and 10 < img.mean() < 245, name
    means = np.array([_mean(img) for img in imgs.values()])
    gaps = np.linalg.norm(means[:, None] - means[None], axis=-1) + np.eye(len(means)) * 1e9
    assert gaps.min() > 10, gaps.min()


@pytest.mark.skipif(torch.cuda.is_available(), reason="only where CUDA is missing")
def test_asking_for_cuda_without_it_says_so():
    with pytest.raises(RendererError, match="CUDA was asked for but is not available"):
        ReferenceRenderer("cuda")


# ---- the two backends: OpenGL (the default on a CPU) and torch ----------------------------------------------

def _every_effect() -> Conditioning:
    """One blend that switches on every effect and grading step at once."""
    names = ("cyberpunk", "volcano", "polar", "deep_sea", "sandstorm", "infrared", "vaporwave", "autumn_warm")
    return Conditioning(tuple(WeightedPrompt(get_preset(n).prompt, 1 / len(names), n) for n in names))


def _close(a: np.ndarray, b: np.ndarray) -> str:
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    ok = diff.mean() <= 0.5 and np.percentile(diff, 99.9) <= 6   # the golden images' tolerance
    return "" if ok else f"mean {diff.mean():.3f}, p99.9 {np.percentile(diff, 99.9):.1f}, max {diff.max()}"


@pytest.mark.gl
@pytest.mark.parametrize("size, source_size", [((123, 77), (123, 77)), ((200, 120), (160, 96)), ((8, 8), (160, 96)),
                                               ((16, 4096), (16, 4096))])   # the tallest size a studio takes
def test_the_gl_and_torch_backends_draw_the_same_picture(size, source_size):
    w, h = size
    frame = synthetic_gbuffer(*source_size, t=1.7)    # a source of another size is resized the same way
    gl = ReferenceRenderer("cpu", backend="gl").open_session(w, h)
    ref = ReferenceRenderer("cpu", backend="torch").open_session(w, h)
    for cond in (_every_effect(), conditioning_for("original"), conditioning_for("cyberpunk")):
        a, b = gl.render([frame], [cond]).rgb[0], ref.render([frame], [cond]).rgb[0]
        assert a.shape == b.shape == (h, w, 3)
        assert not _close(a, b), _close(a, b)


@pytest.mark.gl
def test_gl_sessions_on_many_threads_take_turns_on_the_one_context(frame):
    """Live sessions render from their own threads; the GL work queues on the shader's one thread, and each
    session gets exactly its own frame."""
    from concurrent.futures import ThreadPoolExecutor

    renderer = ReferenceRenderer("cpu", backend="gl")
    styles = ("polar", "volcano", "cyberpunk", "infrared")
    alone = {n: renderer.open_session(W, H).render([frame], [conditioning_for(n)]).rgb[0] for n in styles}

    def run(name: str) -> list[np.ndarray]:
        session = renderer.open_session(W, H)
        return [session.render([frame], [conditioning_for(name)]).rgb[0] for _ in range(5)]

    with ThreadPoolExecutor(len(styles)) as pool:
        results = dict(zip(styles, pool.map(run, styles)))
    for name, frames in results.items():
        assert all(np.array_equal(f, alone[name]) for f in frames), name


@pytest.mark.parametrize("kwargs, msg", [
    ({"backend": "vulkan"}, "unknown reference backend 'vulkan'; choose one of auto, gl, torch"),
    ({"backend": "gl", "device": "cuda"}, "CUDA was asked for|the gl backend renders with OpenGL"),
])
def test_bad_backends_are_renderer_errors(kwargs, msg):
    with pytest.raises(RendererError, match=msg):
        ReferenceRenderer(**kwargs)


def test_without_egl_the_auto_backend_falls_back_to_torch(monkeypatch):
    """A machine with no libEGL still renders: `auto` says why in the log and takes the torch path."""
    from renderer.reference import gl

    def no_context(cls):
        raise gl.GLUnavailable("cannot open a headless OpenGL context (EGL): libEGL.so.1 not found", "renderer")

    monkeypatch.setattr(gl.StyleShader, "shared", classmethod(no_context))
    r = ReferenceRenderer("cpu")
    assert r.backend == "torch" and isinstance(r.open_session(W, H), ReferenceSession)
    with pytest.raises(RendererError, match="libEGL.so.1 not found"):
        ReferenceRenderer("cpu", backend="gl")
