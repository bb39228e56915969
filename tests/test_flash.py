"""The flash renderer's streaming session on the tiny config (CPU): shapes, chunking, history, determinism,
prompt switching, resizing and the user-facing errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gbuffer.frame import GBufferFrame
from helpers.torch_threads import one_torch_thread  # noqa: F401
from prompt_presets.conditioning import Conditioning, WeightedPrompt
from renderer import RendererError, create_renderer
from renderer.flash.config import TINY
from renderer.flash.decoder import DecoderStream, TinyDecoder
from renderer.flash.history import LatentHistory
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.sampler import FewStepSampler
from renderer.flash.text import PromptError, blend

RED, BLUE, GREEN = "a red desert world", "a blue ocean world", "a green jungle world"


def make_frames(n: int, width: int = 64, height: int = 32, start: int = 0, seed: int = 0) -> list[GBufferFrame]:
    rng = np.random.default_rng(seed)
    return [GBufferFrame(start + i, (start + i) / 30, rng.integers(0, 256, (5, height, width, 3), dtype=np.uint8))
            for i in range(n)]


def conds(text: str, n: int) -> list[Conditioning]:
    return [Conditioning.single(text)] * n


@pytest.fixture(scope="module")
def renderer():
    return create_renderer("flash", prompts=[RED, BLUE], chunk_size=8)


def test_odd_chunk_lengths_return_as_many_frames(renderer):
    with renderer.open_session(64, 32, seed=3) as session:
        for n in (8, 5, 1, 3, 8):
            result = session.render(make_frames(n), conds(RED, n))
            assert result.rgb.shape == (n, 32, 64, 3) and result.rgb.dtype == np.uint8
            assert {"gbuffer_encode", "denoise_step_0", "denoise_step_3", "decode"} <= set(result.timings_ms)
            assert result.peak_memory_bytes > 0


def test_frames_of_another_size_are_resized(renderer):
    with renderer.open_session(64, 32) as session:
        assert session.render(make_frames(4, 40, 24), conds(RED, 4)).rgb.shape == (4, 32, 64, 3)


def test_same_seed_same_video_other_seed_other_video(renderer):
    frames = make_frames(16)

    def rollout(seed):
        with renderer.open_session(64, 32, seed=seed) as s:
            return np.concatenate([s.render(frames[i:i + 8], conds(RED, 8)).rgb for i in (0, 8)])

    a, b, c = rollout(7), rollout(7), rollout(8)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_prompt_switch_changes_output_from_that_chunk_on_only(renderer):
    frames = make_frames(24)

    def rollout(prompts):
        """→ per chunk: RGB frames and the chunk's generated RGB latent (the newest history frames)."""
        out = []
        with renderer.open_session(64, 32, seed=1) as s:
            for i, p in enumerate(prompts):
                rgb = s.render(frames[8 * i: 8 * i + 8], conds(p, 8)).rgb
                out.append((rgb, s.history.recent_rgb(2).clone()))
        return out

    same = rollout([RED, RED, RED])
    switched = rollout([RED, RED, BLUE])
    for k in (0, 1):
        assert np.array_equal(same[k][0], switched[k][0]) and torch.equal(same[k][1], switched[k][1])
    assert not np.array_equal(same[2][0], switched[2][0])
    latent_change = (same[2][1] - switched[2][1]).abs().mean() / same[2][1].abs().mean()
    assert latent_change > 1e-3


def test_history_recache_re_renders_the_recent_history_under_the_new_prompt():
    """Same seed, same noise draws: the re-cached history differs between two new prompts only if the re-cache
    denoises under the new prompt (one that ignored it, or used the old one, would leave them equal)."""
    r = create_renderer("flash", prompts=[RED, BLUE, GREEN], chunk_size=8, recache_on_switch=True)
    frames = make_frames(16)

    def recached(new_prompt):
        with r.open_session(64, 32, seed=1) as s:
            s.render(frames[:8], conds(RED, 8))
            before = s.history.recent_rgb(1).clone()
            chunk = s.prepare(frames[8:], conds(new_prompt, 8))        # the re-cache runs here, before denoising
            return before, s.history.recent_rgb(1).clone(), chunk.timer.timings

    before, blue, timings = recached(BLUE)
    _, blue_again, _ = recached(BLUE)
    _, green, _ = recached(GREEN)
    assert "recache" in timings
    assert torch.equal(blue, blue_again)                    # deterministic: the noise is the seed's
    assert not torch.equal(blue, before)                    # the recent history was replaced ...
    change = (blue - green).abs().mean() / blue.abs().mean()
    assert change > 1e-3                                    # ... by a rendering that depends on the new prompt


def test_without_recache_a_switch_leaves_the_history_as_rendered():
    plain = create_renderer("flash", prompts=[RED, BLUE], chunk_size=8)
    frames = make_frames(16)
    with plain.open_session(64, 32, seed=1) as s:
        s.render(frames[:8], conds(RED, 8))
        before = s.history.recent_rgb(1).clone()
        chunk = s.prepare(frames[8:], conds(BLUE, 8))
        assert "recache" not in chunk.timer.timings and torch.equal(s.history.recent_rgb(1), before)


def test_history_and_decoder_memory_stay_bounded_over_a_long_rollout():
    r = create_renderer("flash", prompts=[RED], chunk_size=40, num_steps=1)   # history logic, not quality
    frames = make_frames(40, 32, 16)
    with r.open_session(32, 16, seed=0) as s:
        sizes = []
        for chunk in range(16):                              # 640 frames
            s.render(frames, conds(RED, 40))
            sizes.append((s.state_bytes(), {k: tuple(v.shape) for k, v in s.history.tensors().items()}))
            if chunk == 0:
                anchor = s.history.anchor.clone()
        assert s.frames_rendered == 640
        assert torch.equal(s.history.anchor, anchor)         # the first latent frame stays the anchor
    assert all(size == sizes[0] for size in sizes[1:])


def test_sampler_time_grid_is_the_shifted_schedule_from_sigma_max_to_zero():
    # sigma' = shift s / (1 + (shift - 1) s) on s = 1, 3/4, 1/2, 1/4, 0 (Wan / SD3's shift)
    assert torch.allclose(FewStepSampler(num_steps=4, shift=5.0).sigmas(),
                          torch.tensor([1.0, 15 / 16, 5 / 6, 5 / 8, 0.0]))
    assert torch.allclose(FewStepSampler(num_steps=2, shift=1.0, sigma_max=0.8).sigmas(), torch.tensor([0.8, 0.4, 0]))
    assert FewStepSampler(num_steps=8).sigmas().shape == (9,)


@pytest.mark.parametrize("mean_flow", [False, True])
def test_the_pipeline_asks_the_model_at_each_step_of_the_grid(mean_flow):
    """A velocity model is asked at t = sigma_i; a mean-flow model for its jump (t, t - r) = (sigma_i,
    sigma_i - sigma_i+1): exactly num_steps calls, in order, and the update uses what it answered."""
    config = dataclasses.replace(TINY, interval_embedding=mean_flow)
    pipe = FlashPipeline.random(config, seed=0, prompts=[RED], device="cpu")
    asked = []
    pipe.transformer.register_forward_pre_hook(lambda _m, args: asked.append(args[1].clone()))
    history = LatentHistory(config.history_sizes, config.in_channels, 2, 4, pipe.device, pipe.dtype)
    noise = torch.randn(1, 16, 2, 2, 4, generator=torch.Generator().manual_seed(0))
    pipe.denoise(noise, torch.zeros(1, 80, 2, 2, 4), pipe.prompts.prompt(RED).unsqueeze(0), history.inputs(2))
    sigmas = pipe.sampler.sigmas()
    expected = (torch.stack([sigmas[:-1], sigmas[:-1] - sigmas[1:]], dim=-1) if mean_flow else sigmas[:-1]) * 1000
    assert torch.allclose(torch.stack([a[0] for a in asked]), expected)


def test_chunked_decoding_equals_decoding_the_whole_stream():
    torch.manual_seed(0)
    decoder = TinyDecoder((16, 8, 8, 8)).eval()
    latents = torch.randn(1, 16, 5, 4, 6)
    with torch.no_grad():
        whole = decoder(latents, DecoderStream())
        memory = DecoderStream()
        parts = torch.cat([decoder(latents[:, :, i:i + 2], memory) for i in (0, 2, 4)], dim=1)
    assert whole.shape == (1, 20, 3, 32, 48)
    assert torch.allclose(whole, parts, rtol=1e-4, atol=1e-4)


def test_decoder_state_dict_uses_taehv_names():
    keys = set(TinyDecoder((16, 8, 8, 8)).state_dict())
    assert {"decoder.1.weight", "decoder.3.conv.0.weight", "decoder.3.conv.4.bias", "decoder.7.conv.weight",
            "decoder.13.conv.weight", "decoder.19.conv.weight", "decoder.20.weight", "decoder.22.bias"} <= keys
    assert not any(k.startswith(("decoder.0.", "decoder.2.", "decoder.6.", "decoder.21.")) for k in keys)


def test_blends_interpolate_between_prompt_embeddings():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.allclose(blend([a, b], [0.25, 0.75], "linear"), 0.25 * a + 0.75 * b)
    assert torch.allclose(blend([a, b], [1.0, 0.0], "slerp"), a, atol=1e-5)
    mid = blend([a, b], [0.5, 0.5], "slerp")
    assert abs(mid.norm() - (a.norm() + b.norm()) / 2) < 1e-4     # slerp keeps the norm, lerp shrinks it
    two = Conditioning((WeightedPrompt(RED, 0.5), WeightedPrompt(BLUE, 0.5)), "slerp")
    r = create_renderer("flash", prompts=[RED, BLUE])
    bank = r.pipeline.prompts
    assert bank.conditioning(two).shape == (r.pipeline.config.text_len, r.pipeline.config.text_dim)
    # a chunk straddling a cut gets the frame-weighted mean of its frames' conditionings
    chunk = bank.chunk(conds(RED, 6) + conds(BLUE, 2))
    assert torch.allclose(chunk, 0.75 * bank.prompt(RED) + 0.25 * bank.prompt(BLUE), atol=1e-6)


def test_unknown_prompt_without_text_encoder_is_a_clear_error(renderer):
    with renderer.open_session(64, 32) as s, pytest.raises(PromptError, match="no embedding for prompt 'a purple"):
        s.render(make_frames(4), conds("a purple moon", 4))


def test_text_encoder_directory_without_umt5_is_a_clear_error(tmp_path):
    with pytest.raises(PromptError, match="no tokenizer/ folder: expected a Wan 2.1 diffusers directory"):
        create_renderer("flash", text_encoder=str(tmp_path))


def test_unknown_prompt_can_fall_back_to_the_nearest_presets():
    from prompt_presets.presets import get_preset

    r = create_renderer("flash", unknown_prompt="presets")
    bank = r.pipeline.prompts
    lava = bank.prompt("glowing lava fields and fire")
    distance = {name: float((lava - bank.prompt(get_preset(name).prompt)).norm()) for name in ("volcano", "polar")}
    assert distance["volcano"] < distance["polar"]
    with pytest.raises(RendererError, match="unknown_prompt: Input should be 'error' or 'presets'"):
        create_renderer("flash", unknown_prompt="guess")


@pytest.mark.parametrize("width,height", [(60, 32), (64, 0), (8, 32)])
def test_sizes_must_be_multiples_of_16(renderer, width, height):
    with pytest.raises(RendererError, match=r"multiples of 16|must be an integer 1\.\.4096"):
        renderer.open_session(width, height)


def test_bad_chunks_and_settings_are_clear_errors(renderer):
    with renderer.open_session(64, 32) as s, pytest.raises(RendererError, match="1..8 frames, got 9"):
        s.render(make_frames(9), conds(RED, 9))
    with pytest.raises(RendererError, match="^chunk_frames: unknown field$"):
        create_renderer("flash", chunk_frames=8)
    with pytest.raises(RendererError, match="^chunk_size: must be a positive multiple of 4, got 6$"):
        create_renderer("flash", chunk_size=6)
    with pytest.raises(RendererError, match="^num_steps: Input should be a valid integer.*'four'"):
        create_renderer("flash", num_steps="four")
    with pytest.raises(RendererError, match="^num_steps: Input should be greater than or equal to 1"):
        create_renderer("flash", num_steps=0)
    with pytest.raises(RendererError, match="^sampler_update: Input should be 'euler' or 'renoise'"):
        create_renderer("flash", sampler_update="heun")
    with pytest.raises(RendererError, match="^device: CUDA was asked for"):
        if not torch.cuda.is_available():
            create_renderer("flash", device="cuda")
        else:
            raise RendererError("device: CUDA was asked for (skipped: CUDA present)")
    with pytest.raises(RendererError, match="unknown flash config 'huge'"):
        create_renderer("flash", config="huge")


def test_a_chunk_streams_out_frame_by_frame_with_the_same_frames(renderer):
    """render_stream hands each frame over as soon as it is decoded (a live session sends it before the chunk's
    later ones exist); together they are the chunk render() gives."""
    cond = conds(RED, 8)
    with renderer.open_session(64, 32, seed=5) as whole, renderer.open_session(64, 32, seed=5) as streamed:
        for k in range(3):
            chunk = make_frames(8, start=8 * k, seed=k)
            expected = whole.render(chunk, cond).rgb
            parts = [p.rgb for p in streamed.render_stream(chunk, cond)]
            assert [len(p) for p in parts] == [1] * 8
            assert np.abs(np.concatenate(parts).astype(np.int16) - expected.astype(np.int16)).max() <= 1, k
        tail = list(streamed.render_stream(make_frames(5, start=24), conds(RED, 5)))   # a short last chunk
        assert [len(p.rgb) for p in tail] == [1] * 5
