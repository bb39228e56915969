"""Batched flash sessions (issue 13): one forward pass for several sessions' chunks, each session's frames the
same as when it runs alone."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.torch_threads import one_torch_thread, random_frames  # noqa: F401
from prompt_presets.conditioning import Conditioning
from renderer import create_renderer
from renderer.flash.batch import render_batch

PROMPTS = ["a red brick city at noon", "a blue ice cave", "a green jungle ruin"]


@pytest.mark.parametrize("sampler", ["euler", "renoise"])
def test_a_session_renders_the_same_alone_or_in_a_batch_of_three(sampler):
    """Three sessions, each its own prompt, seed and G-buffer stream, three chunks each (so history, anchor,
    encoder and decoder memories all carry over): the batch gives every session the frames it gets alone."""
    renderer = create_renderer("flash", prompts=PROMPTS, chunk_size=8, sampler_update=sampler)
    streams = [[random_frames(8, 8 * k, seed=10 * s + k) for k in range(3)] for s in range(3)]
    conds = [[Conditioning.single(PROMPTS[s])] * 8 for s in range(3)]

    alone = []
    for s in range(3):
        with renderer.open_session(64, 32, seed=s) as session:
            alone.append([session.render(chunk, conds[s]).rgb for chunk in streams[s]])
    batched = [[] for _ in range(3)]
    sessions = [renderer.open_session(64, 32, seed=s) for s in range(3)]
    for k in range(3):
        results = render_batch(sessions, [streams[s][k] for s in range(3)], conds)
        assert not [r for r in results if isinstance(r, Exception)], results
        for s, result in enumerate(results):
            batched[s].append(result.rgb)
    for s in range(3):
        for k in range(3):
            diff = np.abs(alone[s][k].astype(np.int16) - batched[s][k].astype(np.int16))
            assert diff.max() <= 2, f"session {s}, chunk {k}: differs by up to {diff.max()} levels"
    # and the sessions really differ from each other (the batch did not mix them up)
    assert np.abs(batched[0][2].astype(np.int16) - batched[1][2].astype(np.int16)).mean() > 1


def test_sessions_that_cannot_share_a_pass_are_rendered_in_their_own_groups():
    renderer = create_renderer("flash", prompts=PROMPTS, chunk_size=8)
    long, short = renderer.open_session(64, 32, seed=1), renderer.open_session(64, 32, seed=2)
    results = render_batch([long, short], [random_frames(8, 0, 1), random_frames(4, 0, 2)],
                           [[Conditioning.single(PROMPTS[0])] * 8, [Conditioning.single(PROMPTS[1])] * 4])
    assert [r.rgb.shape[0] for r in results] == [8, 4]
    with renderer.open_session(64, 32, seed=2) as alone:
        expected = alone.render(random_frames(4, 0, 2), [Conditioning.single(PROMPTS[1])] * 4).rgb
    assert np.abs(results[1].rgb.astype(np.int16) - expected.astype(np.int16)).max() <= 2
