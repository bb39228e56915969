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
from renderer.flash.serving import HISTORY_PATCHIFIERS, LastCall, patchify_as_matmul
from webrtc.track import FrameBuffer, OutgoingFrame

POLAR, VOLCANO = get_preset("polar").prompt, get_preset("volcano").prompt


def rollout(renderer, prompts: list[str], chunk: int = 4) -> np.ndarray:
    frames = random_frames(chunk * len(prompts), seed=5)
    with renderer.open_session(64, 32, seed=2) as session:
        out = [r.rgb for k, text in enumerate(prompts)
               for r in session.render_stream(frames[k * chunk:(k + 1) * chunk], [Conditioning.single(text)] * chunk)]
    return np.concatenate(out)


def test_history_patches_are_reused_across_the_steps_of_a_chunk_with_the_same_frames():
    fast = create_renderer("flash", config="tiny", chunk_size=4)
    calls = {name: fast.pipeline.transformer.get_submodule(name).forward for name in HISTORY_PATCHIFIERS}
    assert all(isinstance(c, LastCall) for c in calls.values())
    plain = create_renderer("flash", config="tiny", chunk_size=4)
    for name in HISTORY_PATCHIFIERS:                   # the library's own forward, computing at every step
        del plain.pipeline.transformer.get_submodule(name).forward
    prompts = [POLAR, POLAR, VOLCANO, VOLCANO, POLAR, VOLCANO]     # history and prompt change between chunks
    fast_frames, plain_frames = rollout(fast, prompts), rollout(plain, prompts)
    # the long tier's matrix product rounds differently from oneDNN's convolution: a level here and there
    difference = np.abs(fast_frames.astype(int) - plain_frames)
    assert difference.max() <= 1 and (difference > 0).mean() < 0.01
    steps = fast.pipeline.sampler.num_steps
    # steps after the first reuse the patches of the history; the short tier changes from chunk to chunk (the
    # long one stays zeros over the first chunks, and is reused across them too)
    assert calls["patch_short"].hits == len(prompts) * (steps - 1)
    assert calls["patch_long"].hits > len(prompts) * (steps - 1)


def test_the_long_patchifier_as_a_matrix_product_equals_the_convolution():
    conv = create_renderer("flash", config="tiny").pipeline.transformer.patch_long
    x = torch.randn(2, conv.in_channels, 5, 19, 27, generator=torch.Generator().manual_seed(0))  # remainders
    with torch.inference_mode():                                  # that fill no whole patch are dropped
        # each output sums 24,576 products: the two summation orders differ by ~1e-5 on AVX2 machines
        torch.testing.assert_close(patchify_as_matmul(conv)(x), torch.nn.Conv3d.forward(conv, x),
                                   atol=1e-4, rtol=1e-5)


def test_the_served_codec_runs_channels_last_with_the_same_frames(tmp_path):
    """A loaded model's convolutions go channels-last on the CPU (oneDNN runs the narrow ones faster); the
    frames stay those of the library's layout up to rounding."""
    import dataclasses

    from renderer.flash.config import get_config
    from renderer.flash.pipeline import FlashPipeline

    FlashPipeline.random(dataclasses.replace(get_config("tiny"), refiner_looks=2), 0, None, "cpu").save(tmp_path)
    fast = create_renderer("flash", weights=str(tmp_path), chunk_size=4)
    plain = create_renderer("flash", weights=str(tmp_path), chunk_size=4)
    codecs = lambda pipe: (pipe.gbuffer_encoder, pipe.decoder, pipe.refiner)
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
