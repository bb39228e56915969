"""The flash renderer live: what serving changes for latency keeps every output value, and a chunk starts just in
time behind the frames still waiting to go out."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from helpers.torch_threads import one_torch_thread, random_frames  # noqa: F401
from prompt_presets.conditioning import Conditioning
from prompt_presets.presets import get_preset
from renderer import create_renderer
from webrtc.track import FrameBuffer, OutgoingFrame

POLAR, VOLCANO = get_preset("polar").prompt, get_preset("volcano").prompt


def rollout(renderer, prompts: list[str], chunk: int = 4) -> np.ndarray:
    frames = random_frames(chunk * len(prompts), seed=5)
    with renderer.open_session(64, 32, seed=2) as session:
        out = [r.rgb for k, text in enumerate(prompts)
               for r in session.render_stream(frames[k * chunk:(k + 1) * chunk], [Conditioning.single(text)] * chunk)]
    return np.concatenate(out)


def test_a_served_renderer_shares_each_chunks_steps_and_renders_the_librarys_frames():
    """ChunkSteps (what a chunk's steps share computed once), the depth-first decoder and the pixel-major
    refiner, over a rollout whose history and prompt change between chunks: the frames of the library's forward
    and layout, a level of rounding here and there."""
    fast = create_renderer("flash", config="tiny", chunk_size=4)
    plain = create_renderer("flash", config="tiny", chunk_size=4)
    assert fast.pipeline.shared_steps
    plain.pipeline.shared_steps = False
    prompts = [POLAR, POLAR, VOLCANO, VOLCANO, POLAR, VOLCANO]
    difference = np.abs(rollout(fast, prompts).astype(int) - rollout(plain, prompts))
    assert difference.max() <= 1 and (difference > 0).mean() < 0.01


def test_the_next_chunks_history_tokens_are_made_after_a_chunk_and_dropped_when_the_history_changes():
    """After a streamed chunk the session makes the next chunk's history tokens (they depend on the history
    alone); the next chunk takes them, unless the history changed meanwhile (a re-cache under a new prompt)."""
    from renderer.flash.chunk_steps import history_tokens

    renderer = create_renderer("flash", config="tiny", chunk_size=4, recache_on_switch=True)
    plain = create_renderer("flash", config="tiny", chunk_size=4, recache_on_switch=True)
    plain.pipeline.shared_steps = False
    pipe, taken = renderer.pipeline, []
    chunk_velocity = pipe.chunk_velocity
    pipe.chunk_velocity = lambda *args: taken.append(args[3] if len(args) > 3 else None) or chunk_velocity(*args)
    frames = random_frames(16, seed=3)
    prompts = [POLAR, POLAR, VOLCANO, VOLCANO]          # the switch re-caches the history before chunk 3's steps
    with renderer.open_session(64, 32, seed=2) as session, plain.open_session(64, 32, seed=2) as reference:
        for k, text in enumerate(prompts):
            cond = [Conditioning.single(text)] * 4
            got = np.concatenate([r.rgb for r in session.render_stream(frames[4 * k:4 * k + 4], cond)])
            expected = np.concatenate([r.rgb for r in reference.render_stream(frames[4 * k:4 * k + 4], cond)])
            assert np.abs(got.astype(int) - expected).max() <= 1, k
            version, tokens = session.ahead
            assert version == session.history.version
            with torch.inference_mode():
                torch.testing.assert_close(tokens, history_tokens(pipe.transformer, session.history.inputs(1)))
    # chunk 1: nothing made yet; 2: made after 1; 3: the re-cache's own steps, then stale tokens dropped; 4: made
    assert [t is not None for t in taken] == [False, True, False, False, True]


def _chunk_inputs(pipe, batch: int, seed: int = 0):
    """A chunk's inputs with a history that is not zeros: random latents pushed (rows differ)."""
    from renderer.flash.batch import stack_history
    from renderer.flash.history import LatentHistory

    g = torch.Generator().manual_seed(seed)
    cfg, (h, w) = pipe.config, (4, 6)
    rows = []
    for _ in range(batch):
        history = LatentHistory(cfg.history_sizes, cfg.in_channels, h, w, pipe.device, pipe.dtype)
        for _ in range(sum(cfg.history_sizes) - 1):
            history.push(torch.randn(1, 16, 1, h, w, generator=g), torch.randn(1, 80, 1, h, w, generator=g))
        rows.append(history.inputs(2))
    return (torch.randn(batch, 16, 2, h, w, generator=g), torch.randn(batch, 80, 2, h, w, generator=g),
            torch.randn(batch, cfg.text_len, cfg.text_dim, generator=g), stack_history(rows))


@pytest.mark.parametrize("variant", ["sink", "no sink", "mean flow", "amplified history", "bf16"])
def test_a_chunks_shared_steps_give_the_velocity_of_the_librarys_forward(variant):
    import dataclasses

    from renderer.flash.chunk_steps import supports
    from renderer.flash.config import get_config
    from renderer.flash.pipeline import FlashPipeline

    cfg = get_config("tiny")
    if variant == "mean flow":
        cfg = dataclasses.replace(cfg, interval_embedding=True)
    if variant == "amplified history":
        cfg = dataclasses.replace(cfg, helios={"is_amplify_history": True})
    pipe = FlashPipeline.random(cfg, 0, None, "cpu", torch.bfloat16 if variant == "bf16" else None)
    if variant == "no sink":
        pipe.transformer.text_sink = None
        for block in pipe.transformer.blocks:
            block._forward_pre_hooks.clear()
    if variant == "amplified history":                # away from the initial scale, so a missing one shows
        for block in pipe.transformer.blocks:
            block.attn1.history_key_scale.data.uniform_(-2, 2)
    assert supports(pipe.transformer)
    noisy, gbuffer, prompt, history = _chunk_inputs(pipe, batch=2)
    end = 0.3 if variant == "mean flow" else None
    with torch.inference_mode():
        library = pipe.chunk_velocity(gbuffer, prompt, history)
        pipe.shared_steps = True
        shared = pipe.chunk_velocity(gbuffer, prompt, history)
        for sigma in (1.0, 0.6):                      # one chunk's steps: the shared parts reused
            expected = library(noisy, sigma, end)
            got = shared(noisy, sigma, end)
            if variant == "bf16":                     # bf16 rounds op by op: about one unit in the last place
                torch.testing.assert_close(got, expected, atol=0.05, rtol=0.02)
            else:
                torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-5)
            noisy = noisy * 0.5


def test_a_helios_layout_chunk_steps_do_not_cover_runs_the_librarys_forward():
    import dataclasses

    from renderer.flash.config import get_config
    from renderer.flash.pipeline import FlashPipeline

    pipe = FlashPipeline.random(dataclasses.replace(get_config("tiny"), helios={"guidance_cross_attn": False}))
    from renderer.flash.serving import share_chunk_steps
    assert not share_chunk_steps(pipe) and not pipe.shared_steps
    noisy, gbuffer, prompt, history = _chunk_inputs(pipe, batch=1)
    with torch.inference_mode():
        v = pipe.chunk_velocity(gbuffer, prompt, history)(noisy, 1.0, None)
        torch.testing.assert_close(v, pipe.velocity(noisy, 1.0, gbuffer, prompt, history), atol=0, rtol=0)


def test_patchify_as_a_matrix_product_equals_the_convolution():
    from renderer.flash.chunk_steps import patchify

    conv = create_renderer("flash", config="tiny").pipeline.transformer.patch_long
    x = torch.randn(2, conv.in_channels, 5, 19, 27, generator=torch.Generator().manual_seed(0))  # remainders
    with torch.inference_mode():                                  # that fill no whole patch are dropped
        # each output sums 24,576 products: the two summation orders differ by ~1e-5 on AVX2 machines
        torch.testing.assert_close(patchify(x, conv.weight, conv.bias), torch.nn.Conv3d.forward(conv, x),
                                   atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("trim", [False, True])
def test_the_decoder_hands_over_frame_by_frame_what_it_decodes_whole(trim):
    """TinyDecoder.frames: frame for frame what forward gives over a stream (its memory after each latent the
    same), start-up frames trimmed alike; and depth first: the first frame leaves having run the full-size
    layers on one frame only."""
    from renderer.flash.decoder import DecoderStream, TinyDecoder

    torch.manual_seed(0)
    decoder = TinyDecoder((32, 16, 8, 8)).eval().to(memory_format=torch.channels_last)
    latents = torch.randn(2, 16, 3, 4, 6)
    whole, framed = DecoderStream(trim), DecoderStream(trim)
    last = decoder.decoder[-1]
    calls = []
    handle = last.register_forward_hook(lambda _m, args, _out: calls.append(args[0].shape[0]))
    with torch.inference_mode():
        for j in range(latents.shape[2]):
            latent = latents[:, :, j:j + 1]
            expected = decoder(latent, whole)
            calls.clear()
            frames = decoder.frames(latent, framed)
            first = next(frames, None)
            if j == 0 and trim:             # the 3 start-up frames are decoded (and dropped) before the first
                assert len(calls) == 4
            else:                           # one full-size pass, the 2 streams' frame at once
                assert calls == [2]
            got = torch.cat(([first] if first is not None else []) + list(frames), dim=1)
            assert got.shape == expected.shape
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            assert whole.last.keys() == framed.last.keys()
            for key in whole.last:
                torch.testing.assert_close(framed.last[key], whole.last[key], atol=1e-5, rtol=1e-5)
    handle.remove()
    with pytest.raises(ValueError, match="one latent frame at a time"):
        next(decoder.frames(latents, DecoderStream()))


def test_the_grouped_temporal_pool_as_a_matrix_product_equals_the_grouped_convolution():
    from renderer.flash.gbuffer_encoder import G, GroupedTPool

    torch.manual_seed(0)
    pool = GroupedTPool(G * 4, 2)
    x = torch.randn(6, G * 4, 5, 7)
    nt, c, h, w = x.shape
    regrouped = x.reshape(nt // 2, 2, G, c // G, h, w).transpose(1, 2).reshape(nt // 2, 2 * c, h, w)
    expected = pool.conv(regrouped)               # frames of one branch side by side, its own group
    for layout in (torch.contiguous_format, torch.channels_last):
        torch.testing.assert_close(pool(x.contiguous(memory_format=layout)), expected, atol=1e-6, rtol=1e-6)


def test_a_chunks_gbuffer_reaches_the_codecs_channels_last_without_a_copy():
    from renderer.flash.session import frames_to_tensor

    frames = random_frames(3, seed=1)
    x = frames_to_tensor(frames, 64, 32)
    assert x.shape == (1, 4, 5, 3, 32, 64)
    expected = torch.from_numpy(np.stack([f.data for f in frames])).permute(0, 1, 4, 2, 3).float() / 255
    torch.testing.assert_close(x[0, :3], expected, atol=0, rtol=0)
    assert torch.equal(x[0, 3], x[0, 2])                          # padded by repeating the last frame
    flat = x[0].flatten(1, 2)
    assert flat.data_ptr() == x.data_ptr() and flat.is_contiguous(memory_format=torch.channels_last)


def test_the_served_codec_runs_channels_last_with_the_same_frames(tmp_path):
    """A loaded model's convolutions go channels-last on the CPU (oneDNN runs the narrow ones faster); the
    frames stay those of the library's layout up to rounding."""
    import dataclasses

    from renderer.flash.config import get_config
    from renderer.flash.pipeline import FlashPipeline

    FlashPipeline.random(dataclasses.replace(get_config("tiny"), refiner_looks=2), 0, None, "cpu").save(tmp_path)
    fast = create_renderer("flash", weights=str(tmp_path), chunk_size=4)
    plain = create_renderer("flash", weights=str(tmp_path), chunk_size=4)
    def codecs(pipe):
        return (pipe.gbuffer_encoder, pipe.decoder, pipe.refiner)
    for module in codecs(plain.pipeline):                       # back to the layout the library made
        module.to(memory_format=torch.contiguous_format)
    for fast_module, plain_module in zip(codecs(fast.pipeline), codecs(plain.pipeline)):
        convs = [(f, p) for f, p in zip(fast_module.modules(), plain_module.modules())
                 if isinstance(f, torch.nn.Conv2d) and f.kernel_size == (3, 3)]
        assert convs and all(f.weight.is_contiguous(memory_format=torch.channels_last)
                             and not p.weight.is_contiguous(memory_format=torch.channels_last) for f, p in convs)
    prompts = [POLAR, VOLCANO, POLAR]
    difference = np.abs(rollout(fast, prompts).astype(int) - rollout(plain, prompts))
    assert difference.max() <= 1 and (difference > 0).mean() < 0.01


def _frame(i: int) -> OutgoingFrame:
    import av

    return OutgoingFrame(i, av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24"), 0.0)


@pytest.mark.parametrize("render_s, first_s, due_at_depth",
                         [(0.05, None, 1), (0.11, None, 3), (0.02, None, 0), (0.11, 0.05, 1), (0.11, 0.08, 2)])
def test_a_chunk_starts_when_the_frames_waiting_go_out_while_it_renders(render_s, first_s, due_at_depth):
    """4-frame chunks at 30 fps (a frame leaves every 33 ms): a chunk whose first frame is ready `first_s` after
    it starts (a chunk handed over whole: render_s) starts once at most first_s / 33 ms frames wait; rendering
    earlier would only make its frames wait behind them."""
    async def run():
        buffer = FrameBuffer(4, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(4, render_s, first_s)
        for i in range(4):
            assert buffer.put(_frame(i), timeout=0)
        depths = []
        while True:
            if buffer.wait_to_render(timeout=0):
                return buffer.queued, depths
            depths.append(buffer.queued)
            await buffer.get()
    queued, waited_at = asyncio.run(run())
    assert queued == due_at_depth and waited_at == list(range(4, due_at_depth, -1))


def test_a_renderer_slower_than_the_stream_starts_as_soon_as_there_is_room():
    async def run():
        buffer = FrameBuffer(4, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(4, 0.4)                  # 100 ms a frame: the track paces at the renderer's rate
        for i in range(4):
            buffer.put(_frame(i), timeout=0)
        full = buffer.wait_to_render(timeout=0)
        await buffer.get()
        return full, buffer.wait_to_render(timeout=0)
    assert asyncio.run(run()) == (False, True)


def test_serve_renders_flash_in_one_latent_chunks_on_one_thread_unless_told_otherwise(tmp_path):
    from studio.cli import build_parser
    from studio.commands.serve import settings_from_args

    def options(*extra: str) -> dict:
        args = build_parser().parse_args(["serve", "--renderer", "flash", "--weights", str(tmp_path), *extra])
        return settings_from_args(args).renderer_options
    assert {k: options()[k] for k in ("chunk_size", "threads")} == {"chunk_size": 4, "threads": 1}
    told = options("--renderer-option", "chunk_size=8", "--renderer-option", "threads=2")
    assert (told["chunk_size"], told["threads"]) == (8, 2)
