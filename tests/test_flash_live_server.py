"""A flash model with its own sentence encoder (MiniLM, `text_encoder: minilm`) served live: a switch from the
gallery (a preset), the timeline (a switch placed at a later frame) and free text reaches the session's flash
renderer and changes the prompt embedding it renders with, through a real server and a real aiortc peer; the
embeddings it rendered with give different pictures."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest
import torch

from helpers.torch_threads import one_torch_thread, random_frames  # noqa: F401
from prompt_presets.conditioning import Conditioning
from prompt_presets.phrasings import all_phrasings
from prompt_presets.presets import get_preset
from renderer.flash.pipeline import FlashPipeline, preset_prompts
from renderer.flash.text import PromptBank, SentenceProjection
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer

SIZE = {"size": "64x32", "fps": 30, "source": "demo"}   # the built-in engine: live, its timeline never loops
FREE_TEXT = "a frozen polar landscape at dawn"         # in no preset and no training phrasing


@pytest.fixture(scope="module")
def minilm_weights(tmp_path_factory):
    """Random tiny weights whose prompts are embedded by MiniLM (as `train` writes a small model): presets in
    the cache, free text through the encoder."""
    pipe = FlashPipeline.random("tiny", seed=4, device="cpu")
    dim = pipe.config.text_dim
    projection = SentenceProjection.fit([t for texts in all_phrasings().values() for t in texts], dim)
    presets = preset_prompts()
    pipe.config = dataclasses.replace(pipe.config, text_encoder="minilm")
    pipe.prompts = PromptBank(pipe.config.text_len, dim, dict(zip(presets, projection.embed(presets).unsqueeze(1))),
                              projection)
    root = tmp_path_factory.mktemp("minilm-tiny")
    pipe.save(root)
    return root, projection


@pytest.fixture(scope="module")
def studio(minilm_weights):
    options = {"weights": str(minilm_weights[0]), "unknown_prompt": "presets", "chunk_size": 4, "threads": 1}
    with BackgroundServer(Settings(port=0, max_sessions=1, renderer="flash", renderer_options=options,
                                   connect_timeout_s=30)) as server:
        yield server


async def rendered_with(viewer: StudioViewer, flash, label: str, frame: int) -> torch.Tensor:
    """The prompt embedding the session's flash renderer used, once a whole chunk from `frame` on has gone out
    labelled `label` (the chunk after it is rendered by then)."""
    await viewer.wait_until(lambda: any(s["frame"] >= frame + 2 * flash.chunk_size and s["label"] == label
                                        for s in viewer.statuses()), 120, f"frames labelled {label}")
    return flash.last_prompt.clone()


def test_gallery_timeline_and_free_text_switch_the_flash_sessions_prompt_embedding(studio, minilm_weights):
    _, projection = minilm_weights

    async def scenario():
        async with StudioViewer(studio.url, keep_pixels=False, **SIZE) as viewer:
            hello = await viewer.wait_message("hello")
            assert hello["renderer"] == "flash"
            await viewer.wait_frames(4, timeout=120)
            flash = studio.sessions[viewer.session_id].rollout.session
            bank = flash.pipeline.prompts
            assert flash.chunk_size == 4

            mark = await viewer.send({"type": "preset", "name": "polar"})                      # the gallery
            ack = await viewer.wait_message("ack", after=mark, request="preset")
            polar = await rendered_with(viewer, flash, "polar", ack["frame"])

            at = ack["frame"] + 60                                                             # the timeline
            mark = await viewer.send({"type": "switch", "frame": at, "prompts": [{"preset": "volcano"}]})
            await viewer.wait_message("ack", after=mark, request="switch")
            volcano = await rendered_with(viewer, flash, "volcano", at)
            first = next(s for s in viewer.statuses() if s["label"] == "volcano")
            assert first["frame"] == at                                   # it lands on the frame it was placed at

            mark = await viewer.send({"type": "prompt", "text": FREE_TEXT})                    # free text
            ack = await viewer.wait_message("ack", after=mark, request="prompt", timeout=180)
            free = await rendered_with(viewer, flash, ack["label"], ack["frame"])
            return bank, polar, volcano, free

    bank, polar, volcano, free = asyncio.run(scenario())
    torch.testing.assert_close(polar[0], bank.prompt(get_preset("polar").prompt), rtol=0, atol=0)
    torch.testing.assert_close(volcano[0], bank.prompt(get_preset("volcano").prompt), rtol=0, atol=0)
    # free text went through the model's own sentence encoder, not the nearest presets
    torch.testing.assert_close(free[0, 0], projection(FREE_TEXT)[0])
    assert not free[0, 1:].any()
    for a, b in ((polar, volcano), (polar, free), (volcano, free)):
        assert (a - b).abs().max() > 0.1

    # ... and the prompts it rendered with give different pictures from the same state and G-buffer frames
    renderer = studio.app.state.sessions.loaded_renderer("flash")
    frames = random_frames(8, width=64, height=32, seed=1)

    def picture(text: str) -> np.ndarray:
        with renderer.open_session(64, 32, seed=0) as session:
            return np.concatenate([session.render(frames[i:i + 4], [Conditioning.single(text)] * 4).rgb
                                   for i in (0, 4)]).astype(int)
    torch.testing.assert_close(bank.prompt(FREE_TEXT), free[0], rtol=0, atol=0)
    texts = (get_preset("polar").prompt, get_preset("volcano").prompt, FREE_TEXT)
    pictures = [picture(t) for t in texts]
    np.testing.assert_array_equal(picture(texts[0]), pictures[0])       # the same prompt: the same pictures
    for a, b in ((0, 1), (0, 2), (1, 2)):     # random weights: a prompt moves the picture ~0.4 levels on average
        assert np.abs(pictures[a] - pictures[b]).mean() > 0.1, (a, b)


def test_each_frames_status_splits_its_latency_into_the_take_the_render_and_the_wait_to_be_sent(studio):
    """A chunk's frames share its start and its take (the built-in engine renders them then); each frame says when
    it was handed over (ready_ms, later for a later frame of the chunk) and left (latency_ms, later still)."""
    async def scenario():
        async with StudioViewer(studio.url, keep_pixels=False, **SIZE) as viewer:
            await viewer.wait_until(lambda: len(viewer.statuses()) >= 16, 120, "four chunks of frames sent")
            return viewer.statuses()

    chunks: dict[float, list[dict]] = {}
    for status in asyncio.run(scenario()):
        chunks.setdefault(status["rendered_wall"], []).append(status)
    whole = [c for c in chunks.values() if len(c) == 4]
    assert len(whole) >= 2, {k: len(c) for k, c in chunks.items()}
    for chunk in whole:
        assert len({s["take_ms"] for s in chunk}) == 1, chunk
        assert [s["frame"] for s in chunk] == list(range(chunk[0]["frame"], chunk[0]["frame"] + 4))
        ready = [s["ready_ms"] for s in chunk]
        assert 0 < chunk[0]["take_ms"] < ready[0] and ready == sorted(ready), chunk
        assert all(s["ready_ms"] <= s["latency_ms"] for s in chunk), chunk
